"""`ubipy export`: shards to WARC (checked by warcio itself) and to JSON Lines."""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import threading
import zlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import pytest
import trio
from warcio.archiveiterator import ArchiveIterator

from ubipy.cli import main
from ubipy.config import CrawlConfig, FetchConfig, PolitenessConfig
from ubipy.errors import ExportError, ExportWriteError
from ubipy.fetch import INDEXED_SITEMAP_DEPTH, SITEMAP_DEPTH
from ubipy.peer.peer import Peer
from ubipy.store import DataLock
from ubipy.store.export import export, iso_utc
from ubipy.store.lock import LOCK_FILE
from ubipy.store.schema import SITEMAP_DEPTHS_FROM
from ubipy.store.shard import SHARD_FILE, PageRecord, Shard
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.synthweb.server import serve

PEER_A = "a0a0a0a0a0a0a0a0"
PEER_B = "b1b1b1b1b1b1b1b1"
T0 = 1_700_000_000.25
BINARY = bytes(range(256)) * 4 + b"\r\n\r\nWARC/1.1\r\n"  # nothing in a body may confuse a reader


def _page(
    n: int,
    url: str,
    at: float,
    *,
    status: int | None = 200,
    body: bytes | None = b"<html><title>t</title></html>",
    length: int | None = None,
    content_type: str | None = "text/html",
    title: str | None = None,
    truncated: bool = False,
    error: str | None = None,
    etag: str | None = None,
    last_modified: str | None = None,
    depth: int = 1,
    encoding: str | None = None,
    encoding_source: str | None = None,
    location: str | None = None,
) -> PageRecord:
    return PageRecord(
        fp=n,
        url=url,
        host=url.split("/")[2],
        status=status,
        content_type=content_type,
        length=len(body or b"") if length is None else length,
        truncated=truncated,
        title=title,
        fetched_at=at,
        last_modified=last_modified,
        etag=etag,
        digest="d",
        depth=depth,
        error=error,
        body=body,
        encoding=encoding,
        encoding_source=encoding_source,
        location=location,
    )


# Shard A holds every kind of row; the last three of its pages cannot be HTTP responses
# in a WARC (a failed request, a page whose processing failed, a body not kept).
PAGES_A = [
    _page(
        1,
        "http://a.test/",
        T0 + 1,
        title="Home — ünïcode\r\nand a second line",
        etag='"v1"',
        last_modified="Tue, 01 Oct 2024 10:00:00 GMT",
        depth=0,
        encoding="utf-8",
        encoding_source="header",
    ),
    _page(2, "http://a.test/img.png", T0 + 3, body=BINARY, content_type="image/png", depth=2),
    _page(3, "http://a.test/missing", T0 + 5, status=404, body=b"<h1>gone</h1>"),
    _page(
        4,
        "http://a.test/moved",
        T0 + 7,
        status=301,
        body=None,
        content_type=None,
        location="http://a.test/new",
    ),
    _page(5, "http://a.test/big", T0 + 9, body=b"x" * 1000, truncated=True),
    _page(6, "http://a.test:8080/search?q=1&r=2", T0 + 17, status=599, body=b"odd"),
    _page(7, "http://a.test/slow", T0 + 11, status=None, body=None, error="timeout: ReadTimeout"),
    _page(8, "http://a.test/broken", T0 + 13, body=None, error="processing failed"),
    _page(9, "http://a.test/nobody", T0 + 15, body=None, length=500),
]
PAGES_B = [
    _page(101, "http://b.test/", T0 + 2, title="B home", depth=0),
    # An internationalised host: ASCII (punycode) in the shard, in requests and in WARC
    # records; its Unicode form beside it in JSON Lines and the metadata record.
    _page(
        102,
        "http://xn--bcher-kva.test:8080/1",
        T0 + 4,
        body=b"<p>one</p>",
        title="分布",
        encoding="gbk",
        encoding_source="detected",
    ),
    _page(103, "http://b.test/2", T0 + 6, body=b""),
]
IN_WARC_A = [p for p in PAGES_A if p.fp not in (7, 8, 9)]


def _make_shard(data: Path, peer_id: str, pages: list[PageRecord]) -> None:
    shard = Shard.open(data)
    with shard.transaction():
        shard.set_meta("peer_id", peer_id)
    shard.record_pages(pages)
    shard.close()


