"""One peer crawls the synthetic web on loopback and finds the pages that only sitemaps
list: named by robots.txt (one on another host), at /sitemap.xml, through a sitemap
index and its gzipped children (a .gz file, and Content-Encoding: gzip). The referee
says 100% only when they are all fetched, once each; with --no-sitemaps none is."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from tests.e2e.test_single_peer import DELAY, assert_perfect, finish, world
from ubipy.config import BoundsConfig
from ubipy.store import export
from ubipy.synthweb.truth import ground_truth
from ubipy.synthweb.urls import split_url


async def test_pages_listed_only_in_sitemaps_are_fetched_once(tmp_path: Path) -> None:
    async with world() as w:
        peer = await w.start_peer(w.config(tmp_path))
        seed = w.web.seed_url()
        peer.crawler.seed([seed])
        await finish(peer)
        log = w.server.log
        status = peer.status().as_json()
    sitemaps = w.web.sitemaps
    truth = ground_truth(w.web, [seed])
    assert_perfect(log, w.web, truth, DELAY)
    names = sitemaps.names
    only_in_sitemaps = {
        url
        for name, url in names.items()
        if name not in ("sitemap_never", "sitemap_disallowed", "sitemap_index")
        and name != "sitemap_nested_index"
    }
    assert len(only_in_sitemaps) == 9
    requested = {r.url for r in log}
    assert only_in_sitemaps <= truth and only_in_sitemaps <= requested
    # The index in the index is asked for, and read no further; robots.txt still rules.
    assert names["sitemap_nested_index"] in requested
    assert "http://h000.synth.test/maps/too-deep.xml" not in requested
    assert names["sitemap_never"] not in requested
    assert names["sitemap_disallowed"] not in requested
    # Counted as sitemaps, not pages: every sitemap the truth asks for, each once.
    read = {url for url in truth if url.endswith(("/sitemap.xml", ".xml", ".xml.gz"))}
    stats = peer.crawler.stats
    assert stats.sitemaps == len(read)
    robots = {url for url in truth if split_url(url)[1] in w.web.robots_paths(split_url(url)[0])}
    assert stats.pages == len(truth - read - robots)
    assert status["sitemaps"] == stats.sitemaps
    assert status["sitemap_urls"] == stats.sitemap_urls >= 10
    assert status["sitemap_skipped"] == 1  # the nested index's one entry
    # The sitemaps' lastmod dates are kept beside the URLs they are about.
    conn = sqlite3.connect(tmp_path / "shard.sqlite3")
    kept = dict(conn.execute("SELECT url, lastmod FROM lastmod"))
    conn.close()
    assert kept == sitemaps.lastmods
    # An export holds the sitemaps too, marked so, and counts them apart: status said
    # 173 pages where the export wrote 184 lines, and nothing said why (QA).
    out = tmp_path / "pages.jsonl"
    summary = export([tmp_path], "jsonl", out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["url"] for r in rows if r["sitemap"]} == read
    assert sum(not r["sitemap"] for r in rows) == stats.pages
    assert (summary.pages, summary.sitemaps) == (len(rows), len(read))


async def test_no_sitemaps_reads_none(tmp_path: Path) -> None:
    async with world() as w:
        peer = await w.start_peer(w.config(tmp_path, bounds=BoundsConfig(sitemaps=False)))
        seed = w.web.seed_url()
        peer.crawler.seed([seed])
        await finish(peer)
        log = w.server.log
    truth = ground_truth(w.web, [seed], sitemaps=False)
    assert_perfect(log, w.web, truth, DELAY)
    requested = {r.url for r in log}
    assert not requested & set(w.web.sitemaps.names.values())
    assert not any(r.target_path == "/sitemap.xml" for r in log)
    assert peer.crawler.stats.sitemaps == 0
