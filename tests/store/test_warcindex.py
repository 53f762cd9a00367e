"""The CDXJ beside a closed WARC file: every capture where its record lies, in the order
and form pywb's own indexer writes, and pywb replaying pages from the directory."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from tests.store.warcs import (
    UNICODE_ASKED,
    UNICODE_URL,
    Page,
    crawl_pages,
    pywb_cdxj,
    pywb_replay,
    record_at,
    records,
    warc_name,
    write_warc,
)
from ubipy.errors import ExportError
from ubipy.store import index_warc
from ubipy.store import warcindex as warcindex_module
from ubipy.store.warcindex import write_cdxj
from ubipy.store.warcscan import ScanCounts, scan


@pytest.fixture
def warc(tmp_path: Path) -> tuple[Path, list[Page]]:
    directory = tmp_path / "data" / "warc"
    directory.mkdir(parents=True)
    pages = crawl_pages(24)
    path = directory / warc_name(1)
    write_warc(path, pages)
    return path, pages


def _lines(index: Path) -> list[tuple[str, str, dict[str, Any]]]:
    found = []
    for line in index.read_text(encoding="ascii").splitlines():
        key, timestamp, fields = line.split(" ", 2)
        found.append((key, timestamp, json.loads(fields)))
    return found


def test_each_capture_is_listed_where_its_record_lies(warc: tuple[Path, list[Page]]) -> None:
    path, pages = warc
    index = index_warc(path)
    assert index == path.with_name(path.name + ".cdxj")
    raw = index.read_bytes().splitlines()
    assert raw == sorted(raw)  # as bytes: pywb's binary search reads them so
    # Responses and revisits are captures; the warcinfo, requests and metadata are not.
    captures = [(o, n) for kind, _, o, n in records(path) if kind in ("response", "revisit")]
    lines = _lines(index)
    assert sorted((int(f["offset"]), int(f["length"])) for _, _, f in lines) == sorted(captures)
    by_url = {p.url: p for p in pages}
    for key, timestamp, fields in lines:
        assert fields["filename"] == path.name
        record = record_at(path, int(fields["offset"]))
        assert record.rec_headers.get_header("WARC-Target-URI") == fields["url"]
        page = by_url[fields["url"]]
        if record.rec_type == "revisit":
            assert fields["mime"] == "warc/revisit"
            assert "status" not in fields  # as pywb: a status is a response's
            assert int(timestamp) > int(page.timestamp)
        else:
            assert record.payload == page.body
            assert (fields["mime"], fields["status"]) == ("text/html", str(page.status))
            assert timestamp == page.timestamp
            digest = record.rec_headers.get_header("WARC-Payload-Digest")
            assert digest == f"sha1:{fields['digest']}"
        if page.url == UNICODE_URL:
            assert key == "example,xn--bcher-kva)/stra%c3%9fe/%c3%bc?q=%c3%a9"
        else:
            assert key.startswith(f"example,{page.host.split('.')[0]})/p/")


def test_the_lines_are_those_of_pywbs_own_indexer(
    warc: tuple[Path, list[Page]], tmp_path: Path
) -> None:
    path, _ = warc
    assert index_warc(path).read_bytes() == pywb_cdxj(path, tmp_path)


def test_pywb_replays_pages_from_the_warc_directory(
    warc: tuple[Path, list[Page]], tmp_path: Path
) -> None:
    path, pages = warc
    index_warc(path)
    unicode_page = pages[0]
    found = next(p for p in pages if p.status == 404)
    plain = next(p for p in pages[1:] if p.status == 200)
    revisited = next(p for p in pages[1:] if p.revisited and p.status == 200)
    later = str(int(revisited.timestamp) + 10000)  # an hour later: the revisit
    asked = [
        f"/coll/{plain.timestamp}id_/{plain.url}",
        f"/coll/{found.timestamp}id_/{found.url}",
        f"/coll/{unicode_page.timestamp}id_/{UNICODE_ASKED}",
        f"/coll/{later}id_/{revisited.url}",
        "/coll/20260102030405id_/http://never.example/",
    ]
    answers = pywb_replay(path.parent, asked, tmp_path)
    assert answers[:3] == [(200, plain.body), (404, found.body), (200, unicode_page.body)]
    assert answers[3][0] == 304  # server-not-modified, replayed as such
    assert answers[4][0] == 404  # not archived


def test_a_torn_tail_and_garbage_are_skipped_and_counted(
    warc: tuple[Path, list[Page]], tmp_path: Path
) -> None:
    path, _ = warc
    whole = path.read_bytes()
    clean = _lines(index_warc(path))
    members = records(path)
    # Garbage (with a false gzip header in it) between two records, a torn record at
    # the end, as a kill -9 mid-write leaves it.
    cut = members[10][2]
    garbage = b"not a record \x1f\x8b\x08 nor this"
    last_offset, last_length = members[-1][2:]
    torn = whole[last_offset : last_offset + last_length // 2]
    path.write_bytes(whole[:cut] + garbage + whole[cut:] + torn)
    done = write_cdxj(path)
    assert (done.skipped, done.skipped_bytes) == (2, len(garbage) + len(torn))
    assert done.records == len(members)
    lines = _lines(done.cdxj)
    assert len(lines) == len(clean)
    for (key, timestamp, fields), (key0, timestamp0, fields0) in zip(
        sorted(lines), sorted(clean), strict=True
    ):
        assert (key, timestamp, fields["url"]) == (key0, timestamp0, fields0["url"])
        shift = len(garbage) if int(fields0["offset"]) >= cut else 0
        assert int(fields["offset"]) == int(fields0["offset"]) + shift
        assert (
            record_at(path, int(fields["offset"])).rec_headers.get_header("WARC-Target-URI")
            == fields["url"]
        )


def test_every_cut_of_a_file_indexes_exactly_its_whole_records(tmp_path: Path) -> None:
    path = tmp_path / warc_name(1)
    write_warc(path, crawl_pages(3))
    data = path.read_bytes()
    full = list(scan(io.BytesIO(data), ScanCounts()))
    ends = [offset + length for _, _, offset, length in records(path)]
    for cut in range(0, len(data) + 1, 7):
        counts = ScanCounts()
        got = list(scan(io.BytesIO(data[:cut]), counts))
        assert got == [c for c in full if c.offset + c.length <= cut], cut
        whole_end = max([end for end in ends if end <= cut], default=0)
        assert counts.records == sum(end <= cut for end in ends)
        assert counts.skipped_bytes == cut - whole_end, cut


def test_a_large_index_is_sorted_in_runs_on_disk(
    warc: tuple[Path, list[Page]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, _ = warc
    in_memory = index_warc(path).read_bytes()
    monkeypatch.setattr(warcindex_module, "_RUN_BYTES", 600)  # a run of 2 or 3 lines
    assert index_warc(path).read_bytes() == in_memory


def test_only_an_index_of_the_same_file_is_replaced(warc: tuple[Path, list[Page]]) -> None:
    path, _ = warc
    index = path.with_name(path.name + ".cdxj")
    other = b'com,x)/ 20260101000000 {"url": "http://x.com/", "filename": "other.warc.gz"}\n'
    for foreign in (b"notes of mine\n", other):
        index.write_bytes(foreign)
        with pytest.raises(ExportError, match="not an index of"):
            index_warc(path)
        assert index.read_bytes() == foreign
    index.write_bytes(b"")  # an index of a file without captures
    assert index_warc(path) == index
    first = index.read_bytes()
    assert index_warc(path) == index  # its own index, replaced
    assert index.read_bytes() == first
    assert [p.name for p in path.parent.iterdir()] == sorted([path.name, index.name])