@pytest.fixture
def shards(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "peer-a", tmp_path / "peer-b"
    _make_shard(a, PEER_A, PAGES_A)
    _make_shard(b, PEER_B, PAGES_B)
    return a, b


@dataclass
class Rec:
    type: str
    headers: dict[str, str]
    status: int | None = None
    http: dict[str, str] = field(default_factory=dict)
    content: bytes = b""
    line: str = ""  # a request's request line


def _read_warc(path: Path) -> list[Rec]:
    out: list[Rec] = []
    with path.open("rb") as f:
        for r in ArchiveIterator(f):
            rec = Rec(str(r.rec_type), dict(r.rec_headers.headers))
            if r.http_headers is not None:
                rec.http = dict(r.http_headers.headers)
                rec.line = f"{r.http_headers.protocol} {r.http_headers.statusline}"
                if r.rec_type == "response":
                    rec.status = int(r.http_headers.get_statuscode())
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


def _fields(content: bytes) -> dict[str, str]:
    lines = content.decode("utf-8").split("\r\n")
    assert lines[-1] == ""
    return dict(line.split(": ", 1) for line in lines[:-1])


@pytest.mark.parametrize("name", ["pages.warc", "pages.warc.gz"])
def test_warc_passes_warcio_check_and_index(
    shards: tuple[Path, Path], name: str, tmp_path: Path
) -> None:
    out = tmp_path / name
    summary = export(list(shards), "warc", out)
    responses = len(IN_WARC_A) + len(PAGES_B)
    assert (summary.shards, summary.pages, summary.left_out) == (2, 12, 3)
    assert summary.records == 1 + 3 * responses

    check = _warcio("check", "-v", str(out))
    assert check.returncode == 0, check.stdout + check.stderr
    # Every record carries digests and every one was verified, not merely present.
    assert check.stdout.count("digest pass") == summary.records
    assert "fail" not in check.stdout

    index = _warcio("index", "-f", "offset,warc-type,warc-target-uri,http:status", str(out))
    assert index.returncode == 0, index.stderr
    rows = [json.loads(line) for line in index.stdout.splitlines()]
    assert [r["warc-type"] for r in rows] == ["warcinfo"] + ["request", "response", "metadata"] * (
        responses
    )
    statuses = {
        r["warc-target-uri"]: r["http:status"] for r in rows if r["warc-type"] == "response"
    }
    assert statuses == {p.url: str(p.status) for p in IN_WARC_A + PAGES_B}

    if name.endswith(".gz"):
        # One gzip member per record: each indexed offset decompresses on its own.
        data = out.read_bytes()
        for r in rows:
            member = zlib.decompressobj(wbits=31).decompress(data[int(r["offset"]) :])
            assert member.startswith(b"WARC/1.1\r\n")
    else:
        assert out.read_bytes().startswith(b"WARC/1.1\r\n")


def test_a_damaged_warc_fails_warcio_check(shards: tuple[Path, Path], tmp_path: Path) -> None:
    # The check above means something: one changed body byte is caught.
    out = tmp_path / "pages.warc"
    export(list(shards), "warc", out)
    data = out.read_bytes()
    at = data.index(b"<p>one</p>")
    out.write_bytes(data[:at] + b"<P" + data[at + 2 :])
    assert _warcio("check", str(out)).returncode == 1


def test_responses_are_the_stored_pages_one_for_one(
    shards: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "pages.warc.gz"
    export(list(shards), "warc", out)
    recs = _read_warc(out)
    info, rest = recs[0], recs[1:]
    assert info.type == "warcinfo"
    info_id = info.headers["WARC-Record-ID"]
    fields = _fields(info.content)
    assert fields["ubipy-peers"] == f"{PEER_A} {PEER_B}"
    assert "reconstructed" in fields["description"]

    # Two shards merge in fetch order; only real HTTP responses are there.
    expected = sorted(IN_WARC_A + PAGES_B, key=lambda p: p.fetched_at)
    assert len(rest) == 3 * len(expected)
    for page, (req, resp, meta) in zip(
        expected, zip(rest[0::3], rest[1::3], rest[2::3], strict=True), strict=True
    ):
        assert (req.type, resp.type, meta.type) == ("request", "response", "metadata")
        assert resp.headers["WARC-Target-URI"] == page.url
        assert resp.status == page.status
        assert resp.content == (page.body or b"")
        assert resp.http["Content-Length"] == str(len(page.body or b""))
        if page.content_type:
            # The charset where the server's header gave the page's encoding.
            charset = f"; charset={page.encoding}" if page.encoding_source == "header" else ""
            assert resp.http["Content-Type"] == page.content_type + charset
        else:
            assert "Content-Type" not in resp.http
        assert resp.headers["WARC-Payload-Digest"].startswith("sha1:")
        assert resp.headers["WARC-Date"] == iso_utc(page.fetched_at)
        assert (resp.headers.get("WARC-Truncated") == "length") == page.truncated

        # Linked: the request is concurrent to the response, the metadata refers to it.
        resp_id = resp.headers["WARC-Record-ID"]
        assert req.headers["WARC-Concurrent-To"] == resp_id
        assert meta.headers["WARC-Refers-To"] == resp_id
        for r in (req, resp, meta):
            assert r.headers["WARC-Target-URI"] == page.url
            assert r.headers["WARC-Warcinfo-ID"] == info_id
        assert len({req.headers["WARC-Record-ID"], resp_id, meta.headers["WARC-Record-ID"]}) == 3

        assert req.line == f"GET /{page.url.split('/', 3)[3]} HTTP/1.1"
        assert req.http == {"Host": page.url.split("/")[2]}
        assert req.content == b""

        meta_fields = _fields(meta.content)
        assert meta.headers["Content-Type"] == "application/warc-fields"
        assert meta_fields["peer-id"] == (PEER_A if page.url.startswith("http://a.") else PEER_B)
        assert meta_fields["fetched-at"] == iso_utc(page.fetched_at)
        assert meta_fields["depth"] == str(page.depth)
        assert meta_fields["truncated"] == ("true" if page.truncated else "false")
        assert meta_fields.get("title") == (
            None if page.title is None else " ".join(page.title.split())
        )
        assert meta_fields.get("encoding") == page.encoding
        assert meta_fields.get("encoding-source") == page.encoding_source
        # The Unicode form of an internationalised host, beside the ASCII one.
        assert meta_fields.get("url-unicode") == (
            "http://bücher.test:8080/1" if "xn--" in page.url else None
        )

    home = next(
        r for r in rest if r.type == "response" and r.headers["WARC-Target-URI"] == "http://a.test/"
    )
    assert home.http["ETag"] == '"v1"'
    assert home.http["Last-Modified"] == "Tue, 01 Oct 2024 10:00:00 GMT"


def test_a_version_1_shard_is_exported_without_being_changed(tmp_path: Path) -> None:
    # A shard from before the encoding columns: read as it is (read-only, never
    # migrated by an export), its pages with no encoding.
    data = tmp_path / "old"
    _make_shard(data, PEER_A, PAGES_A[:2])
    conn = sqlite3.connect(data / SHARD_FILE)
    conn.execute("ALTER TABLE pages DROP COLUMN encoding")
    conn.execute("ALTER TABLE pages DROP COLUMN encoding_source")
    conn.execute("PRAGMA user_version=1")
    conn.close()
    before = (data / SHARD_FILE).read_bytes()
    out = tmp_path / "old.jsonl"
    assert export([data], "jsonl", out).pages == 2
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["url"], r["encoding"], r["encoding_source"]) for r in rows] == [
        (p.url, None, None) for p in PAGES_A[:2]
    ]
    assert export([data], "warc", tmp_path / "old.warc").pages == 2
    assert (data / SHARD_FILE).read_bytes() == before


