"""A page's later visits kept by another shard than its first fetch (under --recrawl, a
host handed to a new owner is visited there): exported with the page, in time order,
JSON Lines and WARC alike; a visit of a page that no exported shard holds is counted
as left out (QA: such visits were lost without a word, and a WARC export wrote a file
of nothing for them)."""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import pytest

from tests.store.test_export_revisits import _first, _of, _read_warc, _warcio
from ubipy.exportwords import export_said
from ubipy.store.export import export, iso_utc
from ubipy.store.revisits import Visit
from ubipy.store.shard import Shard

T0 = 1_700_000_000.5
HOME = "http://news.test/"
OTHER = "http://news.test/other"
V1 = b"<html><title>v1</title><p>first version</p></html>"
V2 = b"<html><title>v2</title><p>the second version</p></html>"


def _two_owners(tmp_path: Path, *, warc_files: bool) -> tuple[Path, Path]:
    """The old owner fetched the page and visited it once; the new owner visited it
    four times (a 304, a change, the same again) and holds a visit of a page that
    neither has."""
    files = {"warc_size": 1 << 30} if warc_files else {}
    old, new = tmp_path / "old", tmp_path / "new"
    shard = Shard.open(old, **files)
    shard.record_pages([_first(1, HOME, T0, V1, digest="d1")])
    shard.save_refresh([], [Visit(1, T0 + 10, 304, False, "d1", url=HOME)])
    shard.close()
    shard = Shard.open(new, **files)
    shard.save_refresh(
        [],
        [
            Visit(1, T0 + 20, 304, False, "d1", url=HOME),
            Visit(1, T0 + 30, 200, True, "d2", "text/html", len(V2), body=V2, url=HOME),
            Visit(1, T0 + 40, 200, False, "d2", url=HOME),
            Visit(7, T0 + 50, 304, False, "dx", url="http://gone.test/"),
        ],
    )
    shard.close()
    return old, new


@pytest.mark.parametrize("warc_files", [True, False])
def test_jsonl_gives_a_page_the_visits_its_new_owner_made(tmp_path: Path, warc_files: bool) -> None:
    old, new = _two_owners(tmp_path, warc_files=warc_files)
    out = tmp_path / "pages.jsonl"
    summary = export([new, old], "jsonl", out)
    [line] = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(v["at"], v["status"], v["changed"]) for v in line["visits"]] == [
        (iso_utc(T0 + 10), 304, False),
        (iso_utc(T0 + 20), 304, False),
        (iso_utc(T0 + 30), 200, True),
        (iso_utc(T0 + 40), 200, False),
    ]
    assert (summary.pages, summary.visits, summary.visits_left_out) == (1, 5, 1)


@pytest.mark.parametrize("warc_files", [True, False])
def test_warc_gives_each_visit_once_referring_to_the_version_it_saw(
    tmp_path: Path, warc_files: bool
) -> None:
    old, new = _two_owners(tmp_path, warc_files=warc_files)
    out = tmp_path / "crawl.warc.gz"
    summary = export([old, new], "warc", out)
    check = _warcio("check", str(out))
    assert check.returncode == 0, check.stdout + check.stderr
    recs = _read_warc(out)
    captures = sorted(_of(recs, HOME, "response", "revisit"), key=lambda r: r.headers["WARC-Date"])
    assert [(c.type, c.headers["WARC-Date"]) for c in captures] == [
        ("response", iso_utc(T0)),
        ("revisit", iso_utc(T0 + 10)),
        ("revisit", iso_utc(T0 + 20)),
        ("response", iso_utc(T0 + 30)),
        ("revisit", iso_utc(T0 + 40)),
    ]
    first, second = captures[0].headers["WARC-Record-ID"], captures[3].headers["WARC-Record-ID"]
    assert [c.headers["WARC-Refers-To"] for c in captures if c.type == "revisit"] == [
        first,
        first,
        second,
    ]
    assert summary.visits_left_out == 1
    # No file of nothing beside the peers' (a warcinfo alone).
    types = [r.type for r in recs]
    assert types[-1] != "warcinfo" and ("warcinfo", "warcinfo") not in itertools.pairwise(types)


