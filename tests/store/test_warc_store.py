"""Pages written as WARC records as they are committed (--bodies warc): files warcio
checks, every committed page read back from its offset, rotation, recrawls' revisits,
a refused commit, a crash's torn tail, and the export that takes the files as they are."""

from __future__ import annotations

import dataclasses
import errno
import gzip
import io
import os
import random
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
import tracemalloc
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import httpx2
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from warcio.archiveiterator import ArchiveIterator

from tests.crawling import crawl_until_idle, recrawl_for
from tests.store.fsyncs import record_fsyncs
from tests.store.warcs import pywb_cdxj
from ubipy.cli import main
from ubipy.config import CrawlConfig, FetchConfig, PolitenessConfig, RecrawlConfig, RefreshPolicy
from ubipy.errors import ExportError, ExportWriteError, ShardError, StorageError
from ubipy.store import (
    HttpHead,
    PageRecord,
    Shard,
    export,
    walsync,
    warcfiles,
    warcrecovery,
    warcstore,
)
from ubipy.store import shard as shard_module
from ubipy.store.revisits import RefreshRow, Visit
from ubipy.store.shard import SHARD_FILE, NewURL
from ubipy.store.warcfiles import Recovered
from ubipy.store.warcindex import index_warc
from ubipy.store.warcrecords import (
    LARGE_BODY,
    SMALL_RECORD,
    RecordReader,
    fields_text,
    iso_utc,
    member,
    read_record,
    record_id,
    request_block,
    response_head,
    sha1_digest,
    warc_record,
)
from ubipy.synthweb import SyntheticWeb, SynthTransport, WebSpec, in_process

HEAD = HttpHead(
    200,
    "OK",
    "HTTP/1.1",
    (
        (b"Content-Type", b"text/html; charset=utf-8"),
        (b"Content-Encoding", b"gzip"),
        (b"Transfer-Encoding", b"chunked"),
        (b"Set-Cookie", b"a=1"),
    ),
    ((b"Host", b"a.test"), (b"User-Agent", b"ubipy/test")),
)