def test_request_lines_and_unknown_statuses(shards: tuple[Path, Path], tmp_path: Path) -> None:
    out = tmp_path / "a.warc"
    export([shards[0]], "warc", out)
    raw = out.read_bytes()
    assert b"GET /search?q=1&r=2 HTTP/1.1\r\nHost: a.test:8080\r\n" in raw
    assert b"HTTP/1.1 599 \r\n" in raw
    assert b"HTTP/1.1 301 Moved Permanently\r\n" in raw
    # A redirect replays to where it went; no other answer has a Location.
    assert raw.count(b"\r\nLocation: ") == 1
    assert b"\r\nLocation: http://a.test/new\r\n" in raw
    assert b"HTTP/1.1 404 Not Found\r\n" in raw
    # Left out of the WARC: the failed request, the failed processing, the missing body.
    for url in (b"http://a.test/slow", b"http://a.test/broken", b"http://a.test/nobody"):
        assert url not in raw


@pytest.mark.parametrize("name", ["pages.jsonl", "pages.jsonl.gz"])
def test_jsonl_has_every_page(shards: tuple[Path, Path], tmp_path: Path, name: str) -> None:
    out = tmp_path / name
    summary = export(list(shards), "jsonl", out)
    assert (summary.shards, summary.pages, summary.records, summary.left_out) == (2, 12, 12, 0)
    data = out.read_bytes()
    text = gzip.decompress(data) if name.endswith(".gz") else data
    rows = [json.loads(line) for line in text.decode("utf-8").splitlines()]
    expected = sorted(PAGES_A + PAGES_B, key=lambda p: p.fetched_at)
    assert [r["url"] for r in rows] == [p.url for p in expected]
    for row, page in zip(rows, expected, strict=True):
        assert row == {
            "url": page.url,
            "url_unicode": page.url.replace("xn--bcher-kva", "bücher"),
            "status": page.status,
            "location": page.location,
            "noindex": page.noindex,
            "title": page.title,
            "content_type": page.content_type,
            "length": page.length,
            "truncated": page.truncated,
            "fetched_at": row["fetched_at"],
            "depth": page.depth,
            "sitemap": False,
            "peer": PEER_A if page.fp < 100 else PEER_B,
            "error": page.error,
            "encoding": page.encoding,
            "encoding_source": page.encoding_source,
            "digest": page.digest,
            "etag": page.etag,
            "last_modified": page.last_modified,
        }
        at = datetime.fromisoformat(row["fetched_at"])
        assert row["fetched_at"].endswith("Z") and at.tzinfo is not None
        assert at.utcoffset() is not None and at.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
        assert at.timestamp() == pytest.approx(page.fetched_at, abs=1e-6)
    failed = next(r for r in rows if r["url"] == "http://a.test/slow")
    assert failed["status"] is None and failed["error"] == "timeout: ReadTimeout"
    assert iso_utc(0.5) == "1970-01-01T00:00:00.500000Z"
    assert datetime.fromisoformat(iso_utc(T0)) == datetime.fromtimestamp(T0, UTC)