def test_no_file_of_nothing_for_visits_of_a_page_no_shard_holds(tmp_path: Path) -> None:
    _, new = _two_owners(tmp_path, warc_files=True)
    (tmp_path / "out").mkdir()
    summary = export([new], "warc", tmp_path / "out")  # a directory: the peer's files
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(
        p.name for p in (new / "warc").glob("*.warc.gz")
    )
    # Its changed visit and the revisit after it are in its files; its 304s, of pages
    # it does not hold, left out.
    assert (summary.visits, summary.visits_left_out) == (4, 2)


def test_jsonl_gives_a_page_fetched_by_two_peers_one_line(tmp_path: Path) -> None:
    """With one replica a dead peer's hosts are crawled again by the others: its data
    directory exported with theirs gave two lines for one URL (QA). The earliest fetch
    is the line, the later ones its visits."""
    dead, alive = tmp_path / "dead", tmp_path / "alive"
    shard = Shard.open(dead)
    shard.record_pages([_first(1, HOME, T0, V1, digest="d1"), _first(2, OTHER, T0 + 1, V1)])
    shard.close()
    shard = Shard.open(alive)
    shard.record_pages(
        [_first(1, HOME, T0 + 100, V1, digest="d1"), _first(2, OTHER, T0 + 101, V2, digest="d2")]
    )
    shard.save_refresh([], [Visit(2, T0 + 200, 304, False, "d2", url=OTHER)])
    shard.close()
    out = tmp_path / "pages.jsonl"
    summary = export([alive, dead], "jsonl", out)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(x["url"], x["fetched_at"]) for x in lines] == [
        (HOME, iso_utc(T0)),
        (OTHER, iso_utc(T0 + 1)),
    ]
    home, other = lines
    assert [(v["at"], v["changed"], v["digest"], v["length"]) for v in home["visits"]] == [
        (iso_utc(T0 + 100), False, "d1", 0)
    ]
    assert [(v["at"], v["status"], v["changed"], v["digest"]) for v in other["visits"]] == [
        (iso_utc(T0 + 101), 200, True, "d2"),
        (iso_utc(T0 + 200), 304, False, "d2"),
    ]
    assert (summary.pages, summary.visits) == (2, 3)


def test_a_redirect_fetched_again_by_another_peer_keeps_its_target(tmp_path: Path) -> None:
    """The later first fetch is a visit of the earlier one's line: a redirect's visit
    says where it went, as its row does (QA: null, where the WARC had the Location)."""
    dead, alive = tmp_path / "dead", tmp_path / "alive"
    moved = "http://news.test/new"
    for data, at in ((dead, T0), (alive, T0 + 100)):
        shard = Shard.open(data)
        page = dataclasses.replace(
            _first(1, HOME, at, b""), status=301, content_type=None, digest=None, location=moved
        )
        shard.record_pages([page])
        shard.close()
    out = tmp_path / "pages.jsonl"
    export([alive, dead], "jsonl", out)
    [line] = [json.loads(x) for x in out.read_text().splitlines()]
    assert (line["status"], line["location"]) == (301, moved)
    assert [(v["status"], v["location"]) for v in line["visits"]] == [(301, moved)]


def test_the_summary_counts_the_visits_written_and_those_left_out(tmp_path: Path) -> None:
    """(QA: "635 later visits ...; 325 later visits left out" of a file with 310.)"""
    old, new = _two_owners(tmp_path, warc_files=False)
    for name in ("pages.jsonl", "crawl.warc.gz"):  # the format by the name
        said = export_said(export([new, old], None, tmp_path / name), "record", name)
        assert "1 page and 4 later visits from 2 shards" in said, said
        assert said.endswith("; 1 later visit left out"), said
