"""`ubipy index`: the CDXJ of every closed file of some peers' warc/ directories, and one
Parquet file of their captures that DuckDB reads."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

import duckdb
import httpx2
import pytest

from tests.crawling import crawl_until_idle
from tests.store.warcs import (
    Page,
    crawl_pages,
    pywb_replay,
    record_at,
    records,
    warc_name,
    write_warc,
)
from ubipy.cli import main
from ubipy.config import CrawlConfig, PolitenessConfig
from ubipy.store import Shard, index_data, warcscan
from ubipy.store.lock import LOCK_FILE
from ubipy.store.shard import SHARD_FILE
from ubipy.store.warcrecords import fields_text, member, warc_record
from ubipy.synthweb import SyntheticWeb, SynthTransport, WebSpec, in_process

PEER_B = "fedcba9876543210"


class Crawl:
    """Two peers' data directories: peer A with two closed files and one being written
    (a torn record at its end), peer B with one closed file."""

    def __init__(self, root: Path) -> None:
        self.a, self.b = root / "a", root / "b"
        warc_a, warc_b = self.a / "warc", self.b / "warc"
        warc_a.mkdir(parents=True)
        warc_b.mkdir(parents=True)
        self.closed: dict[Path, list[Page]] = {
            warc_a / warc_name(1): crawl_pages(10),
            warc_a / warc_name(2): crawl_pages(8, start=10),
            warc_b / warc_name(1, PEER_B): crawl_pages(9, start=100),
        }
        for path, pages in self.closed.items():
            write_warc(path, pages, peer=path.name.split("-")[1])
        self.open = warc_a / (warc_name(3) + ".open")
        self.open_pages = crawl_pages(4, start=200)
        write_warc(self.open, self.open_pages)
        last_offset, last_length = records(self.open)[-1][2:]
        with open(self.open, "r+b") as f:  # the last record half written
            f.truncate(last_offset + last_length // 2)

    @property
    def pages(self) -> list[Page]:
        return [p for pages in self.closed.values() for p in pages]


@pytest.fixture
def crawl(tmp_path: Path) -> Crawl:
    return Crawl(tmp_path)


def _index(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["index", *args])
    return code, capsys.readouterr().err


def test_cdxj_beside_every_closed_file_and_none_for_the_open_one(
    crawl: Crawl, capsys: pytest.CaptureFixture[str]
) -> None:
    code, said = _index(capsys, str(crawl.a), str(crawl.b))
    assert code == 0
    assert "wrote the CDXJ of 3 WARC files" in said
    assert "1 file being written left out" in said
    for path, pages in crawl.closed.items():
        lines = path.with_name(path.name + ".cdxj").read_text().splitlines()
        assert len(lines) == len(pages) + sum(p.revisited for p in pages)
    assert sorted(p.name for p in crawl.open.parent.iterdir() if p.name.endswith(".cdxj")) == [
        warc_name(1) + ".cdxj",
        warc_name(2) + ".cdxj",
    ]
    # Closed files never change: their indexes are kept, unless asked.
    code, said = _index(capsys, str(crawl.a), str(crawl.b))
    assert "wrote the CDXJ of 0 WARC files (3 up to date, kept)" in said
    code, said = _index(capsys, "--force", str(crawl.a))
    assert "wrote the CDXJ of 2 WARC files" in said


def test_every_index_merged_into_one_sorted_file(
    crawl: Crawl, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "all.cdxj"
    code, said = _index(capsys, str(crawl.a), str(crawl.b), "-o", str(out))
    assert code == 0
    lines = out.read_bytes().splitlines()
    assert lines == sorted(lines)
    captures = len(crawl.pages) + sum(p.revisited for p in crawl.pages)
    assert len(lines) == captures
    assert f"merged {captures} CDXJ lines into {out}" in said


def test_duckdb_counts_pages_per_host_from_the_parquet_index(
    crawl: Crawl, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "index.parquet"
    code, said = _index(capsys, str(crawl.a), str(crawl.b), "--format", "parquet", "-o", str(out))
    assert code == 0, said
    rows = len(crawl.pages) + sum(p.revisited for p in crawl.pages)
    assert f"wrote {rows} rows from 3 WARC files to {out}" in said
    db = duckdb.connect()
    per_host = db.execute(
        "SELECT url_host_name, count(DISTINCT url) FROM read_parquet(?) "
        "WHERE warc_record_type = 'response' GROUP BY 1",
        [str(out)],
    ).fetchall()
    # A page is a URL: the non-ASCII one was fetched by each file's first page.
    assert dict(per_host) == Counter(host for host, _ in {(p.host, p.url) for p in crawl.pages})
    described = db.execute("DESCRIBE SELECT * FROM read_parquet(?)", [str(out)]).fetchall()
    columns = {name: kind for name, kind, *_ in described}
    assert columns == {
        "url_surtkey": "VARCHAR",
        "url": "VARCHAR",
        "url_host_name": "VARCHAR",
        "fetch_time": "TIMESTAMP WITH TIME ZONE",
        "fetch_status": "SMALLINT",
        "content_mime_type": "VARCHAR",
        "content_digest": "VARCHAR",
        "warc_filename": "VARCHAR",
        "warc_record_offset": "BIGINT",
        "warc_record_length": "BIGINT",
        "warc_record_type": "VARCHAR",
        "peer": "VARCHAR",
    }
    # Each row says where its record lies, and what the page was.
    pages = {(path.name, p.url): p for path, ps in crawl.closed.items() for p in ps}
    where = {p.name: p for p in crawl.closed}
    found = db.execute(
        "SELECT url, fetch_time, fetch_status, content_mime_type, warc_filename, "
        "warc_record_offset, warc_record_type, peer FROM read_parquet(?)",
        [str(out)],
    ).fetchall()
    for url, at, status, mime, filename, offset, kind, peer in found:
        page = pages[filename, url]
        record = record_at(where[filename], offset)
        assert (record.rec_type, record.rec_headers.get_header("WARC-Target-URI")) == (kind, url)
        assert peer == filename.split("-")[1]
        if kind == "response":
            assert (at, status, mime, record.payload) == (page.at, page.status, "text/html",
                                                          page.body)  # fmt: skip
        else:
            assert (at, status, mime) == (page.at + timedelta(hours=1), 304, None)


def test_the_open_files_whole_records_when_asked(
    crawl: Crawl, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "index.parquet"
    code, said = _index(
        capsys, str(crawl.a), "--format", "parquet", "-o", str(out), "--include-open"
    )
    assert code == 0, said
    assert "not in whole records, skipped" in said  # the torn record, counted
    urls = duckdb.execute(
        "SELECT url FROM read_parquet(?) WHERE warc_filename = ?", [str(out), crawl.open.name]
    ).fetchall()
    # The last page's response was whole, its revisit torn: not there.
    assert sorted(u for (u,) in urls) == sorted(
        [p.url for p in crawl.open_pages] + [p.url for p in crawl.open_pages[:-1] if p.revisited]
    )


def test_parquet_without_pyarrow_says_how_to_get_it(
    crawl: Crawl,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # an import of it fails
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    out = tmp_path / "index.parquet"
    code, said = _index(capsys, str(crawl.a), "--format", "parquet", "-o", str(out))
    assert code == 2
    assert "pip install 'ubipy[parquet]'" in said
    assert not out.exists()


def test_what_cannot_be_indexed_is_refused_in_one_line(
    crawl: Crawl, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, said = _index(capsys, str(crawl.a), "--format", "parquet")
    assert (code, said) == (2, "ubipy index: --format parquet needs -o FILE\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    code, said = _index(capsys, str(empty))
    assert code == 2
    assert said == (
        f"ubipy index: {empty}: neither a peer's data directory nor one of WARC files\n"
    )
    code, said = _index(capsys, str(crawl.a), "-o", str(tmp_path))
    assert (code, said) == (2, f"ubipy index: {tmp_path}: is a directory\n")
    # An output named for the other format (QA: CDXJ went into x.parquet).
    for fmt, name in (("cdxj", "x.parquet"), ("parquet", "x.cdxj")):
        code, said = _index(capsys, str(crawl.a), "--format", fmt, "-o", str(tmp_path / name))
        assert code == 2 and said.startswith(f"ubipy index: --format {fmt}, but the output's")
        assert not (tmp_path / name).exists()
    for given in (["--format", "parquet"], []):  # an export's name, --format or not
        code, said = _index(capsys, str(crawl.a), *given, "-o", str(tmp_path / "x.jsonl"))
        assert (code, said) == (2, "ubipy index: the output's name says jsonl, not an index: "
                                   "name it .cdxj or .parquet\n")  # fmt: skip


def test_the_output_s_name_says_the_format_when_none_is_given(
    crawl: Crawl, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pyarrow")
    out = tmp_path / "x.parquet"
    code, _ = _index(capsys, str(crawl.a), "-o", str(out))
    assert code == 0 and out.read_bytes().startswith(b"PAR1")


@pytest.mark.parametrize(
    ("fmt", "which"),
    [
        ("cdxj", "closed"),
        ("cdxj", "its index"),
        ("parquet", "open"),
        ("cdxj", "the shard"),
        ("cdxj", "the lock"),  # a new file there would let a second peer start
    ],
)
def test_an_index_onto_a_file_being_read_is_refused(
    crawl: Crawl, capsys: pytest.CaptureFixture[str], fmt: str, which: str
) -> None:
    assert _index(capsys, str(crawl.a))[0] == 0
    first = next(iter(crawl.closed))
    (crawl.a / SHARD_FILE).write_bytes(b"the peer's shard")
    (crawl.a / LOCK_FILE).write_bytes(b"pid 1")
    target = {
        "closed": first,
        "its index": first.with_name(first.name + ".cdxj"),
        "open": crawl.open,
        "the shard": crawl.a / SHARD_FILE,
        "the lock": crawl.a / LOCK_FILE,
    }[which]
    warc = crawl.a / "warc"
    before = {p: p.read_bytes() for p in (*warc.iterdir(), target)}
    code, said = _index(capsys, str(crawl.a), "--format", fmt, "-o", str(target))
    assert (code, said) == (
        2,
        f"ubipy index: {target}: is one of the peers' own files (a shard, its lock, a "
        "WARC file or its index); left as it is\n",
    )
    assert {p: p.read_bytes() for p in (*warc.iterdir(), target)} == before


@pytest.mark.parametrize(
    ("given", "fmt", "which"),
    [
        ("DATA/warc", "parquet", SHARD_FILE),
        ("DATA/warc", "cdxj", SHARD_FILE + "-wal"),
        ("DATA/warc", "cdxj", LOCK_FILE),
        (".", "cdxj", SHARD_FILE),  # the warc/ directory one is in
    ],
)
def test_a_peers_own_files_are_refused_however_its_directory_is_named(
    crawl: Crawl,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    given: str,
    fmt: str,
    which: str,
) -> None:
    """Given its warc/ directory, only DATA/warc/shard.sqlite3 (no file) was refused:
    `index DATA/warc --format parquet -o DATA/shard.sqlite3` wrote Parquet over a
    running peer's shard, `-o DATA/lock` replaced its lock (a review found)."""
    for name in (SHARD_FILE, SHARD_FILE + "-wal", LOCK_FILE):
        (crawl.a / name).write_bytes(b"the peer's " + name.encode())
    warc = crawl.a / "warc"
    target = crawl.a / which
    if given == ".":
        monkeypatch.chdir(warc)
        data = "."
    else:
        data = str(warc)
    before = {p: p.read_bytes() for p in crawl.a.iterdir() if p.is_file()}
    code, said = _index(capsys, data, "--format", fmt, "-o", str(target))
    assert (code, said) == (
        2,
        f"ubipy index: {target}: is one of the peers' own files (a shard, its lock, a "
        "WARC file or its index); left as it is\n",
    )
    assert {p: p.read_bytes() for p in crawl.a.iterdir() if p.is_file()} == before