def test_a_live_shard_is_read_without_blocking_or_changing_it(tmp_path: Path) -> None:
    data = tmp_path / "live"
    shard = Shard.open(data)
    with shard.transaction():
        shard.set_meta("peer_id", PEER_A)
    shard.record_pages(PAGES_A[:3])
    # The peer is in the middle of a write transaction while the export runs.
    with shard.transaction():
        shard.record_pages(PAGES_A[3:5])
        summary = export([data], "jsonl", tmp_path / "live.jsonl")
        assert summary.pages == 3  # the committed snapshot only
    # ... and the peer goes on writing afterwards.
    shard.record_pages(PAGES_A[5:])
    assert export([data], "jsonl", tmp_path / "live2.jsonl").pages == len(PAGES_A)
    shard.close()

    # A closed shard's file is left exactly as it was. Like any reader of a WAL-mode
    # database, SQLite may leave an empty -wal (and its -shm index) beside it.
    shard_file = data / SHARD_FILE
    assert sorted(p.name for p in data.iterdir()) == [SHARD_FILE]
    before = hashlib.sha256(shard_file.read_bytes()).hexdigest()
    export([data], "warc", tmp_path / "closed.warc")
    assert hashlib.sha256(shard_file.read_bytes()).hexdigest() == before
    assert set(p.name for p in data.iterdir()) <= {
        SHARD_FILE,
        f"{SHARD_FILE}-wal",
        f"{SHARD_FILE}-shm",
    }
    wal = data / f"{SHARD_FILE}-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    # The peer opens and writes it again as usual.
    shard = Shard.open(data)
    shard.record_pages(PAGES_B)
    assert shard.counts().pages == len(PAGES_A) + len(PAGES_B)
    shard.close()


