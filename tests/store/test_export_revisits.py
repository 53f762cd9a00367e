"""`ubipy export` of a continuous crawl (--recrawl): each version of a page once, as
Heritrix writes it. A changed visit is a response; an unchanged one a revisit record
(server-not-modified for a 304, identical-payload-digest for a 200 of the same digest)
that refers to the response holding the version it saw. Checked by warcio itself."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import sqlite3
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing
from warcio.archiveiterator import ArchiveIterator

from tests.crawling import recrawl_for
from tests.store.old_shards import downgrade
from ubipy.config import BodyStore, CrawlConfig, PolitenessConfig, RecrawlConfig, StoreConfig
from ubipy.store.export import export, iso_utc
from ubipy.store.jsonl import page_json
from ubipy.store.revisits import RefreshRow, Visit
from ubipy.store.shard import SHARD_FILE, PageRecord, Shard
from ubipy.store.snapshot import StoredPage
from ubipy.synthweb import SyntheticWeb, WebSpec, in_process

PEER = "c2c2c2c2c2c2c2c2"
T0 = 1_700_000_000.5
NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
SAME_PAYLOAD = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"

HOME = "http://news.test/"
V1 = b"<html><title>v1</title><p>first version</p></html>"
V2 = b"<html><title>v2</title><p>the second version, a little longer</p></html>"
LM1, LM2 = "Tue, 01 Oct 2024 10:00:00 GMT", "Wed, 02 Oct 2024 11:00:00 GMT"
STILL = "http://news.test/about"
NEW = "http://news.test/new"  # where the page moved
ABOUT = b"<p>never changes</p>"


def _first(
    fp: int,
    url: str,
    at: float,
    body: bytes | None,
    *,
    length: int | None = None,
    etag: str | None = None,
    last_modified: str | None = None,
    digest: str = "d",
) -> PageRecord:
    return PageRecord(
        fp=fp,
        url=url,
        host=url.split("/")[2],
        status=200,
        content_type="text/html",
        length=len(body or b"") if length is None else length,
        truncated=False,
        title="t",
        fetched_at=at,
        last_modified=last_modified,
        etag=etag,
        digest=digest,
        depth=0,
        error=None,
        body=body,
    )


def _row(fp: int, url: str, visits: int, changes: int, last: float) -> RefreshRow:
    return RefreshRow(
        fp, url, url.split("/")[2], 0, visits, changes, last - T0, last, last + 600, 0.0,
        None, None, None,
    )  # fmt: skip


# The home page: its first fetch, then unchanged (a 304), unchanged (a 200 of the same
# digest), changed (a new body), unchanged again (a 304, about the new version).
HOME_VISITS = [
    Visit(1, T0 + 100, 304, False, "d1"),
    Visit(1, T0 + 200, 200, False, "d1"),
    Visit(1, T0 + 300, 200, True, "d2", "text/html", len(V2), '"v2"', LM2, V2),
    Visit(1, T0 + 400, 304, False, "d2"),
]


def _make(data: Path) -> None:
    shard = Shard.open(data)
    with shard.transaction():
        shard.set_meta("peer_id", PEER)
    shard.record_pages(
        [
            _first(1, HOME, T0, V1, etag='"v1"', last_modified=LM1, digest="d1"),
            _first(2, STILL, T0 + 50, ABOUT),
        ]
    )
    shard.save_refresh([_row(1, HOME, 5, 1, T0 + 400), _row(2, STILL, 1, 0, T0 + 50)], HOME_VISITS)
    shard.close()


@pytest.fixture
def crawl(tmp_path: Path) -> Path:
    data = tmp_path / "peer"
    _make(data)
    return data


@dataclass
class Rec:
    type: str
    headers: dict[str, str]
    line: str = ""  # the HTTP status or request line
    http: dict[str, str] = field(default_factory=dict)
    content: bytes = b""


def _read_warc(path: Path) -> list[Rec]:
    out: list[Rec] = []
    with path.open("rb") as f:
        for r in ArchiveIterator(f):
            rec = Rec(str(r.rec_type), dict(r.rec_headers.headers))
            if r.http_headers is not None:
                rec.line = f"{r.http_headers.protocol} {r.http_headers.statusline}"
                rec.http = dict(r.http_headers.headers)
            rec.content = r.content_stream().read()
            out.append(rec)
    return out


def _warcio(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warcio.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _of(recs: list[Rec], url: str, *types: str) -> list[Rec]:
    return [r for r in recs if r.headers.get("WARC-Target-URI") == url and r.type in types]


@pytest.mark.parametrize("name", ["crawl.warc", "crawl.warc.gz"])
def test_each_version_once_and_revisits_for_the_rest(
    crawl: Path, tmp_path: Path, name: str
) -> None:
    out = tmp_path / name
    summary = export([crawl], "warc", out)
    assert (summary.pages, summary.left_out, summary.visits, summary.visits_left_out) == (
        2,
        0,
        4,
        0,
    )
    # warcinfo; three records (request, response or revisit, metadata) a capture.
    assert summary.records == 1 + 3 * (2 + 4)

    check = _warcio("check", "-v", str(out))
    assert check.returncode == 0, check.stdout + check.stderr
    assert "fail" not in check.stdout
    # warcio verifies every record's digests but a revisit's, which it only finds present.
    assert check.stdout.count("digest present but not checked (revisit)") == 3
    assert check.stdout.count("digest pass") == summary.records - 3

    index = _warcio("index", "-f", "warc-type,warc-target-uri,warc-date,http:status", str(out))
    assert index.returncode == 0, index.stderr
    rows = [json.loads(line) for line in index.stdout.splitlines()]
    home = [
        (r["warc-type"], r.get("http:status")) for r in rows if r.get("warc-target-uri") == HOME
    ]
    captures = [c for c in home if c[0] in ("response", "revisit")]
    # Each change of the page once: two responses; the three unchanged visits, revisits.
    assert captures == [
        ("response", "200"),
        ("revisit", "304"),
        ("revisit", "200"),
        ("response", "200"),
        ("revisit", "304"),
    ]
    # In time order, each capture between its request and its metadata record.
    dates = [r["warc-date"] for r in rows if r.get("warc-target-uri") == HOME]
    assert dates == sorted(dates)
    assert [t for t, _ in home] == [t for c, _ in captures for t in ("request", c, "metadata")]

    recs = _read_warc(out)
    first, changed = _of(recs, HOME, "response")
    revisits = _of(recs, HOME, "revisit")
    assert first.content == V1 and changed.content == V2
    assert first.headers["WARC-Date"] == iso_utc(T0)
    assert changed.headers["WARC-Date"] == iso_utc(T0 + 300)
    assert changed.http == {"Content-Type": "text/html", "Content-Length": str(len(V2)),
                            "Last-Modified": LM2, "ETag": '"v2"'}  # fmt: skip
    sha1 = hashlib.sha1(V1).digest()
    assert first.headers["WARC-Payload-Digest"] == "sha1:" + base64.b32encode(sha1).decode("ascii")
    assert first.headers["WARC-Payload-Digest"] != changed.headers["WARC-Payload-Digest"]

    # Each revisit refers to the response of the version it saw: the 3rd to the change.
    refers = [first, first, changed]
    profiles = [NOT_MODIFIED, SAME_PAYLOAD, NOT_MODIFIED]
    ats = [T0 + 100, T0 + 200, T0 + 400]
    for revisit, target, profile, at in zip(revisits, refers, profiles, ats, strict=True):
        assert revisit.headers["WARC-Profile"] == profile
        assert revisit.headers["WARC-Date"] == iso_utc(at)
        assert revisit.headers["WARC-Refers-To"] == target.headers["WARC-Record-ID"]
        assert revisit.headers["WARC-Refers-To-Target-URI"] == HOME
        assert revisit.headers["WARC-Refers-To-Date"] == target.headers["WARC-Date"]
        # Headers, no payload.
        assert revisit.content == b""
        assert revisit.headers["Content-Type"] == "application/http; msgtype=response"
        if profile == SAME_PAYLOAD:
            assert revisit.headers["WARC-Payload-Digest"] == target.headers["WARC-Payload-Digest"]
            assert revisit.line == "HTTP/1.1 200 OK"
            assert revisit.http["Content-Length"] == str(len(V1))
        else:
            # Not for this profile (WARC 1.1, 6.7.3; Heritrix writes none either).
            assert "WARC-Payload-Digest" not in revisit.headers
            assert revisit.line == "HTTP/1.1 304 Not Modified"
            assert "Content-Length" not in revisit.http
        assert revisit.http["ETag"] == target.http["ETag"]

    # A later visit was a conditional GET with the validators of the version held.
    requests = _of(recs, HOME, "request")
    assert "If-None-Match" not in requests[0].http
    assert [
        (r.http.get("If-None-Match"), r.http.get("If-Modified-Since")) for r in requests[1:]
    ] == [
        ('"v1"', LM1),
        ('"v1"', LM1),
        ('"v1"', LM1),
        ('"v2"', LM2),
    ]
    metas = _of(recs, HOME, "metadata")
    assert [b"changed: true" in m.content for m in metas[1:]] == [False, False, True, False]


def test_a_page_without_visits_exports_as_before(crawl: Path, tmp_path: Path) -> None:
    # The same pages before any refresh: the page that was never visited again has the
    # same records and the same JSON line either way.
    before = tmp_path / "before"
    shard = Shard.open(before)
    with shard.transaction():
        shard.set_meta("peer_id", PEER)
    shard.record_pages([_first(2, STILL, T0 + 50, ABOUT)])
    shard.close()
    old, new = tmp_path / "old.warc", tmp_path / "new.warc"
    export([before], "warc", old)
    export([crawl], "warc", new)

    def still(path: Path) -> list[tuple[str, str, bytes, dict[str, str]]]:
        skip = {"WARC-Record-ID", "WARC-Concurrent-To", "WARC-Refers-To", "WARC-Warcinfo-ID"}
        return [
            (r.type, r.line, r.content, {k: v for k, v in r.headers.items() if k not in skip})
            for r in _read_warc(path)
            if r.headers.get("WARC-Target-URI") == STILL
        ]

    assert [t for t, *_ in still(new)] == ["request", "response", "metadata"]
    assert still(new) == still(old)

    export([before], "jsonl", tmp_path / "old.jsonl")
    export([crawl], "jsonl", tmp_path / "new.jsonl")
    old_line = (tmp_path / "old.jsonl").read_text().splitlines()
    new_line = [x for x in (tmp_path / "new.jsonl").read_text().splitlines() if STILL in x]
    assert new_line == old_line
    assert "visits" not in json.loads(old_line[0])


@pytest.mark.parametrize("name", ["crawl.jsonl", "crawl.jsonl.gz"])
def test_jsonl_lists_a_pages_visits_on_its_line(crawl: Path, tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    summary = export([crawl], "jsonl", out)
    assert (summary.pages, summary.records, summary.visits) == (2, 2, 4)
    data = out.read_bytes()
    text = gzip.decompress(data) if name.endswith(".gz") else data
    home, about = (json.loads(line) for line in text.decode("utf-8").splitlines())
    assert about["url"] == STILL and "visits" not in about
    # The page's line is its first fetch, as before, with its later visits beside it.
    expected = page_json(
        StoredPage(
            PEER,
            HOME,
            200,
            "text/html",
            len(V1),
            False,
            "t",
            T0,
            LM1,
            '"v1"',
            0,
            None,
            None,
            digest="d1",
        )
    )
    assert {k: v for k, v in home.items() if k != "visits"} == expected
    assert home["visits"] == [
        {"at": iso_utc(T0 + 100), "status": 304, "location": None, "noindex": None,
         "changed": False, "digest": "d1",
         "content_type": None, "length": 0, "etag": None, "last_modified": None,
         "truncated": False},
        {"at": iso_utc(T0 + 200), "status": 200, "location": None, "noindex": None,
         "changed": False, "digest": "d1",
         "content_type": None, "length": 0, "etag": None, "last_modified": None,
         "truncated": False},
        {"at": iso_utc(T0 + 300), "status": 200, "location": None, "noindex": None,
         "changed": True, "digest": "d2",
         "content_type": "text/html", "length": len(V2), "etag": '"v2"', "last_modified": LM2,
         "truncated": False},
        {"at": iso_utc(T0 + 400), "status": 304, "location": None, "noindex": None,
         "changed": False, "digest": "d2",
         "content_type": None, "length": 0, "etag": None, "last_modified": None,
         "truncated": False},
    ]  # fmt: skip


def test_visits_with_nothing_to_show_or_refer_to_are_left_out(tmp_path: Path) -> None:
    # A failed visit has no answer to write, a server error's body was not kept (a
    # response would be made up), a redirect from before Locations were kept has
    # none (one after has its own response, body or not); a change whose
    # body was not kept is not in the WARC, so the revisit after it has nothing to
    # refer to; a page whose first body was not kept leaves its revisits nothing either.
    data = tmp_path / "peer"
    shard = Shard.open(data)
    shard.record_pages(
        [
            _first(1, HOME, T0, V1, digest="d1"),
            _first(2, STILL, T0 + 1, None, length=500),
        ]
    )
    shard.save_refresh(
        [],
        [
            Visit(1, T0 + 10, None, False, "d1"),
            Visit(1, T0 + 20, 503, False, "d1"),  # as shards kept it before: no body
            Visit(1, T0 + 25, 302, False, "d1", "text/html", 5, body=b"moved"),  # no Location
            Visit(1, T0 + 27, 301, False, "d1", location=NEW),
            Visit(1, T0 + 30, 200, False, "d1"),  # a revisit of the first fetch
            Visit(1, T0 + 40, 200, True, "d2", "text/html", 900),  # no body kept
            Visit(1, T0 + 50, 304, False, "d2"),
            Visit(1, T0 + 60, 200, True, "d3", "text/html", 0),  # an empty body
            Visit(1, T0 + 70, 304, False, "d3"),
            Visit(2, T0 + 80, 304, False, "d"),
        ],
    )
    shard.close()
    out = tmp_path / "out.warc.gz"
    summary = export([data], "warc", out)
    assert (summary.pages, summary.left_out, summary.visits, summary.visits_left_out) == (
        2,
        1,
        10,
        6,
    )
    check = _warcio("check", str(out))
    assert check.returncode == 0, check.stdout + check.stderr
    recs = _read_warc(out)
    assert _of(recs, STILL, "request", "response", "revisit", "metadata") == []
    captures = _of(recs, HOME, "response", "revisit")
    assert [(c.type, c.headers["WARC-Date"]) for c in captures] == [
        ("response", iso_utc(T0)),
        ("response", iso_utc(T0 + 27)),
        ("revisit", iso_utc(T0 + 30)),
        ("response", iso_utc(T0 + 60)),
        ("revisit", iso_utc(T0 + 70)),
    ]
    moved = captures[1]
    assert (moved.line, moved.http["Location"]) == ("HTTP/1.1 301 Moved Permanently", NEW)
    # Not the page: the revisit after it refers to the first fetch still.
    assert captures[2].headers["WARC-Refers-To"] == captures[0].headers["WARC-Record-ID"]
    assert captures[3].content == b"" and captures[3].http["Content-Length"] == "0"
    assert captures[4].headers["WARC-Refers-To"] == captures[3].headers["WARC-Record-ID"]
    export([data], "jsonl", tmp_path / "out.jsonl")
    home = json.loads((tmp_path / "out.jsonl").read_text().splitlines()[0])
    assert [v["location"] for v in home["visits"] if v["status"] == 301] == [NEW]


def _cut_version(data: Path) -> None:
    """A page whose second version was cut at --max-body."""
    shard = Shard.open(data)
    shard.record_pages([_first(1, HOME, T0, V1, digest="d1")])
    cut = Visit(1, T0 + 10, 200, True, "d2", "text/html", 20, body=V2[:20], truncated=True)
    shard.save_refresh([_row(1, HOME, 1, 1, T0 + 10)], [cut])
    shard.close()


def test_a_later_version_cut_at_max_body_says_so(tmp_path: Path) -> None:
    # As a first fetch's cut body does: a replay or an analysis of the archive must not
    # take the cut version for the whole page.
    data = tmp_path / "peer"
    _cut_version(data)
    out = tmp_path / "out.warc.gz"
    export([data], "warc", out)
    assert _warcio("check", str(out)).returncode == 0
    recs = _read_warc(out)
    first, cut = _of(recs, HOME, "response")
    assert cut.content == V2[:20]
    assert cut.headers.get("WARC-Truncated") == "length"
    assert "WARC-Truncated" not in first.headers
    meta = [r.content.decode() for r in _of(recs, HOME, "metadata")]
    assert ["truncated: true" in m for m in meta] == [False, True]
    export([data], "jsonl", tmp_path / "out.jsonl")
    [line] = (tmp_path / "out.jsonl").read_text().splitlines()
    assert [v["truncated"] for v in json.loads(line)["visits"]] == [True]


def test_a_shard_from_before_cut_visits_were_marked_migrates_and_exports(
    tmp_path: Path,
) -> None:
    # Version 8 did not keep whether a visit's body was cut: such visits are not said
    # to be cut, read as they are (an export never migrates), or once the peer opens
    # the shard again (migrated, the rows kept).
    data = tmp_path / "peer"
    _cut_version(data)
    downgrade(data, 8)
    before = (data / SHARD_FILE).read_bytes()
    export([data], "jsonl", tmp_path / "old.jsonl")
    assert (data / SHARD_FILE).read_bytes() == before
    [line] = (tmp_path / "old.jsonl").read_text().splitlines()
    [visit] = json.loads(line)["visits"]
    assert (visit["changed"], visit["length"], visit["truncated"]) == (True, 20, False)
    Shard.open(data).close()
    export([data], "jsonl", tmp_path / "new.jsonl")
    assert (tmp_path / "new.jsonl").read_text() == (tmp_path / "old.jsonl").read_text()


def test_a_shard_from_before_visits_is_exported_without_being_changed(
    crawl: Path, tmp_path: Path
) -> None:
    # Version 4 had no visits tables: read as it is (never migrated by an export).
    downgrade(crawl, 4)
    before = (crawl / SHARD_FILE).read_bytes()
    summary = export([crawl], "warc", tmp_path / "old.warc")
    assert (summary.pages, summary.visits, summary.records) == (2, 0, 1 + 3 * 2)
    assert _warcio("check", str(tmp_path / "old.warc")).returncode == 0
    assert [r.type for r in _read_warc(tmp_path / "old.warc")].count("revisit") == 0
    export([crawl], "jsonl", tmp_path / "old.jsonl")
    lines = [json.loads(x) for x in (tmp_path / "old.jsonl").read_text().splitlines()]
    assert [(x["url"], "visits" in x) for x in lines] == [(HOME, False), (STILL, False)]
    assert (crawl / SHARD_FILE).read_bytes() == before


# -- a real continuous crawl ----------------------------------------------------------

CHANGING = WebSpec(seed=9, hosts=4, pages_per_host=12, changing=True)


async def test_a_continuous_crawl_of_a_changing_web_exports_each_version_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    web = SyntheticWeb(CHANGING)
    server = in_process(web)
    config = CrawlConfig(
        data_dir=tmp_path / "peer",
        politeness=PolitenessConfig(delay=0.5, concurrency=4),
        recrawl=RecrawlConfig(recrawl=True, rate=0.5, min_interval=60, replan=60),
    )
    shard = Shard.open(config.data_dir)
    await recrawl_for(config, shard, server, [web.seed_url()], 1800)  # half an hour
    shard.close()
    with sqlite3.connect(config.data_dir / SHARD_FILE) as conn:
        (changed,) = conn.execute("SELECT count(*) FROM visits WHERE changed").fetchone()
        # Those of pages whose first fetch is in the WARC (not one of a type not
        # accepted, say: nothing there for a revisit to refer to).
        (unchanged,) = conn.execute(
            "SELECT count(*) FROM visits JOIN pages USING (fp) "
            "WHERE NOT changed AND visits.status IN (200, 304) AND error IS NULL"
        ).fetchone()
    assert changed > 0 and unchanged > 0

    out = tmp_path / "crawl.warc.gz"
    summary = await trio.to_thread.run_sync(export, [config.data_dir], "warc", out)
    check = _warcio("check", str(out))
    assert check.returncode == 0, check.stdout + check.stderr
    recs = _read_warc(out)
    captures = [r for r in recs if r.type in ("response", "revisit")]
    assert sum(r.type == "revisit" for r in captures) == unchanged
    assert sum(r.type == "response" for r in captures) == summary.pages - summary.left_out + changed
    # Per page, in time order: each response a new version (its digest unlike the one
    # before), each revisit referring to the latest response before it.
    latest: dict[str, Rec] = {}
    for r in captures:
        url = r.headers["WARC-Target-URI"]
        before = latest.get(url)
        if r.type == "response":
            if before is not None:
                assert r.headers["WARC-Date"] > before.headers["WARC-Date"]
                assert r.headers["WARC-Payload-Digest"] != before.headers["WARC-Payload-Digest"]
            latest[url] = r
        else:
            assert before is not None
            assert r.headers["WARC-Refers-To"] == before.headers["WARC-Record-ID"]
            assert r.headers["WARC-Refers-To-Date"] == before.headers["WARC-Date"]
            assert r.headers["WARC-Date"] > before.headers["WARC-Date"]


GONE = "http://news.test/gone"
GONE_BODY = b"<html><title>gone</title>not here</html>"


def _gone_for_a_while(request: httpx2.Request) -> httpx2.Response:
    """The home page links to /gone, which answers 404 from 300 s to 350 s (once, asked
    a minute apart), then its old page again."""
    if request.url.path == "/robots.txt":
        return httpx2.Response(404)
    html = {"content-type": "text/html"}
    if request.url.path == "/":
        return httpx2.Response(200, headers=html, content=b'<a href="/gone">x</a>' + V1)
    if 300 <= trio.current_time() < 350:
        return httpx2.Response(404, headers=html, content=GONE_BODY)
    return httpx2.Response(200, headers=html, content=V2)


@pytest.mark.parametrize("bodies", [BodyStore.WARC, BodyStore.SHARD])
async def test_a_page_gone_is_replayed_as_gone_until_it_comes_back(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, bodies: BodyStore
) -> None:
    """A visit answered 404 had no record: an archive replayed the page's last 200 as if
    it were still there (QA). It is a response of its own, and the revisits after the
    page came back refer to its version held, not to the 404."""
    config = CrawlConfig(
        data_dir=tmp_path / "peer",
        politeness=PolitenessConfig(delay=0.5, concurrency=2),
        recrawl=RecrawlConfig(recrawl=True, min_interval=60, max_interval=60, replan=60),
        store=StoreConfig(bodies=bodies),
    )
    shard = Shard.open(config.data_dir)
    await recrawl_for(config, shard, httpx2.MockTransport(_gone_for_a_while), [HOME], 900)
    shard.close()

    out = tmp_path / "crawl.warc.gz"
    await trio.to_thread.run_sync(export, [config.data_dir], "warc", out)
    check = _warcio("check", str(out))
    assert check.returncode == 0, check.stdout + check.stderr
    captures = _of(_read_warc(out), GONE, "response", "revisit")
    seen = [(c.type, c.line.split()[1]) for c in captures]
    # 200, its revisits, a 404, then the version held again: revisits.
    [gone] = [i for i, (kind, status) in enumerate(seen) if status == "404"]
    assert seen[gone] == ("response", "404") and captures[gone].content == GONE_BODY
    assert seen[0] == ("response", "200") and set(seen[1:gone]) == {("revisit", "200")}
    assert seen[gone + 1 :] and set(seen[gone + 1 :]) == {("revisit", "200")}, seen
    held = {c.headers["WARC-Record-ID"] for c in captures if c.line.split()[1] == "200"}
    assert all(c.headers["WARC-Refers-To"] in held for c in captures if c.type == "revisit"), seen
