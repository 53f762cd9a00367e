"""One peer crawls the encodings web, and the export says what every page is called.

Pages in GBK (undeclared, and under a `<meta>` that says utf-8), Big5, Shift_JIS,
EUC-KR, windows-1251 and UTF-8 with a BOM, and a host with a Chinese name: the referee
checks that every URL was requested once (an href read in the wrong encoding resolves
to a URL that is not there), and the JSON Lines export gives each page its title in
its script, the encoding it was read in and what decided it, and the internationalised
host in its Unicode form beside the punycode one.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.test_single_peer import DELAY, assert_perfect, finish, world
from ubipy.store.export import export
from ubipy.synthweb import WebSpec
from ubipy.synthweb.truth import expected_encodings, expected_titles, ground_truth

SPEC = WebSpec(seed=11, encodings=True)
IDN_HOST = "xn--p0xp4y9jao6v.synth.test"


async def test_the_encodings_web_is_crawled_and_exported_with_its_titles(tmp_path: Path) -> None:
    data = tmp_path / "peer"
    async with world(SPEC) as w:
        assert w.web.encodings is not None
        enc = w.web.encodings
        seeds = [f"http://{host}/" for host in enc.hosts if host != enc.idn_host]
        peer = await w.start_peer(w.config(data))
        peer.crawler.seed(seeds)
        await finish(peer)
        log = w.server.log
    truth = ground_truth(w.web, seeds)
    assert f"http://{IDN_HOST}/" in truth  # reached only through a GBK page's href
    assert_perfect(log, w.web, truth, DELAY)
    # Punycode on the wire: the server was asked for the ASCII name only.
    assert IDN_HOST in {r.host for r in log}

    out = tmp_path / "pages.jsonl"
    summary = export([data], "jsonl", out)
    rows = {row["url"]: row for row in map(json.loads, out.read_text("utf-8").splitlines())}
    assert summary.pages == len(rows)
    titles = expected_titles(w.web, truth)
    encodings = expected_encodings(w.web)
    assert set(encodings) <= set(rows)
    for url, (name, source) in encodings.items():
        row = rows[url]
        assert (row["title"], row["encoding"], row["encoding_source"]) == (
            titles[url],
            name,
            source,
        ), url
    assert rows["http://enc-gbk.synth.test/"]["title"] == "分布式网络爬虫的设计与实现"
    assert rows["http://enc-gbk-wrong-meta.synth.test/"]["title"] == "基于一致性哈希的任务分配"
    # Every exported title is the model's, for every HTML page: nothing else was harmed.
    for url, title in titles.items():
        assert rows[url]["title"] == title, url
    # The internationalised host: ASCII where it is a URL on the wire, Unicode to read.
    idn = rows[f"http://{IDN_HOST}/"]
    assert idn["url_unicode"] == "http://网络爬虫.synth.test/"
    assert rows["http://enc-gbk.synth.test/"]["url_unicode"] == "http://enc-gbk.synth.test/"