def _broken(tmp_path: Path, kind: str) -> Path:
    d = tmp_path / kind
    if kind == "missing":
        return d
    d.mkdir()
    if kind == "empty":
        return d
    if kind == "garbage":
        (d / SHARD_FILE).write_bytes(b"this is not a database, not at all" * 100)
    elif kind == "plain-sqlite":
        sqlite3.connect(d / SHARD_FILE).close()
        conn = sqlite3.connect(d / SHARD_FILE)
        conn.execute("CREATE TABLE t (x)")
        conn.close()
    elif kind == "no-pages-table":
        conn = sqlite3.connect(d / SHARD_FILE)
        conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
        conn.execute("PRAGMA user_version=1")
        conn.close()
    elif kind == "future-version":
        _make_shard(d, PEER_A, PAGES_A[:1])
        conn = sqlite3.connect(d / SHARD_FILE)
        conn.execute("PRAGMA user_version=99")
        conn.close()
    elif kind == "unknown-codec":
        _make_shard(d, PEER_B, PAGES_A)  # another peer's: the same one is refused as a copy
        conn = sqlite3.connect(d / SHARD_FILE)
        conn.execute("UPDATE bodies SET codec = 'zstd' WHERE fp = 5")
        conn.commit()
        conn.close()
    elif kind == "corrupt-body":
        _make_shard(d, PEER_B, PAGES_A)
        conn = sqlite3.connect(d / SHARD_FILE)
        conn.execute("UPDATE bodies SET body = x'0102030405' WHERE fp = 5")
        conn.commit()
        conn.close()
    return d


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("missing", "no such directory"),
        ("empty", f"not a ubipy data directory (no {SHARD_FILE})"),
        ("garbage", "not a readable ubipy shard"),
        ("plain-sqlite", "not a ubipy shard (no schema version)"),
        ("no-pages-table", "not a readable ubipy shard: no such table"),
        ("future-version", "shard schema version 99 was written by a later ubipy"),
        ("unknown-codec", "unknown body codec 'zstd'"),
        ("corrupt-body", "a stored body is corrupt"),
    ],
)
def test_a_bad_shard_is_one_line_and_exit_2(
    shards: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    message: str,
) -> None:
    bad = _broken(tmp_path, kind)
    before = sorted(tmp_path.iterdir())
    out = tmp_path / "out.warc.gz"
    code = main(
        ["export", "--data", str(shards[0]), str(bad), "--format", "warc", "--out", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("ubipy export: ") and err.count("\n") == 1, err
    assert message in err and "Traceback" not in err
    # Nothing is left behind: neither the output nor its partial file.
    assert sorted(tmp_path.iterdir()) == before


def test_an_unwritable_output_is_exit_2(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "no" / "such" / "dir" / "x.jsonl"
    assert main(["export", "--data", str(shards[0]), "--format", "jsonl", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ubipy export: {out}: cannot write") and err.count("\n") == 1
    with pytest.raises(ExportError, match="unknown format"):
        export([shards[0]], "csv", out)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "said"),
    [("all.warc.gz", "WARC record"), ("all.jsonl", "JSON line"), ("a.json", "JSON line")],
)
def test_the_format_is_the_one_the_output_s_name_says_unless_told(
    shards: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    said: str,
) -> None:
    """`--out pages.jsonl` without `--format` was refused (QA)."""
    out = tmp_path / name
    assert main(["export", "--data", *map(str, shards), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert said in err
    first = out.read_bytes()[:2]
    assert first == (b"\x1f\x8b" if name.endswith(".gz") else b'{"')
    assert main(["export", "--data", str(shards[0]), "--out", str(tmp_path / "pages")]) == 2
    err = capsys.readouterr().err
    assert err == "ubipy export: --format warc or jsonl is needed: the output's name says neither\n"
    # Nor one that says another than --format: WARC went into a.jsonl without a word (QA).
    argv = [
        "export",
        "--data",
        str(shards[0]),
        "--format",
        "warc",
        "--out",
        str(tmp_path / "a.jsonl"),
    ]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "ubipy export: --format warc, but the output's name says jsonl: name it for the format, "
        "or leave --format out\n"
    )
    assert not (tmp_path / "a.jsonl").exists()


def test_cli_export_prints_a_summary(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "all.warc.gz"
    argv = ["export", "--data", *map(str, shards), "--format", "warc", "--out", str(out)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"ubipy export: wrote 28 WARC records for 9 pages from 2 shards to {out}; "
        "3 more pages left out (failed requests, types not accepted or bodies not kept)\n"
    )
    # --data also takes the shard file itself.
    jsonl = tmp_path / "b.jsonl"
    argv = [
        "export",
        "--data",
        str(shards[1] / SHARD_FILE),
        "--format",
        "jsonl",
        "--out",
        str(jsonl),
    ]
    assert main(argv) == 0
    assert capsys.readouterr().err == (
        f"ubipy export: wrote 3 JSON lines for 3 pages from 1 shard to {jsonl}\n"
    )
    assert len(jsonl.read_text().splitlines()) == 3


async def test_a_real_crawl_exports_to_a_valid_warc(tmp_path: Path) -> None:
    web = SyntheticWeb(WebSpec(seed=3, hosts=4, pages_per_host=6, crawl_delay=0.05))
    data = tmp_path / "peer"
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        config = CrawlConfig(
            data_dir=data,
            listen="127.0.0.1:0",
            politeness=PolitenessConfig(delay=0.01, concurrency=8, robots_retry_base=0.05),
            fetch=FetchConfig(proxy=server.proxy_url, read_timeout=10.0),
        )
        peer: Peer = await nursery.start(Peer(config).run)
        peer.crawler.seed([web.seed_url()])
        with trio.fail_after(60):
            await peer.crawler.wait_idle()
        peer.stop()
        with trio.fail_after(60):
            await peer.crawler.stopped.wait()
        # Exported while the peer process is still running.
        out = tmp_path / "crawl.warc.gz"
        summary = await trio.to_thread.run_sync(export, [data], "warc", out)
        peer_id = peer.peer_id
        # Each robots.txt answer the server gave, with its status (the judge: its log).
        robots_sent = [
            (r.url, r.status) for r in server.log if r.target_path == "/robots.txt" and r.complete
        ]
        nursery.cancel_scope.cancel()

    conn = sqlite3.connect(data / SHARD_FILE)
    stored = {
        url: status
        for url, status in conn.execute(
            "SELECT url, status FROM pages WHERE status IS NOT NULL AND error IS NULL"
        )
    }
    shard = Shard.open(data)
    bodies = {
        url: shard.page_body(fp) or b"" for fp, url in conn.execute("SELECT fp, url FROM pages")
    }
    shard.close()
    conn.close()
    assert len(stored) > 20
    check = _warcio("check", str(out))
    assert check.returncode == 0, check.stdout
    recs = _read_warc(out)
    answers = [r for r in recs if r.type == "response"]
    # Each robots.txt answer is archived too, whatever its status, as Heritrix and wget
    # archive theirs: a replay serves the rules the crawl obeyed.
    robots = [r for r in answers if r.headers["WARC-Target-URI"].endswith("/robots.txt")]
    assert sorted((r.headers["WARC-Target-URI"], r.status) for r in robots) == sorted(robots_sent)
    assert {s for _, s in robots_sent} >= {200, 404}
    responses = {r.headers["WARC-Target-URI"]: r for r in answers if r not in robots}
    assert {u: r.status for u, r in responses.items()} == stored
    assert all(r.content == bodies[u] for u, r in responses.items())
    assert summary.pages == summary.left_out + len(stored)
    metas = [_fields(r.content) for r in recs if r.type == "metadata"]
    assert {m["peer-id"] for m in metas} == {peer_id}
    assert any("title" in m for m in metas)


# -- where the output goes: never replacing what is not a regular file ---------------


def _expected_jsonl(shards: tuple[Path, Path], tmp_path: Path) -> bytes:
    reference = tmp_path / "reference" / "pages.jsonl"
    reference.parent.mkdir()
    export(list(shards), "jsonl", reference)
    return reference.read_bytes()


def _export_cli(shards: tuple[Path, Path], out: str, *more: str) -> int:
    return main(["export", "--data", *map(str, shards), "--format", "jsonl", "--out", out, *more])


@pytest.mark.skipif(not os.access("/dev/full", os.W_OK), reason="no writable /dev/full")
def test_a_full_disk_is_exit_1_and_the_device_stays(
    shards: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert _export_cli(shards, "/dev/full") == 1
    err = capsys.readouterr().err
    assert err == "ubipy export: /dev/full: cannot write: No space left on device\n"
    assert stat.S_ISCHR(os.lstat("/dev/full").st_mode)
    with pytest.raises(ExportWriteError):
        export(list(shards), "warc", Path("/dev/full"))


def test_a_fifo_is_written_in_place(shards: tuple[Path, Path], tmp_path: Path) -> None:
    expected = _expected_jsonl(shards, tmp_path)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    summary = export(list(shards), "jsonl", fifo)
    reader.join(timeout=30)
    assert received == [expected]
    assert summary.pages == 12
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["peer-a", "peer-b", "pipe", "reference"]


def test_a_link_to_a_regular_file_is_written_through_and_kept(
    shards: tuple[Path, Path], tmp_path: Path
) -> None:
    expected = _expected_jsonl(shards, tmp_path)
    real = tmp_path / "elsewhere" / "pages.jsonl"
    real.parent.mkdir()
    real.write_bytes(b"the previous export\n")
    real.chmod(0o640)
    link = tmp_path / "pages.jsonl"
    link.symlink_to(real)
    assert _export_cli(shards, str(link)) == 0
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_bytes() == expected
    assert stat.S_IMODE(real.stat().st_mode) == 0o640  # a replaced file keeps its mode
    assert [p.name for p in real.parent.iterdir()] == ["pages.jsonl"]  # no partial file


def test_a_link_to_a_device_is_written_through_and_kept(
    shards: tuple[Path, Path], tmp_path: Path
) -> None:
    link = tmp_path / "discard"
    link.symlink_to(os.devnull)
    assert _export_cli(shards, str(link)) == 0
    assert link.is_symlink() and os.readlink(link) == os.devnull
    assert stat.S_ISCHR(os.stat(os.devnull).st_mode)


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("directory", "is a directory; JSON Lines go to one file: name a file in it"),
        ("dangling link", "a symbolic link to nothing (nowhere/pages.jsonl); not writing"),
        (
            "the shard",
            "is one of the peers' own files (a shard, its lock, a WARC file or its index)",
        ),
        ("the peer's lock", "is one of the peers' own files (a shard, its lock"),
    ],
)
def test_what_cannot_be_written_is_refused_and_left_alone(
    shards: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    kind: str,
    message: str,
) -> None:
    shard = shards[0] / SHARD_FILE
    shard_bytes = shard.read_bytes()
    if kind == "directory":
        out = tmp_path / "a-dir"
        out.mkdir()
        (out / "keep").write_text("mine")
    elif kind == "dangling link":
        out = tmp_path / "link"
        out.symlink_to("nowhere/pages.jsonl")
    elif kind == "the peer's lock":
        # A peer running over the shard: a new file in its lock's place would leave
        # its lock on the old one, and let a second peer start over the directory.
        lock = DataLock.take(shards[0], "127.0.0.1:7000")
        out = shards[0] / LOCK_FILE
        inode = out.stat().st_ino
    else:
        out = shard
    before = sorted(tmp_path.iterdir())
    assert _export_cli(shards, str(out)) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ubipy export: {out}: {message}")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert sorted(tmp_path.iterdir()) == before
    assert shard.read_bytes() == shard_bytes
    if kind == "directory":
        assert [p.name for p in out.iterdir()] == ["keep"]
    elif kind == "dangling link":
        assert os.readlink(out) == "nowhere/pages.jsonl" and not (tmp_path / "nowhere").exists()
    elif kind == "the peer's lock":
        assert out.stat().st_ino == inode
        lock.release()


def test_a_directory_takes_no_warc_of_peers_without_warc_files(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bodies in the shards (--bodies shard): a directory is for the peers' own WARC
    files, and the refusal says why (QA: "is a directory" alone)."""
    out = tmp_path / "exports"
    out.mkdir()
    args = ["export", "--data", *map(str, shards), "--format", "warc", "--out", str(out)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ubipy export: {out}: is a directory; a directory takes the peers'")
    assert "--bodies shard, --no-bodies, or nothing fetched yet): name a file in it" in err
    assert not any(out.iterdir())


@pytest.mark.parametrize("given", ["its shard file", "a link to its shard file"])
def test_a_running_peers_lock_is_refused_however_its_shard_is_named(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    """Only DIR/lock of a `--data DIR` was refused: `--data DIR/shard.sqlite3 --out
    DIR/lock` (a shard file is documented) replaced a running peer's lock, so that a
    second peer could start over the directory (a review found)."""
    lock = DataLock.take(shards[0], "127.0.0.1:7000")
    out = shards[0] / LOCK_FILE
    held = out.read_bytes(), out.stat().st_ino
    data = shards[0] / SHARD_FILE
    if given == "a link to its shard file":
        data = tmp_path / "elsewhere" / SHARD_FILE
        data.parent.mkdir()
        data.symlink_to(shards[0] / SHARD_FILE)
    code = main(["export", "--data", str(data), "--format", "jsonl", "--out", str(out)])
    assert (code, capsys.readouterr().err) == (
        2,
        f"ubipy export: {out}: is one of the peers' own files (a shard, its lock, a WARC "
        "file or its index); left as it is\n",
    )
    assert (out.read_bytes(), out.stat().st_ino) == held
    lock.release()


def test_a_file_name_that_is_not_utf8_is_written_with_replacement_characters(
    shards: tuple[Path, Path], tmp_path: Path
) -> None:
    """warcinfo's WARC-Filename is the output's name: one not valid UTF-8 (a Latin-1
    "café") crashed the export with a traceback, a UnicodeEncodeError (a review found)."""
    name = b"caf\xe9.warc.gz"
    done = subprocess.run(
        [sys.executable, "-m", "ubipy.cli", "export", "--data", *map(str, shards),
         "--format", "warc", "--out", name],
        capture_output=True, cwd=tmp_path, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    assert os.listdir(os.fsencode(tmp_path)).count(name) == 1
    out = tmp_path / os.fsdecode(name)
    [info] = [r for r in _read_warc(out) if r.type == "warcinfo"]
    assert info.headers["WARC-Filename"] == "caf\ufffd.warc.gz"


def test_standard_output_takes_the_export_gzipped_only_when_asked(
    shards: tuple[Path, Path], tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    expected = _expected_jsonl(shards, tmp_path)
    assert _export_cli(shards, "-") == 0
    captured = capsysbinary.readouterr()
    assert captured.out == expected
    assert captured.err == (
        b"ubipy export: wrote 12 JSON lines for 12 pages from 2 shards to standard output\n"
    )
    assert _export_cli(shards, "-", "--gzip") == 0
    assert gzip.decompress(capsysbinary.readouterr().out) == expected
    # --gzip compresses a file whatever its name, as a .gz name does without it.
    out = tmp_path / "pages.jsonl"
    assert _export_cli(shards, str(out), "--gzip") == 0
    assert gzip.decompress(out.read_bytes()) == expected
    assert not Path("-").exists()


def test_dev_stdout_is_the_descriptor_the_shell_opened(
    shards: tuple[Path, Path], tmp_path: Path
) -> None:
    expected = _expected_jsonl(shards, tmp_path)
    log = tmp_path / "log"
    log.write_bytes(b"what the log held\n")
    with log.open("ab") as appending:  # as `ubipy export --out /dev/stdout >> log`
        done = subprocess.run(
            [sys.executable, "-m", "ubipy.cli", "export", "--data", *map(str, shards),
             "--format", "jsonl", "--out", "/dev/stdout"],
            stdout=appending,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=60,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert log.read_bytes() == b"what the log held\n" + expected


def test_standard_output_closed_early_is_exit_1_and_one_line(shards: tuple[Path, Path]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # before the export starts: its first write finds no reader
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ubipy.cli", "export", "--data", *map(str, shards),
             "--format", "warc", "--out", "-"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
            timeout=60,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert done.stderr == "ubipy export: standard output: cannot write: Broken pipe\n"
    assert done.returncode == 1


def test_a_failed_write_keeps_the_old_file_and_leaves_no_partial_file(
    shards: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "pages.jsonl"
    out.write_bytes(b"the previous export\n")
    before = sorted(tmp_path.iterdir())

    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", disk_full)  # a disk that fills after the last write
    assert _export_cli(shards, str(out)) == 1
    err = capsys.readouterr().err
    assert err == f"ubipy export: {out}: cannot write: No space left on device\n"
    assert out.read_bytes() == b"the previous export\n"
    assert sorted(tmp_path.iterdir()) == before


def test_partial_files_of_the_users_are_never_touched(
    shards: tuple[Path, Path], tmp_path: Path
) -> None:
    expected = _expected_jsonl(shards, tmp_path)
    out = tmp_path / "pages.jsonl"
    theirs = {tmp_path / "pages.jsonl.part": b"mine", tmp_path / ".pages.jsonl.part": b"mine too"}
    for path, content in theirs.items():
        path.write_bytes(content)
    export(list(shards), "jsonl", out)
    assert out.read_bytes() == expected
    assert {p: p.read_bytes() for p in theirs} == theirs
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [".pages.jsonl.part", "pages.jsonl", "pages.jsonl.part", "peer-a", "peer-b", "reference"]
    )


def test_the_same_shard_named_twice_is_read_once(
    shards: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = shards[0]
    link = tmp_path / "link-to-a"
    link.symlink_to(a, target_is_directory=True)
    out = tmp_path / "a.jsonl"
    names = [str(a), f"{a}/", str(link), str(a / SHARD_FILE), f"{tmp_path}/./peer-a"]
    assert main(["export", "--data", *names, "--format", "jsonl", "--out", str(out)]) == 0
    assert capsys.readouterr().err == (
        f"ubipy export: wrote 9 JSON lines for 9 pages from 1 shard to {out}\n"
    )
    assert sorted(json.loads(line)["url"] for line in out.read_text().splitlines()) == sorted(
        p.url for p in PAGES_A
    )


def test_a_name_ending_in_gz_of_any_case_is_gzipped(
    shards: tuple[Path, Path], tmp_path: Path
) -> None:
    # "X.JSONL.GZ" was written as plain JSON Lines (QA).
    out = tmp_path / "X.JSONL.GZ"
    assert main(["export", "--data", str(shards[0]), "--format", "jsonl", "--out", str(out)]) == 0
    assert out.read_bytes()[:2] == b"\x1f\x8b"


@pytest.mark.parametrize("fmt", ["warc", "jsonl"])
def test_a_peer_and_its_copy_are_refused_as_one_peer_given_twice(
    shards: tuple[Path, Path], tmp_path: Path, fmt: Literal["warc", "jsonl"]
) -> None:
    # cp -r peer-a peer-a.bak: as WARC, every record of the peer went out twice (QA).
    a = shards[0]
    copy = tmp_path / "peer-a.bak"
    shutil.copytree(a, copy)
    out = tmp_path / f"out.{fmt}"
    with pytest.raises(ExportError, match=rf"are the same peer \({PEER_A}\): a copy\?"):
        export([a, shards[1], copy], fmt, out)
    assert not out.exists()


def test_sitemaps_are_exported_marked_and_counted_apart_from_pages(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sitemap's fetch is a row like a page's, at a depth only the shard should know
    (1,000,000; 999,999 for one an index listed). Status counts them apart from the
    pages; an export said "184 pages" where status said 173 (QA)."""
    # The shard's mark is the one the crawler gives them.
    assert SITEMAP_DEPTHS_FROM == INDEXED_SITEMAP_DEPTH < SITEMAP_DEPTH
    data = tmp_path / "peer"
    xml = b"<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'/>"
    kept = [  # bodies in the shard (--bodies shard), then in the peer's WARC files
        [_page(1, "http://a.test/", T0), _page(2, "http://a.test/sitemap.xml", T0 + 1,
         body=xml, content_type="application/xml", depth=1_000_000)],
        [_page(3, "http://a.test/p", T0 + 2), _page(4, "http://a.test/maps/1.xml", T0 + 3,
         body=xml, content_type="application/xml", depth=999_999),
         _page(5, "http://a.test/maps/gone.xml", T0 + 4, status=None, body=None,
         depth=999_999, error="timeout: ReadTimeout")],
    ]  # fmt: skip
    for warc_size in (None, 10**9):
        shard = Shard.open(data, warc_size=warc_size)
        with shard.transaction():
            shard.set_meta("peer_id", PEER_A)
        shard.record_pages(kept.pop(0))
        shard.close()
    assert (data / "warc").is_dir()
    jsonl = tmp_path / "pages.jsonl"
    assert main(["export", "--data", str(data), "--out", str(jsonl)]) == 0
    marks = {r["url"]: r["sitemap"] for r in map(json.loads, jsonl.read_text().splitlines())}
    assert [u for u, sitemap in marks.items() if sitemap] == [
        "http://a.test/sitemap.xml", "http://a.test/maps/1.xml", "http://a.test/maps/gone.xml"
    ]  # fmt: skip
    assert capsys.readouterr().err == (
        f"ubipy export: wrote 5 JSON lines for 2 pages and 3 sitemaps from 1 shard to {jsonl}\n"
    )
    # WARC: the failed fetch is left out; the rest, from the shard and the files alike.
    warc = tmp_path / "pages.warc.gz"
    summary = export([data], "warc", warc)
    assert (summary.pages, summary.left_out, summary.sitemaps) == (5, 1, 2)
    responses = [r.headers["WARC-Target-URI"] for r in _read_warc(warc) if r.type == "response"]
    assert sorted(responses) == sorted(u for u in marks if not u.endswith("gone.xml"))
    assert main(["export", "--data", str(data), "--out", str(tmp_path / "again.warc")]) == 0
    said = capsys.readouterr().err
    assert " for 2 pages and 2 sitemaps from 1 shard to " in said, said
    assert said.endswith(
        "; 1 sitemap left out (failed requests, types not accepted or bodies not kept)\n"
    )


def test_a_sitemap_left_out_is_counted_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bodies not kept (--no-bodies): the summary said "3 more pages left out" of two
    pages and a sitemap, where JSON Lines says 2 pages and 1 sitemap (QA)."""
    data = tmp_path / "nobodies"
    _make_shard(
        data,
        PEER_A,
        [
            _page(1, "http://a.test/", T0, body=None, length=10),
            _page(2, "http://a.test/b", T0 + 1, body=None, length=10),
            _page(3, "http://a.test/sitemap.xml", T0 + 2, body=None, length=10, depth=1_000_000),
        ],
    )
    out = tmp_path / "x.warc"
    assert main(["export", "--data", str(data), "--out", str(out)]) == 0
    assert capsys.readouterr().err == (
        f"ubipy export: wrote 1 WARC record for 0 pages from 1 shard to {out}; 2 more pages "
        "and 1 sitemap left out (failed requests, types not accepted or bodies not kept)\n"
    )