def _warcio_check(files: list[Path]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "warcio.cli", "check", "-v", *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def _files(data: Path) -> list[Path]:
    """The WARC files (their CDXJ indexes aside), open ones included."""
    return sorted(p for p in (data / "warc").iterdir() if p.name.endswith((".gz", ".open")))


def _page(fp: int, body: bytes, at: float = 1_000.0) -> PageRecord:
    return PageRecord(
        fp, f"http://a.test/{fp}", "a.test", 200, "text/html", len(body), False, "t",
        at + fp, None, None, "d", 0, None, body, head=HEAD,
    )  # fmt: skip


def _captures(data: Path) -> list[tuple[int, float, int, str, int, int]]:
    with sqlite3.connect(data / SHARD_FILE) as conn:
        rows = conn.execute("SELECT fp, at, kind, file, offset, length FROM warc").fetchall()
    return [(int(a), float(b), int(c), str(d), int(e), int(f)) for a, b, c, d, e, f in rows]


def _each_capture_reads_back(data: Path) -> int:
    """Every committed capture's offset holds its record, whole (and the count)."""
    n = 0
    for _, _, kind, file, offset, length in _captures(data):
        with (data / "warc" / file).open("rb") as f:
            f.seek(offset)
            record, used = read_record(f.read(length))
        assert used == length
        assert record.type == ("revisit" if kind == 1 else "response")
        n += 1
    return n


def _indexes_match_a_reading_back(data: Path, scratch: Path) -> None:
    """The CDXJ the peer made of each closed file from the lines it kept while writing
    is the one reading the file back makes, and no file of lines is left."""
    scratch.mkdir()
    for path in _files(data):
        copy = scratch / path.name
        copy.write_bytes(path.read_bytes())
        kept = path.with_name(path.name + ".cdxj").read_bytes()
        assert kept and kept == index_warc(copy).read_bytes()
    assert not list((data / "warc").glob(".*"))


# -- the records ---------------------------------------------------------------------


def test_a_record_is_read_back_whole_and_fed_a_byte_at_a_time() -> None:
    body = b"<html>" + bytes(range(256)) * 40 + b"</html>"
    head = response_head(HEAD, len(body))
    common = [("WARC-Date", "2026-01-01T00:00:00Z"), ("WARC-Target-URI", "http://a.test/x?y=1")]
    records = [
        member(warc_record(fields_text([("WARC-Type", "request"), ("WARC-Record-ID", record_id()),
                                        *common]),
                           "application/http; msgtype=request",
                           request_block("http://a.test/x?y=1", HEAD))),
        member(warc_record(fields_text([("WARC-Type", "response"), ("WARC-Record-ID", record_id()),
                                        *common]),
                           "application/http; msgtype=response",
                           head + body, payload_digest=sha1_digest(body))),
    ]  # fmt: skip
    stream = b"".join(records)
    whole, used = read_record(stream)
    assert whole.type == "request" and used == len(records[0])
    assert whole.block.startswith(b"GET /x?y=1 HTTP/1.1\r\nHost: a.test\r\n")
    reader = RecordReader()
    got = [r for i in range(len(stream)) for r in reader.feed(stream[i : i + 1])]
    assert [(off, n) for _, off, n in got] == [
        (0, len(records[0])),
        (len(records[0]), len(records[1])),
    ]
    assert not reader.partial
    response = got[1][0]
    assert response.http_payload() == body
    # The encoded message's headers renamed, the payload's length given.
    assert b"\r\nX-Crawler-Content-Encoding: gzip\r\n" in response.block
    assert b"\r\nX-Crawler-Transfer-Encoding: chunked\r\n" in response.block
    assert f"\r\nContent-Length: {len(body)}\r\n".encode() in response.block
    # A torn member is partial, not a record.
    torn = RecordReader()
    assert list(torn.feed(records[1][:-5])) == [] and torn.partial
    # warcio reads it and finds its digests right.
    recs = list(ArchiveIterator(io.BytesIO(stream), check_digests=True))
    assert [r.rec_type for r in recs] == ["request", "response"]


# -- the store -----------------------------------------------------------------------


def test_pages_go_to_warc_files_rotated_at_their_size_and_read_back(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path, warc_size=4_000)
    bodies = {fp: (b"<p>page %d</p>" % fp) * (200 + fp) for fp in range(1, 31)}
    for fp in range(1, 31, 3):
        with shard.transaction():
            shard.record_pages([_page(f, bodies[f]) for f in range(fp, fp + 3)])
    assert all(shard.page_body(fp) == bodies[fp] for fp in bodies)
    shard.close()
    files = _files(tmp_path)
    assert len(files) > 2 and all(f.name.endswith(".warc.gz") for f in files)
    assert all(f.name.startswith("ubipy-local-") for f in files)
    # Each closed file was indexed as it was closed (ubipy.store.warcindex).
    _indexes_match_a_reading_back(tmp_path, tmp_path / "scratch")
    check = _warcio_check(files)
    assert check.returncode == 0, check.stdout
    assert _each_capture_reads_back(tmp_path) == 30
    # Nothing of the bodies in the shard.
    with sqlite3.connect(tmp_path / SHARD_FILE) as conn:
        assert conn.execute("SELECT count(*) FROM bodies").fetchone()[0] == 0


def test_a_higher_warc_level_writes_fewer_bytes_of_the_same_pages(tmp_path: Path) -> None:
    rng = random.Random(7)
    words = [b"crawl", b"peer", b"shard", b"ring", b"frontier", b"robots", b"page", b"host"]
    bodies = {fp: b" ".join(rng.choice(words) for _ in range(4000)) for fp in (1, 2)}
    sizes = {}
    for level in (1, 9):
        shard = Shard.open(tmp_path / str(level), warc_size=10**9, warc_level=level)
        with shard.transaction():
            shard.record_pages([_page(fp, body) for fp, body in bodies.items()])
        assert all(shard.page_body(fp) == body for fp, body in bodies.items())
        shard.close()
        sizes[level] = sum(f.stat().st_size for f in _files(tmp_path / str(level)))
        assert _warcio_check(_files(tmp_path / str(level))).returncode == 0
    assert sizes[9] < 0.9 * sizes[1]


@pytest.mark.parametrize("level", [1, 6])
def test_a_large_body_is_written_in_pieces_as_the_same_record(tmp_path: Path, level: int) -> None:
    """A large body (a sitemap may be 50 MB) is not copied whole into a block, a record
    and a member in turn (QA: 4.5 times its size held at once): its record, written in
    pieces, is one gzip member that reads back as a small body's does."""
    rng = random.Random(level)
    bodies = {
        1: rng.randbytes(4 * LARGE_BODY),  # stored, not compressed
        2: b"a" * (3 * LARGE_BODY),
        3: b"<p>small</p>",
    }
    shard = Shard.open(tmp_path, warc_size=10**9, warc_level=level)
    pages = [_page(fp, body) for fp, body in bodies.items()]
    tracemalloc.start()
    try:
        with shard.transaction():
            shard.record_pages(pages)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The compressed record of the body that does not compress (kept until the commit),
    # and little else: 3.4 times the body before, each body copied whole three times.
    assert peak < 1.75 * len(bodies[1])
    assert all(shard.page_body(fp) == body for fp, body in bodies.items())
    shard.close()
    assert _each_capture_reads_back(tmp_path) == 3
    check = _warcio_check(_files(tmp_path))
    assert check.returncode == 0, check.stdout
    with _files(tmp_path)[0].open("rb") as f:
        digests = {
            r.rec_headers.get_header("WARC-Target-URI"): r.rec_headers.get_header(
                "WARC-Payload-Digest"
            )
            for r in ArchiveIterator(f)
            if r.rec_type == "response"
        }
    assert digests == {f"http://a.test/{fp}": sha1_digest(body) for fp, body in bodies.items()}


@pytest.mark.parametrize("level", [1, 6])
@pytest.mark.parametrize("size", [0, 1, SMALL_RECORD - 1, SMALL_RECORD, 100_000])
def test_a_record_of_any_size_is_one_gzip_member_of_itself(level: int, size: int) -> None:
    # Under SMALL_RECORD at level 1 another compressor's level serves: its member is
    # the same standard gzip.
    record = random.Random(size).choice([b"GET / HTTP/1.1\r\n", b"\x00\xff"]) * size
    record = record[:size]
    data = member(record, level) + b"next"
    z = zlib.decompressobj(31)
    assert z.decompress(data) == record
    assert z.eof and z.unused_data == b"next"


def test_a_refused_commit_leaves_no_records_behind(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path, warc_size=10**9)
    with shard.transaction():
        shard.record_pages([_page(1, b"one" * 100)])
    open_file = next((tmp_path / "warc").glob("*.open"))
    size = open_file.stat().st_size
    with pytest.raises(StorageError), shard.transaction():
        shard.record_pages([_page(2, b"two" * 100)])
        # As SQLite refusing the commit (a full disk) would.
        shard._conn.execute("INSERT INTO no_such_table VALUES (1)")
    assert open_file.stat().st_size == size
    # The batch goes again (Commits re-queues it): written once, where it was.
    with shard.transaction():
        shard.record_pages([_page(2, b"two" * 100)])
    assert shard.page_body(2) == b"two" * 100
    shard.close()
    check = _warcio_check(_files(tmp_path))
    assert check.returncode == 0, check.stdout
    assert check.stdout.count(" response") == 2
    assert _each_capture_reads_back(tmp_path) == 2


def test_a_torn_tail_is_cut_at_the_next_open(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path, warc_size=10**9)
    with shard.transaction():
        shard.record_pages([_page(1, b"one" * 100), _page(2, b"two" * 100)])
    committed = next((tmp_path / "warc").glob("*.open"))
    end = committed.stat().st_size
    # A kill in the middle of the next commit: records past the mark, one torn.
    extra = member(warc_record("WARC-Type: resource\r\n", "text/plain", b"x" * 5000))
    with committed.open("ab") as f:
        f.write(extra + extra[:37])
    shard._conn.close()  # no clean close: the process died
    # And a file begun by a commit that never came.
    (tmp_path / "warc" / "ubipy-local-29990101000000-00009.warc.gz.open").write_bytes(extra)

    shard = Shard.open(tmp_path, warc_size=10**9)
    files = _files(tmp_path)
    assert [f.name for f in files] == [committed.name.removesuffix(".open")]
    assert files[0].stat().st_size == end
    assert shard.page_body(2) == b"two" * 100
    shard.close()
    assert _warcio_check(files).returncode == 0


def test_a_file_left_with_nothing_whole_goes_only_once_the_shard_forgot_it(
    tmp_path: Path,
) -> None:
    """A file whose close failed (not the marked one), then cut by an OS crash to less
    than its first record: recovery removed it before the shard forgot its captures,
    and a kill in between left pages done whose records were nowhere, for good (found
    by a review). It stays, open and cut, until the shard has forgotten them."""
    directory = tmp_path / "warc"
    directory.mkdir()
    name = "ubipy-local-20260101000000-00001.warc.gz"
    (directory / (name + ".open")).write_bytes(b"\x1f\x8b torn")

    def ends(file: str, within: int | None) -> int | None:
        return 500 if file == name and within is None else None  # captures up to 500

    marked = ("ubipy-local-20260101000000-00002.warc.gz", 0)
    done = warcfiles.recover(directory, marked, ends, "ubipy-local-")
    assert (name, 0) in done.short
    assert (directory / (name + ".open")).stat().st_size == 0  # cut, still there


@pytest.mark.parametrize("gone", [False, True])
def test_a_visit_lost_with_a_files_end_takes_its_validators_and_digest_with_it(
    tmp_path: Path, gone: bool
) -> None:
    """A recrawl's visit whose records an OS crash lost left the page's refresh row
    with that version's ETag and digest: the next 304 (or the same digest) wrote a
    revisit record pointing at the lost capture, and the version was never archived
    (found by a review). The row asks for the page afresh now. A lost 404 was no
    version of the page: the row keeps what it held (a review)."""
    shard = Shard.open(tmp_path, warc_size=10**9)
    shard.add_to_frontier([NewURL(1, "http://a.test/1", "a.test", 1)])
    first = RefreshRow(
        1, "http://a.test/1", "a.test", 0, 1, 0, 0, 1001, 2000, 0, None, None, "sha1:V1"
    )
    with shard.transaction():
        shard.record_pages([_page(1, b"v1" * 100)])
        shard.save_refresh([first], [])
    size = next((tmp_path / "warc").glob("*.open")).stat().st_size
    second = dataclasses.replace(
        first, visits=2, changes=1, last_visit=1101, etag='"e2"', digest="sha1:V2"
    )
    visit = Visit(
        1,
        1101.0,
        200,
        True,
        "sha1:V2",
        "text/html",
        200,
        '"e2"',
        None,
        b"v2" * 100,
        "http://a.test/1",
        HEAD,
    )
    if gone:
        second = dataclasses.replace(first, last_visit=1101, etag='"e1"')
        visit = dataclasses.replace(visit, status=404, changed=False, body=b"gone", length=4)
    with shard.transaction():
        shard.save_refresh([second], [visit])
    shard._conn.close()  # an OS crash: the visit's records never reached the disk
    os.truncate(next((tmp_path / "warc").glob("*.open")), size)

    shard = Shard.open(tmp_path, warc_size=10**9)
    conn = shard._conn
    assert conn.execute("SELECT count(*) FROM visits").fetchone() == (0,)
    held = ('"e1"', None, "sha1:V1") if gone else (None, None, None)
    assert conn.execute("SELECT etag, last_modified, digest FROM refresh").fetchall() == [held]
    shard.close()


def test_a_new_shard_keeps_the_files_an_earlier_one_left_open(tmp_path: Path) -> None:
    """The user started afresh beside the archive a killed peer left (its shard
    deleted): the new shard, knowing nothing of the open file, removed it, captures
    and all (found by a review). It is this shard's to remove no more than a file of
    another name is: cut to its last whole record and closed; the other left alone."""
    shard = Shard.open(tmp_path, warc_size=10**9)
    with shard.transaction():
        shard.record_pages([_page(1, b"one" * 100), _page(2, b"two" * 100)])
    left = next((tmp_path / "warc").glob("*.open"))
    size = left.stat().st_size
    shard._conn.close()  # killed
    for leftover in tmp_path.glob("shard.sqlite3*"):
        leftover.unlink()  # the user starts afresh, keeping the archive
    theirs = tmp_path / "warc" / "notes.open"
    theirs.write_bytes(b"the user's own")

    Shard.open(tmp_path, warc_size=10**9).close()
    kept = left.with_name(left.name.removesuffix(".open"))
    assert kept.stat().st_size == size and not left.exists()
    assert theirs.read_bytes() == b"the user's own"
    assert _warcio_check([kept]).returncode == 0


def test_another_peer_s_open_files_are_left_as_they_are(tmp_path: Path) -> None:
    """Open files of another peer's id in the directory (copied there, a data directory
    shared by mistake): a new peer removed the empty and the torn ones and cut the
    others, as if its own, and indexed closed ones (QA). Left as they are now."""
    directory = tmp_path / "warc"
    directory.mkdir()
    shard = Shard.open(tmp_path, warc_size=10**9)
    with shard.transaction():
        shard.record_pages([_page(1, b"one" * 100)])
    whole = next(directory.glob("*.open")).read_bytes()
    shard.close()
    theirs = {
        "ubipy-2222222222222222-20260101000000-00001.warc.gz.open": whole + b"torn tail",
        "ubipy-3333333333333333-20260101000000-00001.warc.gz.open": b"x",
        "ubipy-4444444444444444-20260101000000-00001.warc.gz.open": b"",
    }
    # Closed ones (the user's own file among them) got a .cdxj index beside them.
    theirs["ubipy-5555555555555555-20260101000000-00001.warc.gz"] = whole
    theirs["mine.warc.gz"] = b"not a WARC file"
    for name, data in theirs.items():
        (directory / name).write_bytes(data)
    Shard.open(tmp_path, warc_size=10**9).close()
    for name, data in theirs.items():
        assert (directory / name).read_bytes() == data
        assert not (directory / f"{name}.cdxj").exists()


def test_a_warc_directory_that_cannot_be_made_refuses_the_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full or read-only disk at the first page: the OSError of making the warc
    directory went up past the committer, and the peer died of it (found by a review)."""
    shard = Shard.open(tmp_path, warc_size=10**9)

    def full(self: Path, *args: Any, **kwargs: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "mkdir", full)
    with pytest.raises(StorageError, match="No space left"), shard.transaction():
        shard.record_pages([_page(1, b"one")])
    monkeypatch.undo()
    with shard.transaction():
        shard.record_pages([_page(1, b"one")])
    assert shard.page_body(1) == b"one"
    shard.close()


@pytest.mark.parametrize("gone", ["the open file", "the warc directory"])
def test_a_missing_open_file_sends_its_pages_back_to_the_frontier(
    tmp_path: Path, gone: str
) -> None:
    shard = Shard.open(tmp_path, warc_size=10**9)
    urls = [NewURL(fp, f"http://a.test/{fp}", "a.test", 1) for fp in (1, 2)]
    shard.add_to_frontier(urls)
    with shard.transaction():
        shard.record_pages([_page(1, b"one" * 100), _page(2, b"two" * 100)])
    shard._conn.close()  # an OS crash: the shard's commit reached the disk, the file not
    if gone == "the open file":
        next((tmp_path / "warc").glob("*.open")).unlink()
    else:
        shutil.rmtree(tmp_path / "warc")

    shard = Shard.open(tmp_path, warc_size=10**9)
    counts = shard.counts()
    assert (counts.pages, counts.pending, counts.done) == (0, 2, 0)
    assert [r.url for r in shard.pending_for_host("a.test", 0, 10)] == [u.url for u in urls]
    assert _captures(tmp_path) == []
    # Fetched again, they go to a new file, as any page.
    with shard.transaction():
        shard.record_pages([_page(1, b"one" * 100)])
    assert shard.page_body(1) == b"one" * 100
    shard.close()
    assert _each_capture_reads_back(tmp_path) == 1


def _two_pages_then(tmp_path: Path, *, stop: Literal["clean", "kill"], size: int = 10**9) -> Path:
    """A shard with pages 1 and 2 done in WARC files (rotated past ``size`` bytes),
    closed cleanly or killed; its warc directory."""
    shard = Shard.open(tmp_path, warc_size=size)
    shard.add_to_frontier([NewURL(fp, f"http://a.test/{fp}", "a.test", 1) for fp in (1, 2)])
    for fp in (1, 2):
        with shard.transaction():
            shard.record_pages([_page(fp, random.Random(fp).randbytes(3_000))])
    if stop == "clean":
        shard.close()
    else:
        shard._conn.close()  # killed: the open file stays open, the mark with it
    return tmp_path / "warc"


@pytest.mark.parametrize("gone", ["the last file", "the warc directory"])
def test_after_a_clean_stop_a_missing_warc_file_forgets_no_page(tmp_path: Path, gone: str) -> None:
    """QA: the warc directory on a disk not mounted, or the last file moved away, after
    a clean stop: the shard forgot 136 pages of 137, to be fetched again, as if an OS
    crash had lost them. Only a crash leaves the mark that says so."""
    warc = _two_pages_then(tmp_path, stop="clean")
    moved = tmp_path / "elsewhere"
    if gone == "the last file":
        moved.mkdir()
        (last,) = warc.glob("*.warc.gz")
        last.rename(moved / last.name)
    else:
        warc.rename(moved)
    shard = Shard.open(tmp_path, warc_size=10**9)
    assert (shard.counts().pages, shard.counts().pending) == (2, 0)
    shard.close()
    assert len(_captures(tmp_path)) == 2


@pytest.mark.parametrize("stop", ["clean", "kill"])
@pytest.mark.parametrize("there", ["a file", "a link to nothing"])
def test_a_warc_path_that_is_not_a_directory_refuses_the_start_forgetting_nothing(
    tmp_path: Path, stop: Literal["clean", "kill"], there: str
) -> None:
    warc = _two_pages_then(tmp_path, stop=stop)
    warc.rename(tmp_path / "elsewhere")
    if there == "a file":
        warc.write_bytes(b"not a directory")
    else:
        warc.symlink_to(tmp_path / "unmounted" / "warc")
    with pytest.raises(ShardError, match="not a directory"):
        Shard.open(tmp_path, warc_size=10**9)
    assert len(_captures(tmp_path)) == 2
    warc.unlink()
    (tmp_path / "elsewhere").rename(warc)
    shard = Shard.open(tmp_path, warc_size=10**9)
    assert (shard.counts().pages, shard.counts().pending) == (2, 0)
    shard.close()


def test_a_killed_peers_warc_directory_missing_with_closed_files_refuses_the_start(
    tmp_path: Path,
) -> None:
    """An OS crash may lose a directory made a moment before, its one file with it,
    not files closed long ago: those mean a disk not mounted."""
    warc = _two_pages_then(tmp_path, stop="kill", size=1_000)  # a file a page
    assert len({capture[3] for capture in _captures(tmp_path)}) == 2
    warc.rename(tmp_path / "elsewhere")
    with pytest.raises(ShardError, match="missing, and the shard has 1 captures"):
        Shard.open(tmp_path, warc_size=10**9)
    assert len(_captures(tmp_path)) == 2


class _Killed(BaseException):
    """The process dies here."""


def test_a_short_file_stays_open_until_the_shard_has_forgotten_what_it_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An OS crash left the open file 4,000 bytes short (page 3's capture), and the
    # next start was killed as recovery returned: the file was cut and closed, and the
    # shard still counted pages past its end, never fetched again (a review).
    shard = Shard.open(tmp_path, warc_size=10**9)
    shard.add_to_frontier([NewURL(fp, f"http://a.test/{fp}", "a.test", 1) for fp in (1, 2, 3)])
    with shard.transaction():
        shard.record_pages([_page(fp, random.Random(fp).randbytes(3_000)) for fp in (1, 2, 3)])
    shard._conn.close()  # an OS crash: the shard's commit reached the disk, the file not
    (open_file,) = (tmp_path / "warc").glob("*.open")
    os.truncate(open_file, open_file.stat().st_size - 4_000)
    real = warcfiles.recover

    def recover_then_die(*args: Any) -> Recovered:
        real(*args)
        raise _Killed

    monkeypatch.setattr(warcrecovery, "recover", recover_then_die)
    with pytest.raises(_Killed):
        Shard.open(tmp_path, warc_size=10**9)
    monkeypatch.setattr(warcrecovery, "recover", real)
    # And the file is closed once the shard's commit is on disk (its WAL synced): a
    # power cut could keep the file's name and lose the commit (a review).
    done: list[str] = []
    sync, close = walsync.sync_wal, warcfiles.close_file

    def synced(path: Path, *, directory: bool) -> bool:
        done.append("sync")
        return sync(path, directory=directory)

    def closed(path: Path) -> Path:
        done.append("close")
        return close(path)

    monkeypatch.setattr(shard_module, "sync_wal", synced)
    monkeypatch.setattr(warcrecovery, "close_file", closed)
    shard = Shard.open(tmp_path, warc_size=10**9)
    assert done == ["sync", "close"]
    assert [r.fp for r in shard.pending_for_host("a.test", 0, 10)] == [3]
    assert shard.page_body(2) == random.Random(2).randbytes(3_000)
    shard.close()
    assert _each_capture_reads_back(tmp_path) == 2


def _fails_once(real: Callable[..., None]) -> Callable[..., None]:
    calls = iter([True])

    def call(*args: object) -> None:
        if next(calls, False):
            raise OSError(errno.EIO, "Input/output error")
        real(*args)

    return call


@pytest.mark.parametrize("fault", ["rename at rotation", "cut at rotation", "cut at rollback"])
def test_a_file_left_open_by_a_failure_keeps_its_committed_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    # A cut refused at rotation came past the shard's COMMIT: it ended the committer
    # task, and the peer (a review).
    one = random.Random(1).randbytes(3_000)
    if fault.endswith("at rotation"):
        shard = Shard.open(tmp_path, warc_size=3_000)
        refused = "replace" if fault.startswith("rename") else "ftruncate"
        with monkeypatch.context() as m:
            m.setattr(os, refused, _fails_once(getattr(os, refused)))
            with shard.transaction():
                shard.record_pages([_page(1, one)])  # fills the file, which cannot close
    else:
        shard = Shard.open(tmp_path, warc_size=10**9)
        with shard.transaction():
            shard.record_pages([_page(1, one)])
        files = shard._warc.files  # type: ignore[union-attr]
        flush = files.flush

        def written_then_refused() -> None:
            flush()
            raise sqlite3.OperationalError("database or disk is full")  # as COMMIT would

        with monkeypatch.context() as m, pytest.raises(StorageError), shard.transaction():
            m.setattr(files, "flush", written_then_refused)
            m.setattr(os, "ftruncate", _fails_once(os.ftruncate))
            shard.record_pages([_page(2, b"two" * 100)])
    # The next commit begins another file and the mark moves to it.
    with shard.transaction():
        shard.record_pages([_page(3, b"three" * 100)])
    assert len(list((tmp_path / "warc").glob("*.open"))) == 2
    # Exported meanwhile: the file left open is taken to its last capture (it was
    # refused as missing until the peer's next start; a review).
    out = tmp_path / "out.warc.gz"
    export([tmp_path], "warc", out)
    assert _warcio_check([out]).stdout.count(" response") == 2
    shard._conn.close()  # killed

    shard = Shard.open(tmp_path, warc_size=2_000)
    assert (shard.page_body(1), shard.page_body(3)) == (one, b"three" * 100)
    assert shard.counts().pages == 2
    shard.close()
    files = _files(tmp_path)
    assert len(files) == 2 and all(f.name.endswith(".warc.gz") for f in files)
    check = _warcio_check(files)
    assert check.returncode == 0, check.stdout
    # The refused batch's records, past the file's last capture, were cut off.
    assert check.stdout.count(" response") == 2
    assert _each_capture_reads_back(tmp_path) == 2


@pytest.mark.parametrize(
    ("fmt", "which"),
    [("warc", "closed"), ("warc", "open"), ("jsonl", "closed"), ("jsonl", "its index")],
)
def test_an_export_onto_the_peers_own_warc_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, which: str
) -> None:
    data = tmp_path / "peer"
    shard = Shard.open(data, warc_size=3_000)
    bodies = {fp: random.Random(fp).randbytes(1_500) for fp in (1, 2, 3)}
    for fp, body in bodies.items():
        with shard.transaction():
            shard.record_pages([_page(fp, body)])
    with shard.transaction():
        shard.record_pages([_page(4, b"four")])  # the open file's page
    # The closed files' indexes are written by threads of their own (one was not
    # there yet, once in CI).
    shard._warc.wait_indexed()  # type: ignore[union-attr]
    files = _files(data)
    target = next(f for f in files if f.name.endswith(".open") == (which == "open"))
    if which == "its index":
        # Replaced, it was kept by `ubipy index` as newer than its WARC (a review).
        target = target.with_name(target.name + ".cdxj")
        files = [*files, target]
    before = {f: f.read_bytes() for f in files}
    code = main(["export", "--data", str(data), "--format", fmt, "--out", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err == (
        f"ubipy export: {target}: is one of the peers' own files (a shard, its lock, a "
        "WARC file or its index); left as it is\n"
    )
    assert {f: f.read_bytes() for f in files} == before
    assert [shard.page_body(fp) for fp in bodies] == list(bodies.values())
    shard.close()


def _filled(data: Path, files: int) -> Shard:
    """A shard at ``data`` whose WARC files (3,000 bytes each) are ``files`` closed
    ones of two pages each (fingerprints 1 and 2, 3 and 4, ...)."""
    shard = Shard.open(data, warc_size=3_000)
    for fp in range(1, 2 * files, 2):
        with shard.transaction():
            shard.record_pages([_page(f, b"<p>x</p>" * 300) for f in (fp, fp + 1)])
    return shard


@pytest.mark.parametrize("which", ["closed", "open"])
def test_an_export_onto_a_warc_files_index_not_yet_written_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], which: str
) -> None:
    # Refused only when there: written in its place, the export was then kept by
    # `ubipy index`, or by the peer, as the file's index (newer than the file).
    data = tmp_path / "peer"
    shard = _filled(data, 2)
    with shard.transaction():
        shard.record_pages([_page(5, b"five")])  # the open file's page
    shard._warc.wait_indexed()  # type: ignore[union-attr]
    warc = next(f for f in _files(data) if f.name.endswith(".open") == (which == "open"))
    final = data / "warc" / warc.name.removesuffix(".open")
    (data / "warc" / (final.name + ".cdxj")).unlink(missing_ok=True)  # as a kill -9 leaves it
    # Nor the open file's final name: the peer's close would rename over the export
    # (as `ubipy index -o` refuses it).
    for target in (final.with_name(final.name + ".cdxj"), final):
        code = main(["export", "--data", str(data), "--format", "jsonl", "--out", str(target)])
        err = capsys.readouterr().err
        assert (code, err) == (
            2,
            f"ubipy export: {target}: is one of the peers' own files (a shard, its lock, a "
            "WARC file or its index); left as it is\n",
        )
        assert target.exists() == (target == final and which == "closed")
    shard.close()


def test_a_file_closed_without_its_index_is_indexed_at_the_next_start(tmp_path: Path) -> None:
    """A file's CDXJ is written by a thread once the file is closed: a kill -9 before
    it wrote it left the file unindexed for good, and pywb without its captures
    (13 of about 5,000 rotations in a review's kill -9 runs). The next start indexes
    every closed file whose CDXJ is missing or older than the file."""
    shard = Shard.open(tmp_path, warc_size=4_000)
    for fp in range(1, 13, 3):
        with shard.transaction():
            shard.record_pages([_page(f, (b"<p>%d</p>" % f) * 300) for f in range(fp, fp + 3)])
    shard.close()
    files = _files(tmp_path)
    lost = files[0].with_name(files[0].name + ".cdxj")
    kept = lost.read_bytes()
    lost.unlink()  # as a kill -9 before the thread's write leaves it
    Shard.open(tmp_path, warc_size=4_000).close()  # close() waits for the indexes
    assert lost.read_bytes() == kept


def test_the_index_of_odd_media_types_is_pywbs_own(tmp_path: Path) -> None:
    """A Content-Type with no type before its parameters (';x') was indexed as "unk",
    where pywb leaves the field out (found by a review); none, or an empty one, is "unk".
    One in UTF-8 is read as UTF-8, as warcio reads it (it was read as Latin-1)."""
    types = [b";x", b";", b"", b"text/html;", b" text/plain ", None, b"text/h\xc3\xa9ml"]
    pages = []
    for n, media in enumerate(types, start=1):
        fields = () if media is None else ((b"Content-Type", media),)
        head = HttpHead(200, "OK", "HTTP/1.1", fields, ((b"Host", b"a.test"),))
        pages.append(dataclasses.replace(_page(n, b"<p>%d</p>" % n), head=head))
    shard = Shard.open(tmp_path / "peer", warc_size=10**9)
    with shard.transaction():
        shard.record_pages(pages)
    shard.close()  # the file closed, its index written from the lines kept
    [warc] = _files(tmp_path / "peer")
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / warc.name).write_bytes(warc.read_bytes())
    kept = warc.with_name(warc.name + ".cdxj").read_bytes()
    assert kept == pywb_cdxj(copy / warc.name, copy)
    assert kept.count(b'"mime": "unk"') == 2  # none, and an empty one
    assert index_warc(copy / warc.name).read_bytes() == kept  # and `ubipy index`'s


def test_a_live_peer_exported_into_a_directory_again_and_again(tmp_path: Path) -> None:
    """The file being written is exported as its committed part, under its final
    name: every later export into the same directory was refused ("not the peer's
    file": it was the export's own copy, found by a review). The copy is extended; a
    file of that name that is not a beginning of the peer's is still refused."""
    data, out = tmp_path / "peer", tmp_path / "out"
    out.mkdir()
    shard = Shard.open(data, warc_size=10**9)
    for fp in (1, 2, 3):
        with shard.transaction():
            shard.record_pages([_page(fp, b"<p>%d</p>" % fp)])
        assert export([data], "warc", out).pages == fp
    shard.close()  # closed now: the copy is the whole file
    assert export([data], "warc", out).pages == 3
    [warc] = _files(data)
    assert (out / warc.name).read_bytes() == warc.read_bytes()
    (out / warc.name).write_bytes(b"the user's own")
    with pytest.raises(ExportError, match="already there, and not the peer's file"):
        export([data], "warc", out)
    assert (out / warc.name).read_bytes() == b"the user's own"


def test_an_export_that_fails_leaves_an_earlier_copy_as_it_was(tmp_path: Path) -> None:
    """An export that extended an earlier export's copy of the open file and then failed
    (another peer's file found cut) left the copy extended (a review): now nothing of
    a failed export is left, and the user's copy is what the earlier export made."""
    data, other, out = tmp_path / "peer", tmp_path / "other", tmp_path / "out"
    out.mkdir()
    shard = Shard.open(data, warc_size=10**9)
    with shard.transaction():
        shard.record_pages([_page(1, b"<p>1</p>")])
    assert export([data], "warc", out).pages == 1
    [copy] = out.iterdir()
    before = copy.read_bytes()
    with shard.transaction():
        shard.record_pages([_page(2, b"<p>2</p>")])
    cut = Shard.open(other, warc_size=10**9)
    with cut.transaction():
        cut.record_pages([_page(3, b"<p>3</p>" * 100)])
    cut.close()
    [warc] = _files(other)
    warc.write_bytes(warc.read_bytes()[:-40])
    with pytest.raises(ExportError):
        export([data, other], "warc", out)
    assert [p.name for p in out.iterdir()] == [copy.name]
    assert copy.read_bytes() == before
    # Failing while it adds to the copy (its own file found short of its committed end,
    # as after an OS crash): cut back as well.
    [open_file] = (data / "warc").glob("*.open")
    whole = open_file.read_bytes()
    open_file.write_bytes(whole[: len(before) + 10])
    with pytest.raises(ExportError, match="shorter than the shard says"):
        export([data], "warc", out)
    assert copy.read_bytes() == before
    # And the export that works extends it as ever.
    open_file.write_bytes(whole)
    assert export([data], "warc", out).pages == 2
    shard.close()
    assert copy.read_bytes().startswith(before) and len(copy.read_bytes()) > len(before)


def test_old_shards_keep_their_bodies_and_new_pages_go_to_warc(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)  # --bodies shard
    with shard.transaction():
        shard.record_pages([_page(1, b"old" * 100)])
    shard.close()
    assert not (tmp_path / "warc").exists()
    shard = Shard.open(tmp_path, warc_size=10**9)
    with shard.transaction():
        shard.record_pages([_page(2, b"new" * 100)])
    assert (shard.page_body(1), shard.page_body(2)) == (b"old" * 100, b"new" * 100)
    shard.close()
    # Exported as one WARC: the peer's file, then the page kept in the shard.
    out = tmp_path / "out.warc.gz"
    summary = export([tmp_path], "warc", out)
    assert (summary.pages, summary.files, summary.left_out) == (2, 1, 0)
    assert _warcio_check([out]).returncode == 0
    with gzip.open(out) as f:
        responses = [
            r.content_stream().read() for r in ArchiveIterator(f) if r.rec_type == "response"
        ]
    assert responses == [b"new" * 100, b"old" * 100]


def test_a_shard_page_exported_keeps_the_charset_its_header_gave(tmp_path: Path) -> None:
    """The rebuilt response said ``text/html`` alone: a GBK page whose ``<meta>`` says
    UTF-8, read right by the crawl from the header, was UTF-8 mojibake on replay (QA)."""
    shard = Shard.open(tmp_path)  # --bodies shard
    decided = {1: ("gbk", "header"), 2: ("gbk", "detected"), 3: (None, None)}
    with shard.transaction():
        shard.record_pages(
            [
                dataclasses.replace(_page(fp, b"<p>x</p>"), encoding=e, encoding_source=s)
                for fp, (e, s) in decided.items()
            ]
        )
    shard.close()
    out = tmp_path / "out.warc.gz"
    export([tmp_path], "warc", out)
    with gzip.open(out) as f:
        types = {
            r.rec_headers.get_header("WARC-Target-URI"): r.http_headers.get_header("Content-Type")
            for r in ArchiveIterator(f)
            if r.rec_type == "response"
        }
    assert types == {
        "http://a.test/1": "text/html; charset=gbk",
        "http://a.test/2": "text/html",  # ubipy's guess, not the server's word
        "http://a.test/3": "text/html",
    }


def test_a_directory_export_writes_the_shards_pages_gzipped_under_their_name(
    tmp_path: Path,
) -> None:
    data = tmp_path / "peer"
    shard = Shard.open(data)  # --bodies shard
    with shard.transaction():
        shard.record_pages([_page(1, b"old" * 100)])
    shard.close()
    shard = Shard.open(data, warc_size=10**9)
    with shard.transaction():
        shard.record_pages([_page(2, b"new" * 100)])
    shard.close()
    out = tmp_path / "exported"  # its name says nothing of gzip
    out.mkdir()
    summary = export([data], "warc", out)
    assert (summary.pages, summary.files) == (2, 1)
    beside = out / "ubipy-export.warc.gz"
    assert _warcio_check(sorted(out.iterdir())).returncode == 0
    assert beside.read_bytes()[:2] == b"\x1f\x8b"  # gzip, as its name says
    with gzip.open(beside) as f:
        heads = [
            (r.rec_type, r.rec_headers.get_header("WARC-Filename")) for r in ArchiveIterator(f)
        ]
    assert heads[0] == ("warcinfo", beside.name)
    assert [kind for kind, _ in heads].count("response") == 1


@pytest.mark.parametrize(
    ("damage", "out", "message"),
    [
        ("flipped", "out.warc", "not a whole WARC file: Error -3 while decompressing data"),
        # Copied as it was, it was said to be whole (QA).
        ("flipped", "out.warc.gz", "not a whole WARC file: Error -3 while decompressing data"),
        ("cut", "out.warc", "shorter than the shard says"),
        ("cut", "out.warc.gz", "shorter than the shard says"),
        ("cut", "a-dir", "shorter than the shard says"),
        ("cut member", "out.warc", "not a whole WARC file: its last gzip member is cut short"),
    ],
)
def test_a_damaged_warc_file_is_a_one_line_error_and_no_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], damage: str, out: str, message: str
) -> None:
    data = tmp_path / "peer"
    shard = Shard.open(data, warc_size=10**9)
    rng = random.Random(3)
    with shard.transaction():
        shard.record_pages([_page(1, rng.randbytes(3_000)), _page(2, rng.randbytes(3_000))])
    shard.close()
    [warc] = _files(data)
    raw = bytearray(warc.read_bytes())
    if damage == "flipped":
        raw[len(raw) // 2 : len(raw) // 2 + 64] = bytes(b ^ 0xFF for b in raw[len(raw) // 2 :][:64])
    elif damage == "cut":
        del raw[-1_500:]
    else:
        # A closed file whose last member was cut short, its size as the shard says it
        # is (no capture ends at its very end: a torn tail of garbage after it).
        with sqlite3.connect(data / SHARD_FILE) as conn:
            conn.execute("UPDATE warc SET end = ? WHERE end = ?", (len(raw) - 10, len(raw)))
        conn.close()
        del raw[-10:]
    warc.write_bytes(raw)
    target = tmp_path / out
    if out == "a-dir":
        target.mkdir()
    code = main(["export", "--data", str(data), "--format", "warc", "--out", str(target)])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"ubipy export: {warc}: {message}"), err
    assert err.count("\n") == 1
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == (["a-dir", "peer"] if out == "a-dir" else ["peer"])
    if out == "a-dir":
        assert not list(target.iterdir())


def test_a_failed_directory_export_leaves_nothing_it_made(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Docs: a damaged file ends the export with nothing left of the output. Peer 1's
    files, linked before peer 2's cut file was found, were left in the directory
    (exit 2, a review found). What this export made goes; what was there stays."""
    peers = [tmp_path / "peer1", tmp_path / "peer2"]
    for n, data in enumerate(peers, start=1):
        shard = Shard.open(data, warc_size=2_000)
        with shard.transaction():
            shard.set_meta("peer_id", f"{n}" * 16)
        for fp in (1, 3):
            with shard.transaction():
                shard.record_pages([_page(f, b"<p>x</p>" * 300) for f in (fp, fp + 1)])
        shard.close()
    own = {path: path.read_bytes() for path in _files(peers[0])}
    first, _ = list(own)
    cut = _files(peers[1])[0]
    cut.write_bytes(cut.read_bytes()[:-1_500])
    out = tmp_path / "tdir"
    out.mkdir()
    (out / "keep.txt").write_bytes(b"the user's")
    os.link(first, out / first.name)  # an earlier export's
    args = ["export", "--data", *map(str, peers), "--format", "warc", "--out", str(out)]
    assert main(args) == 2
    assert capsys.readouterr().err.startswith(f"ubipy export: {cut}: shorter than the shard")
    assert sorted(p.name for p in out.iterdir()) == sorted(["keep.txt", first.name])
    assert (out / "keep.txt").read_bytes() == b"the user's"
    assert os.path.samefile(out / first.name, first)
    assert {path: path.read_bytes() for path in _files(peers[0])} == own  # untouched


# -- crawls --------------------------------------------------------------------------


async def test_a_crawl_writes_files_warcio_checks_and_exports_them_linked(
    tmp_path: Path,
) -> None:
    web = SyntheticWeb(WebSpec(seed=3, hosts=4, pages_per_host=12))
    server = in_process(web)
    data = tmp_path / "peer"
    config = CrawlConfig(data_dir=data, politeness=PolitenessConfig(delay=0.0, concurrency=8))
    shard = Shard.open(data, warc_size=30_000)
    async with httpx2.AsyncClient(transport=SynthTransport(server)) as client:
        await crawl_until_idle(config, shard, client, [web.seed_url()])
    with sqlite3.connect(data / SHARD_FILE) as conn:
        answered = conn.execute(
            "SELECT count(*) FROM pages WHERE status IS NOT NULL AND error IS NULL"
        ).fetchone()[0]
    shard.close()
    files = _files(data)
    assert len(files) > 1 and answered > 20
    check = _warcio_check(files)
    assert check.returncode == 0, check.stdout
    # A capture for each page answered, and one for each robots.txt answer.
    robots = sum(1 for r in server.log if r.target_path == "/robots.txt" and r.complete)
    assert robots >= 4
    assert _each_capture_reads_back(data) == answered + robots
    # The response's headers are those the server sent.
    with files[0].open("rb") as f:
        response = next(r for r in ArchiveIterator(f) if r.rec_type == "response")
        assert response.http_headers.get_header("Content-Type")
    out = tmp_path / "export"
    out.mkdir()
    summary = export([data], "warc", out)
    assert sorted(p.name for p in out.iterdir()) == [f.name for f in files]
    assert all((out / f.name).stat().st_ino == f.stat().st_ino for f in files)
    assert summary.files == len(files) and summary.left_out == summary.pages - answered


async def test_with_no_bodies_kept_nothing_goes_to_the_warc_files(tmp_path: Path) -> None:
    # --no-bodies: neither a page nor a robots.txt answer has records.
    web = SyntheticWeb(WebSpec(seed=3, hosts=3, pages_per_host=4))
    server = in_process(web)
    data = tmp_path / "peer"
    config = CrawlConfig(
        data_dir=data,
        politeness=PolitenessConfig(delay=0.0, concurrency=8),
        fetch=FetchConfig(store_bodies=False),
    )
    shard = Shard.open(data, warc_size=10**9)
    async with httpx2.AsyncClient(transport=SynthTransport(server)) as client:
        await crawl_until_idle(config, shard, client, [web.seed_url()])
    shard.close()
    assert any(r.target_path == "/robots.txt" for r in server.log)
    assert sum(1 for r in server.log if r.target_path != "/robots.txt") > 5
    assert _captures(data) == [] and not list(data.glob("warc/*"))


async def test_a_recrawl_writes_revisits_into_the_same_files(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    web = SyntheticWeb(WebSpec(seed=5, hosts=3, pages_per_host=8))
    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.5, concurrency=4),
        recrawl=RecrawlConfig(
            recrawl=True, policy=RefreshPolicy.UNIFORM, rate=0.5, min_interval=60, replan=30
        ),
    )
    shard = Shard.open(tmp_path, warc_size=10**9)
    await recrawl_for(config, shard, in_process(web), [web.seed_url()], 1200)
    shard.close()
    files = _files(tmp_path)
    check = _warcio_check(files)
    assert check.returncode == 0, check.stdout
    ids: dict[str, str] = {}
    revisits = []
    for path in files:
        with path.open("rb") as f:
            for r in ArchiveIterator(f):
                h = r.rec_headers
                if r.rec_type == "response":
                    ids[h.get_header("WARC-Record-ID")] = h.get_header("WARC-Target-URI")
                elif r.rec_type == "revisit":
                    revisits.append(h)
    assert revisits
    for h in revisits:
        # Each refers to a response of the same page, in these files.
        assert ids[h.get_header("WARC-Refers-To")] == h.get_header("WARC-Target-URI")
        assert h.get_header("WARC-Warcinfo-ID")  # its file's warcinfo (QA: none)
        assert h.get_header("WARC-Profile").startswith("http://netpreserve.org/warc/1.1/revisit/")
    assert _each_capture_reads_back(tmp_path) == len(ids) + len(revisits)
    _indexes_match_a_reading_back(tmp_path, tmp_path / "scratch")


def _recrawling(data: Path, fetch: FetchConfig | None = None) -> CrawlConfig:
    """A continuous crawl into ``data`` whose pages are asked again a minute apart."""
    return CrawlConfig(
        data_dir=data,
        fetch=fetch or FetchConfig(),
        politeness=PolitenessConfig(delay=0.5, concurrency=4),
        recrawl=RecrawlConfig(
            recrawl=True, policy=RefreshPolicy.UNIFORM, rate=0.5, min_interval=60, replan=60
        ),
    )


def _changing(every: float, padding: int = 0) -> httpx2.MockTransport:
    """A site of one page, a new version ``every`` seconds, ``padding`` bytes more."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        if request.url.path != "/":
            return httpx2.Response(404)
        version = int(trio.current_time() // every)
        body = f"<html><title>v{version}</title><p>{'x' * padding}</p></html>".encode()
        return httpx2.Response(200, headers={"Content-Type": "text/html"}, content=body)

    return httpx2.MockTransport(answer)


@pytest.mark.parametrize("warc", [True, False], ids=["bodies-warc", "bodies-shard"])
async def test_every_version_cut_at_max_body_says_so(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, warc: bool
) -> None:
    # A continuous crawl of a page longer than --max-body that keeps changing: every
    # response, its first fetch or a later version, says its body was cut, as the peer
    # writes it (--bodies warc) and as an export of the shard writes it.
    config = _recrawling(tmp_path / "peer", FetchConfig(max_body_bytes=100))
    shard = Shard.open(config.data_dir, warc_size=10**9 if warc else None)
    # A new version a minute, every one longer than --max-body.
    await recrawl_for(config, shard, _changing(60, padding=500), ["http://a.test/"], 600)
    shard.close()
    with sqlite3.connect(config.data_dir / SHARD_FILE) as conn:
        (changed,) = conn.execute("SELECT count(*) FROM visits WHERE changed").fetchone()
    assert changed >= 3
    if warc:
        files = _files(config.data_dir)
    else:
        files = [tmp_path / "out.warc.gz"]
        export([config.data_dir], "warc", files[0])
    responses = []
    for path in files:
        with path.open("rb") as f:
            responses += [r.rec_headers for r in ArchiveIterator(f) if r.rec_type == "response"]
    responses = [h for h in responses if h.get_header("WARC-Target-URI") == "http://a.test/"]
    assert len(responses) == 1 + changed
    assert [h.get_header("WARC-Truncated") for h in responses] == ["length"] * len(responses)


@pytest.mark.parametrize("first", [True, False], ids=["warc-then-shard", "shard-then-warc"])
async def test_a_crawl_whose_bodies_moved_exports_every_version_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, first: bool
) -> None:
    # A continuous crawl restarted with --bodies switched: the export holds each visit
    # once, those in the WARC files as they are and those in the shard beside them, and
    # each revisit refers to the response of the version the page had then, wherever
    # that response was written.
    config = _recrawling(tmp_path / "peer")
    for warc in (first, not first):
        shard = Shard.open(config.data_dir, warc_size=10**9 if warc else None)
        await recrawl_for(config, shard, _changing(300), ["http://a.test/"], 1200)
        shard.close()
    with sqlite3.connect(config.data_dir / SHARD_FILE) as conn:
        visits = conn.execute("SELECT at, changed FROM visits").fetchall()
        in_warc = conn.execute("SELECT COUNT(*) FROM warc").fetchone()[0]
        (pages,) = conn.execute("SELECT COUNT(*) FROM pages").fetchone()
    changed = sum(c for _, c in visits)
    assert changed >= 2 and len(visits) - changed >= 4
    assert 0 < in_warc < 1 + len(visits)  # captures on both sides
    out = tmp_path / "out.warc.gz"
    summary = export([config.data_dir], "warc", out)
    assert (summary.pages, summary.visits, summary.visits_left_out) == (pages, len(visits), 0)
    with out.open("rb") as f:
        recs = [r.rec_headers for r in ArchiveIterator(f) if r.rec_type in ("response", "revisit")]
    page = [h for h in recs if h.get_header("WARC-Target-URI") == "http://a.test/"]
    page.sort(key=lambda h: h.get_header("WARC-Date"))
    assert len(page) == 1 + len(visits)
    assert len({h.get_header("WARC-Date") for h in page}) == len(page)
    assert sum(h.get_header("WARC-Type") == "response" for h in page) == 1 + changed
    latest = None
    for h in page:
        if h.get_header("WARC-Type") == "response":
            latest = h
        else:
            assert latest is not None
            assert h.get_header("WARC-Refers-To") == latest.get_header("WARC-Record-ID")
            assert h.get_header("WARC-Payload-Digest") == latest.get_header("WARC-Payload-Digest")


def test_a_live_shards_open_file_is_exported_to_its_committed_end(tmp_path: Path) -> None:
    """The open file's committed part goes into a directory export, through a file of
    the export's own: a user's file of any name there is left alone."""
    data = tmp_path / "peer"
    shard = Shard.open(data, warc_size=10**9)
    with shard.transaction():
        shard.record_pages([_page(1, b"one" * 100), _page(2, b"two" * 100)])
    (open_file,) = (data / "warc").glob("*.open")
    out = tmp_path / "out"
    out.mkdir()
    name = open_file.name.removesuffix(".open")
    mine = out / (name + ".part")
    mine.write_bytes(b"the user's")
    summary = export([data], "warc", out)
    shard.close()
    assert mine.read_bytes() == b"the user's"
    assert sorted(p.name for p in out.iterdir()) == sorted([name, mine.name])
    assert summary.files == 1
    check = _warcio_check([out / name])
    assert check.returncode == 0, check.stdout
    assert check.stdout.count(" response") == 2


def test_an_export_kept_in_the_peers_warc_directory_is_not_exported_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every *.warc.gz of DATA/warc was taken as the peer's: an export written there
    went into the next export too, which said 188 records for 62 pages and wrote 374,
    every response twice (a review found). Only the peer's own files are taken."""
    data = tmp_path / "peer"
    shard = _filled(data, 3)
    # An export is not written there (``ubipy index`` would read it as the peer's: QA);
    # a user's copy kept beside the files is left out of the next export.
    mine = data / "warc" / "mine.warc.gz"
    assert main(["export", "--data", str(data), "--format", "warc", "--out", str(mine)]) == 2
    assert "is a peer's own" in capsys.readouterr().err and not mine.exists()
    assert (
        main(
            [
                "export",
                "--data",
                str(data),
                "--format",
                "warc",
                "--out",
                str(tmp_path / "x.warc.gz"),
            ]
        )
        == 0
    )
    shutil.copyfile(tmp_path / "x.warc.gz", mine)
    again = tmp_path / "again.warc.gz"
    assert main(["export", "--data", str(data), "--format", "warc", "--out", str(again)]) == 0
    shard.close()
    said = capsys.readouterr().err.splitlines()[1]
    with gzip.open(again) as f:
        heads = [
            (r.rec_type, r.rec_headers.get_header("WARC-Target-URI")) for r in ArchiveIterator(f)
        ]
    responses = [uri for kind, uri in heads if kind == "response"]
    assert sorted(responses) == [f"http://a.test/{fp}" for fp in range(1, 7)]
    assert said.startswith(f"ubipy export: wrote {len(heads)} WARC records for 6 pages "), said


def test_the_copy_of_the_open_file_takes_its_mode_from_the_umask(tmp_path: Path) -> None:
    """It was made by NamedTemporaryFile, 0600: a directory export's copy of the file
    being written was unreadable by the group and others that read every other file
    there (a review found). A new file's mode comes from the umask, as a file export's."""
    data, out = tmp_path / "peer", tmp_path / "out"
    out.mkdir()
    shard = Shard.open(data, warc_size=10**9)
    with shard.transaction():
        shard.record_pages([_page(1, b"one" * 100)])
    (open_file,) = (data / "warc").glob("*.open")
    old = os.umask(0o002)
    try:
        assert export([data], "warc", out).files == 1
    finally:
        os.umask(old)
    shard.close()
    copy = out / open_file.name.removesuffix(".open")
    assert stat.S_IMODE(copy.stat().st_mode) == 0o664


@settings(max_examples=2000, deadline=None)
@given(
    st.one_of(
        st.floats(min_value=-1e9, max_value=4e9, allow_nan=False),
        # Half a microsecond from a whole one, and a hair below a whole second.
        st.integers(0, 4 * 10**15).map(lambda us: us / 1e6 + 0.5e-6),
        st.integers(0, 4 * 10**9).map(lambda s: s + 0.9999996),
    )
)
def test_warc_dates_are_datetimes_to_the_microsecond_rounded_alike(t: float) -> None:
    # WARC-Date is made once a second and patched; the CDXJ's timestamp, and a reader,
    # take it for datetime's own rounding of the same instant.
    expected = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert iso_utc(t) == iso_utc(t) == expected


def test_every_record_names_the_warcinfo_of_its_own_file(tmp_path: Path) -> None:
    # The first capture of a file named none (the first file) or the last file's
    # warcinfo (after a rotation): its records were made before the file was begun
    # (a review found). warcio check does not look at this field; WARC 1.1 does.
    shard = Shard.open(tmp_path, warc_size=2_000)
    for fp in range(1, 13, 2):
        with shard.transaction():
            shard.record_pages([_page(f, b"<p>x</p>" * 300) for f in (fp, fp + 1)])
    shard.close()
    files = _files(tmp_path)
    assert len(files) > 1
    named: dict[str, list[bool]] = {}
    for path in files:
        with path.open("rb") as f:
            info = None
            for record in ArchiveIterator(f):
                if record.rec_type == "warcinfo":
                    info = record.rec_headers.get_header("WARC-Record-ID")
                else:  # every other record, responses too (QA: they named none)
                    ref = record.rec_headers.get_header("WARC-Warcinfo-ID")
                    named.setdefault(record.rec_type, []).append(ref == info)
    assert {kind: all(said) for kind, said in named.items()} == {
        "request": True,
        "response": True,
        "metadata": True,
    }


@pytest.mark.parametrize("fmt", ["warc", "jsonl"])
def test_an_export_missing_a_warc_file_its_shard_names_is_refused_if_it_needs_it(
    tmp_path: Path, fmt: Literal["warc", "jsonl"]
) -> None:
    # A file moved away (archived, a clean-up script): its pages were left out of a
    # WARC without a word, and the summary counted them all the same (a review found).
    # JSON Lines holds no body: it was refused all the same (QA).
    data = tmp_path / "peer"
    shard = _filled(data, 3)
    pages = shard.counts().pages
    shard.close()
    first = _files(data)[0]
    first.unlink()
    out = tmp_path / f"out.{fmt}"
    if fmt == "jsonl":
        assert export([data], fmt, out).pages == pages
        assert len(out.read_text().splitlines()) == pages
        return
    with pytest.raises(ExportError, match=f"missing \\({first.name}\\)"):
        export([data], fmt, out)
    assert not out.exists()


def test_a_full_disk_in_a_directory_export_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The README: an output that fails part-way is one line and exit status 1. Copied
    # to another file system into a full disk, a directory export exited 2, as for a
    # bad command (a review found). Nothing is left behind.
    data = tmp_path / "peer"
    shard = _filled(data, 2)
    shard.close()
    out = tmp_path / "out"
    out.mkdir()

    def cross_device(src: object, dst: object) -> None:
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    def full(src: object, dst: object, length: int = 0) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "link", cross_device)
    monkeypatch.setattr(shutil, "copyfileobj", full)
    code = main(["export", "--data", str(data), "--format", "warc", "--out", str(out)])
    err = capsys.readouterr().err
    assert (code, err.count("\n")) == (1, 1) and "No space left" in err
    assert list(out.iterdir()) == []


def test_a_capture_forgotten_by_recovery_leaves_none_of_its_records(tmp_path: Path) -> None:
    # An OS crash left the open file shorter than committed, torn inside the last
    # capture's metadata. Cut to its last whole record, the file kept that capture's
    # request and response while its page went back to the frontier: fetched again,
    # the page had two responses in the files (a review found).
    data = tmp_path / "peer"
    shard = Shard.open(data, warc_size=10**9)
    with shard.transaction():
        shard.record_pages([_page(1, b"<p>one</p>" * 50), _page(2, b"<p>two</p>" * 50)])
    shard._conn.close()  # killed: the file stays open
    (open_file,) = (data / "warc").glob("*.open")
    members = [(offset, record.type) for record, offset, _ in RecordReader().feed(
        open_file.read_bytes()
    )]  # fmt: skip
    assert members[-1][1] == "metadata"
    os.truncate(open_file, members[-1][0] + 10)  # torn inside page 2's metadata
    shard = Shard.open(data, warc_size=10**9)
    kept = {fp for (fp,) in shard._conn.execute("SELECT fp FROM warc")}
    shard.close()
    assert kept == {1}  # page 2 forgotten, to be fetched again
    records = []
    for path in _files(data):
        with path.open("rb") as f:
            records += [r.rec_type for r in ArchiveIterator(f)]
    assert records == ["warcinfo", "request", "response", "metadata"]


async def test_failed_refreshes_of_a_warc_crawl_leave_nothing_beside_its_files(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A page that answers 503 one minute in three: its failed visits are in no WARC
    # file, and read as captures outside them, the export wrote a file of nothing
    # beside the peer's and reported them as visits left out (found by a review).
    def answer(request: httpx2.Request) -> httpx2.Response:
        if request.url.path != "/":
            return httpx2.Response(404)
        if int(trio.current_time() // 60) % 3 == 2:
            return httpx2.Response(503, headers={"Retry-After": "1"})
        body = b"<html><title>same</title></html>"
        return httpx2.Response(200, headers={"Content-Type": "text/html"}, content=body)

    config = _recrawling(tmp_path / "peer")
    shard = Shard.open(config.data_dir, warc_size=10**9)
    transport = httpx2.MockTransport(answer)
    await recrawl_for(config, shard, transport, ["http://a.test/"], 1200)
    shard.close()
    with sqlite3.connect(config.data_dir / SHARD_FILE) as conn:
        (failed,) = conn.execute("SELECT COUNT(*) FROM visits WHERE status = 503").fetchone()
        (captures,) = conn.execute("SELECT COUNT(*) FROM warc WHERE kind != 3").fetchone()
        (pages,) = conn.execute("SELECT COUNT(*) FROM pages").fetchone()
    assert failed > 0
    out = tmp_path / "out"
    out.mkdir()
    summary = export([config.data_dir], "warc", out)
    assert summary.files > 0 and not (out / "ubipy-export.warc.gz").exists()
    assert (summary.visits, summary.visits_left_out) == (captures - pages, 0)


def test_a_warc_file_takes_its_final_name_once_the_shard_is_synced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A closed file is never cut back. Named while the shard's last commit was in its
    # unsynced WAL (synchronous=NORMAL), a power cut lost the commit, kept the file
    # whole, and its pages, pending again, were fetched and archived twice (a review).
    seen: list[tuple[int, int]] = []
    real = Shard.sync

    def sync(shard: Shard) -> None:
        names = [p.name for p in (tmp_path / "warc").iterdir() if ".cdxj" not in p.name]
        seen.append(
            (sum(n.endswith(".open") for n in names), sum(n.endswith(".gz") for n in names))
        )
        real(shard)

    monkeypatch.setattr(Shard, "sync", sync)
    shard = _filled(tmp_path, 2)
    shard.close()
    # At each of the two rotations: the file still open, none or one closed before it.
    assert seen[:2] == [(1, 0), (1, 1)]
    assert len(list((tmp_path / "warc").glob("*.warc.gz"))) == 2


def test_a_sync_puts_the_open_warc_files_records_on_disk_before_the_wal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A host handed off takes its pages done to its new owner once this shard is
    # synced: the WAL alone synced, a machine's crash then lost their records from the
    # open file, and the new owner never fetches them again (a review's suspicion).
    shard = Shard.open(tmp_path, warc_size=1 << 20)
    with shard.transaction():
        shard.record_pages([_page(1, b"<p>one</p>")])
    real = os.fsync
    synced = record_fsyncs(monkeypatch)
    shard.sync()
    (open_file,) = (tmp_path / "warc").glob("*.open")
    assert synced[0] == open_file.name and synced[-1] == SHARD_FILE + "-wal"
    # The new file's name too (and the warc directory's own, made with it): its
    # records synced under a name an OS crash lost were lost with it.
    assert synced[1:3] == [tmp_path.name, "warc"]
    synced.clear()
    with shard.transaction():
        shard.record_pages([_page(2, b"<p>two</p>")])
    shard.sync()
    assert "warc" not in synced and synced[0] == open_file.name  # named once a file

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(StorageError, match=f"{open_file.name}: cannot sync"):
        shard.sync()
    monkeypatch.setattr(os, "fsync", real)
    shard.close()


def test_a_file_whose_close_failed_is_synced_by_the_next_sync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its close failed at rotation (the WAL could not be synced): the file stays open
    # on disk, its captures counted by the shard. A later sync, which tells another
    # peer those pages are done (a hand-off), synced only the new file (a review).
    def refused(path: Path, *, directory: bool) -> bool:
        raise StorageError("no space left")

    monkeypatch.setattr(shard_module, "sync_wal", refused)
    shard = _filled(tmp_path, 1)  # the first file's close, at rotation, fails
    monkeypatch.setattr(shard_module, "sync_wal", walsync.sync_wal)
    with shard.transaction():
        shard.record_pages([_page(9, b"<p>x</p>" * 300)])
    left, _ = sorted((tmp_path / "warc").glob("*.open"))  # the failed one, the new one
    synced = record_fsyncs(monkeypatch)
    shard.sync()
    assert left.name in synced
    synced.clear()
    shard.sync()
    assert left.name not in synced  # once is enough
    shard.close()


def test_a_warc_file_open_a_day_is_closed_at_the_next_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A slow crawl (revisits: small records) kept one file of 1 GB open for weeks, and
    # replay tools see a file's pages once it is closed and indexed (a review).
    clock = [1_000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    shard = Shard.open(tmp_path, warc_size=1 << 30, warc_max_age=86_400.0)
    for fp, hours in ((1, 0), (2, 23), (3, 24), (4, 25)):
        clock[0] = 1_000.0 + hours * 3_600.0
        with shard.transaction():
            shard.record_pages([_page(fp, b"<p>%d</p>" % fp)])
    # Opened at hour 0 and closed at the commit of hour 24 (its pages 1-3); the next,
    # opened at hour 25, is the open one.
    closed = sorted((tmp_path / "warc").glob("*.warc.gz"))
    assert len(closed) == 1 and len(list((tmp_path / "warc").glob("*.open"))) == 1
    assert [c[0] for c in _captures(tmp_path) if c[3] == closed[0].name] == [1, 2, 3]
    shard.close()


@pytest.mark.parametrize(
    "refusal",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        ExportWriteError("x.warc.gz.cdxj: cannot write: No space left on device"),
    ],
)
def test_an_index_the_disk_refuses_is_one_line_of_log(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    refusal: Exception,
) -> None:
    """A peer stopped with its disk full logged a traceback of 25 lines (QA)."""

    def refuse(path: Path) -> Path:
        raise refusal

    monkeypatch.setattr(warcstore, "index_warc", refuse)
    warcstore.index_closed(tmp_path / "x.warc.gz")
    [record] = [r for r in caplog.records if r.name == warcstore.log.name]
    assert record.levelname == "ERROR" and record.exc_info is None
    assert record.getMessage().endswith("; indexed again at the next start")