@pytest.mark.parametrize("fmt", ["cdxj", "parquet"])
def test_a_files_index_not_yet_written_is_refused_as_the_output(
    crawl: Crawl, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """The CDXJ -o names was refused only if it existed: one not written yet was
    written, then replaced by -o, so peer A's own index held peer B's lines (exit 0,
    a review found); a Parquet file there was later kept as its index. The open
    file's final name and its CDXJ too: the peer's close renames over the one and
    takes the other for its index (a review)."""
    first = next(iter(crawl.closed))
    final = crawl.open.name.removesuffix(".open")
    monkeypatch.chdir(crawl.a)  # named as a user would, from the data directory
    for name in (first.name + ".cdxj", final, final + ".cdxj"):
        target = crawl.a / "warc" / name
        assert not target.exists()
        named = f"warc/{name}"
        code, said = _index(capsys, str(crawl.a), str(crawl.b), "--format", fmt, "-o", named)
        assert (code, said) == (
            2,
            f"ubipy index: {named}: is one of the peers' own files (a shard, its lock, a "
            "WARC file or its index); left as it is\n",
        )
        assert not target.exists()  # refused before any work


def test_entries_that_are_not_regular_files_are_left_out(
    crawl: Crawl, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    warc = crawl.a / "warc"
    (warc / warc_name(7)).mkdir()
    (warc / warc_name(8)).symlink_to(tmp_path / "nowhere.warc.gz")
    (warc / (warc_name(9) + ".open")).symlink_to(tmp_path / "nowhere.warc.gz.open")
    code, said = _index(capsys, str(crawl.a))
    assert (code, said) == (
        0,
        "ubipy index: wrote the CDXJ of 2 WARC files\nubipy index: 1 file being written left out\n",
    )
    out = tmp_path / "index.parquet"
    code, said = _index(
        capsys, str(crawl.a), "--format", "parquet", "-o", str(out), "--include-open"
    )
    assert code == 0 and said.startswith("ubipy index: wrote "), said
    assert f" rows from 3 WARC files to {out}\n" in said


@pytest.mark.parametrize("fmt", ["cdxj", "parquet"])
def test_a_file_that_cannot_be_read_is_one_line(
    crawl: Crawl,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    fmt: str,
) -> None:
    def refused(path: object, *args: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(warcscan, "open", refused, raising=False)
    out = tmp_path / f"index.{fmt}"
    code, said = _index(capsys, str(crawl.b), "--format", fmt, "-o", str(out))
    [path] = [p for p in crawl.closed if p.is_relative_to(crawl.b)]
    assert (code, said) == (2, f"ubipy index: {path.resolve()}: cannot read: Permission denied\n")
    assert not out.exists()
    assert not list(tmp_path.glob(".*.part"))


# As the header is read (latin-1): superscript digits, which str.isdigit takes.
ODD_STATUSES = [("200", 200), ("\u00b2", None), ("2\u00b2\u00b3", None), ("70000", None),
                ("099", None)]  # fmt: skip


@pytest.mark.parametrize(("line", "status"), ODD_STATUSES)
def test_an_odd_status_line_is_indexed_without_a_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, status: int | None
) -> None:
    warc = tmp_path / "foreign"
    warc.mkdir()
    block = f"HTTP/1.1 {line} OK\r\nContent-Type: text/html\r\n\r\nhi".encode("latin-1")
    fields = fields_text([
        ("WARC-Type", "response"), ("WARC-Record-ID", "<urn:uuid:1>"),
        ("WARC-Date", "2024-01-01T00:00:00Z"), ("WARC-Target-URI", "http://a.test/"),
    ])  # fmt: skip
    path = warc / "x.warc.gz"
    path.write_bytes(member(warc_record(fields, "application/http; msgtype=response", block)))
    out = tmp_path / "x.parquet"
    assert _index(capsys, str(warc))[0] == 0
    assert _index(capsys, str(warc), "--format", "parquet", "-o", str(out))[0] == 0
    cdxj = json.loads(path.with_name("x.warc.gz.cdxj").read_text().split(" ", 2)[2])
    assert cdxj.get("status") == (None if status is None else str(status))
    assert duckdb.execute("SELECT fetch_status FROM read_parquet(?)", [str(out)]).fetchall() == [
        (status,)
    ]


def test_include_open_without_parquet_is_refused(
    crawl: Crawl, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "all.cdxj"
    code, said = _index(capsys, str(crawl.a), "--include-open", "-o", str(out))
    assert (code, said) == (
        2,
        "ubipy index: --include-open needs --format parquet (a CDXJ is of closed files only)\n",
    )
    assert not out.exists() and not list((crawl.a / "warc").glob("*.cdxj"))


def test_the_command_as_a_user_runs_it(crawl: Crawl) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ubipy.cli", "index", str(crawl.b)],
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, b""), done.stderr
    assert done.stderr == b"ubipy index: wrote the CDXJ of 1 WARC file\n"


def test_dash_is_standard_output_and_refused_for_parquet(
    crawl: Crawl,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`-o -` wrote a file named "-" in the current directory (a review found): the
    merged CDXJ goes to standard output, as `export --out -` does; Parquet, read from
    its end, is refused."""
    merged = tmp_path / "all.cdxj"
    assert _index(capsys, str(crawl.a), str(crawl.b), "-o", str(merged))[0] == 0
    done = subprocess.run(
        [sys.executable, "-m", "ubipy.cli", "index", str(crawl.a), str(crawl.b), "-o", "-"],
        capture_output=True,
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, merged.read_bytes()), done.stderr
    lines = merged.read_bytes().count(b"\n")
    assert b"\nubipy index: merged %d CDXJ lines into standard output\n" % lines in done.stderr
    assert not (tmp_path / "-").exists()
    monkeypatch.chdir(tmp_path)
    code, said = _index(capsys, str(crawl.a), "--format", "parquet", "-o", "-")
    assert (code, said) == (
        2,
        "ubipy index: --format parquet needs -o FILE, not standard output (-o -)\n",
    )
    assert not (tmp_path / "-").exists()


async def test_a_peers_own_files_replayed_by_pywb_and_counted_by_duckdb(tmp_path: Path) -> None:
    """The issue's acceptance, on what a peer wrote while it crawled (files rotated)."""
    web = SyntheticWeb(WebSpec(seed=3, hosts=4, pages_per_host=10))
    data = tmp_path / "peer"
    config = CrawlConfig(data_dir=data, politeness=PolitenessConfig(delay=0.0, concurrency=8))
    shard = Shard.open(data, warc_size=30_000)
    async with httpx2.AsyncClient(transport=SynthTransport(in_process(web))) as client:
        await crawl_until_idle(config, shard, client, [web.seed_url()])
    shard.close()
    with sqlite3.connect(data / SHARD_FILE) as conn:
        urls = conn.execute("SELECT url FROM pages WHERE status IS NOT NULL AND error IS NULL")
        in_shard = Counter(urlsplit(url).hostname for (url,) in urls)
    # The peer indexed each file as it closed it; made again here, all of them.
    summary = index_data([data], "cdxj", force=True)
    assert summary.files == len(list((data / "warc").glob("*.warc.gz"))) > 1
    assert not summary.torn
    out = tmp_path / "index.parquet"
    index_data([data], "parquet", out)
    per_host = duckdb.execute(
        "SELECT url_host_name, count(DISTINCT url) FROM read_parquet(?) "
        "WHERE warc_record_type = 'response' GROUP BY 1",
        [str(out)],
    ).fetchall()
    # Each page, and each host's robots.txt as answered.
    assert dict(per_host) == in_shard + Counter(in_shard.keys())
    # A page of each file, asked of pywb as a user would: its body as archived.
    asked, bodies = [], []
    for cdxj in sorted((data / "warc").glob("*.cdxj")):
        _, timestamp, fields = cdxj.read_text().splitlines()[0].split(" ", 2)
        line = json.loads(fields)
        asked.append(f"/coll/{timestamp}id_/{line['url']}")
        record = record_at(data / "warc" / line["filename"], int(line["offset"]))
        bodies.append((record.http_headers.get_statuscode(), record.payload))
    answers = pywb_replay(data / "warc", asked, tmp_path)
    assert [(str(status), body) for status, body in answers] == bodies


def test_a_peer_with_no_warc_files_yet_leaves_the_others_indexed(
    crawl: Crawl, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cluster's peer that has fetched nothing yet (or keeps bodies in its shard)
    has no warc/: it refused the whole cluster's index (QA)."""
    idle = tmp_path / "idle"
    Shard.open(idle).close()
    out = tmp_path / "all.cdxj"
    code, said = _index(capsys, str(crawl.a), str(idle), "-o", str(out))
    assert code == 0
    assert f"{idle}: no WARC files (nothing fetched yet, or --bodies shard)" in said
    assert out.read_bytes() and out.read_bytes() == _index_alone(crawl, tmp_path, capsys)


def _index_alone(crawl: Crawl, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> bytes:
    alone = tmp_path / "alone.cdxj"
    assert _index(capsys, str(crawl.a), "-o", str(alone))[0] == 0
    return alone.read_bytes()


def test_standard_output_closed_is_said_as_standard_output(crawl: Crawl, tmp_path: Path) -> None:
    """`ubipy index -o - | head` said "/dev/stdout: cannot write: Broken pipe" (QA)."""
    read, write = os.pipe()
    os.close(read)  # the reader gone before a line is written
    try:
        done = subprocess.run(
            [sys.executable, "-m", "ubipy.cli", "index", str(crawl.a), "-o", "-"],
            stdout=write,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert done.returncode == 1
    assert b"ubipy index: standard output: cannot write: Broken pipe\n" in done.stderr
