"""Refresher.adopt: the pages of a host handed over by its previous owner, with their
histories, are kept, saved in the shard (a restart keeps them) and scheduled; read on
this peer's clock, which may be behind the sender's by as much as frames are allowed;
and a page known here already keeps the newer history."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from ubipy.config import CrawlConfig, RecrawlConfig
from ubipy.fetch import Entry, UrlFilter
from ubipy.peer.refreshing import Refresher
from ubipy.store import RefreshRow, Shard
from ubipy.wire import DEFAULT_MAX_SKEW

NOW = 1_767_225_600.0
SKEW = DEFAULT_MAX_SKEW
LONGEST = 7 * 86_400.0


class _Scheduler:
    """Records the refreshes each host was handed (a plan's, or one page's), and when (on
    trio's clock)."""

    def __init__(self) -> None:
        self.due: dict[str, dict[str, float]] = {}

    def refreshes(self, host: str, due: list[tuple[float, Entry]]) -> None:
        self.due[host] = {e.url: at for at, e in due}

    def due_again(self, host: str, at: float, entry: Entry) -> None:
        self.due.setdefault(host, {})[entry.url] = at

    def slot(self, host: str) -> None:
        return None


def _row(
    fp: int,
    *,
    visits: int = 3,
    last: float = NOW - 600,
    due: float = NOW + 600,
    host: str = "a.test",
) -> RefreshRow:
    return RefreshRow(
        fp, f"http://{host}/p{fp}", host, 1, visits, 1, 1800.0, last, due, 0.5,
        f'"e{fp}"', None, f"d{fp}", 2, 1,
    )  # fmt: skip


def _refresher(
    tmp_path: Path, scheduler: _Scheduler, filters: UrlFilter | None = None
) -> tuple[Refresher, Shard]:
    shard = Shard.open(tmp_path)
    config = CrawlConfig(
        data_dir=tmp_path, recrawl=RecrawlConfig(recrawl=True, max_interval=LONGEST)
    )
    refresher = Refresher(config, shard, lambda: scheduler, filters or UrlFilter())  # type: ignore[arg-type,return-value]
    return refresher, shard


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "time", lambda: NOW)


async def test_adopted_pages_are_kept_saved_and_scheduled(tmp_path: Path, clock: None) -> None:
    scheduler = _Scheduler()
    refresher, shard = _refresher(tmp_path, scheduler)
    rows = [_row(1), _row(2), _row(3, host="b.test")]
    assert refresher.adopt(rows) == 3
    assert {h: sorted(urls) for h, urls in scheduler.due.items()} == {
        "a.test": ["http://a.test/p1", "http://a.test/p2"],
        "b.test": ["http://b.test/p3"],
    }
    assert sorted(r.fp for r in refresher.revisits_of("a.test")) == [1, 2]
    assert (
        refresher.hints.hosts["a.test"].checks == 4 and refresher.hints.hosts["a.test"].agreed == 2
    )
    # In the shard: a restart keeps them, as adopted.
    assert sorted(shard.refresh_rows(), key=lambda r: r.fp) == sorted(
        [*refresher.revisits_of("a.test"), *refresher.revisits_of("b.test")], key=lambda r: r.fp
    )
    again = _Scheduler()
    restarted, _ = _refresher(tmp_path, again)
    restarted.load()
    assert {h: sorted(urls) for h, urls in again.due.items()} == {
        h: sorted(urls) for h, urls in scheduler.due.items()
    }
    # Handed away again, a host's pages go, and what its lastmods earned with them.
    refresher.forget_host("a.test")
    assert refresher.revisits_of("a.test") == [] and "a.test" not in refresher.hints.hosts
    shard.close()


@pytest.mark.parametrize(
    ("last", "due", "expected_last", "expected_due"),
    [
        # Visited long ago, overdue there: due now.
        (NOW - 1000, NOW - 500, NOW - 1000, NOW),
        # Visited long ago, due in 30 s on the sender's clock, which may be ahead of
        # this one by a skew: in 30 s and a skew.
        (NOW - 1000, NOW + 30, NOW - 1000, NOW + 30 + SKEW),
        # Visited 10 s ago, due in 100 s: within a skew, so its whole wait from now.
        (NOW - 10, NOW + 100, NOW - 10, NOW + 110),
        # Visited "in the future" (the sender's clock ahead): now, its wait from now.
        (NOW + 45, NOW + 645, NOW, NOW + 600),
        # Due before its last visit (a bogus row): due now, as if it had no wait.
        (NOW - 1000, NOW - 2000, NOW - 1000, NOW),
        # Due past the longest interval: at the longest interval.
        (NOW - 1000, NOW + 10 * LONGEST, NOW - 1000, NOW + LONGEST),
    ],
)
async def test_times_are_read_on_this_clock(
    tmp_path: Path, clock: None, last: float, due: float, expected_last: float, expected_due: float
) -> None:
    scheduler = _Scheduler()
    refresher, shard = _refresher(tmp_path, scheduler)
    refresher.adopt([_row(1, last=last, due=due)])
    (row,) = refresher.revisits_of("a.test")
    assert row.last_visit == expected_last
    assert row.due == pytest.approx(expected_due)
    assert shard.refresh_rows() == [row]
    # A plan holds the page to it, whatever its interval here.
    refresher.plan()
    (planned,) = refresher.revisits_of("a.test")
    assert planned.due >= row.due - 1e-6
    shard.close()


@pytest.mark.parametrize(
    ("mine", "given", "kept"),
    [
        ((5, NOW - 100), (3, NOW - 50), "mine"),  # more visits
        ((3, NOW - 100), (5, NOW - 200), "given"),
        ((4, NOW - 100), (4, NOW - 50), "given"),  # as many, a later last visit
        ((4, NOW - 50), (4, NOW - 100), "mine"),
        ((4, NOW - 50), (4, NOW - 50), "given"),  # the same: written again
    ],
)
async def test_a_page_known_here_keeps_the_newer_history(
    tmp_path: Path,
    clock: None,
    mine: tuple[int, float],
    given: tuple[int, float],
    kept: str,
) -> None:
    scheduler = _Scheduler()
    refresher, shard = _refresher(tmp_path, scheduler)
    here = _row(1, visits=mine[0], last=mine[1], due=mine[1] + 900)
    there = _row(1, visits=given[0], last=given[1], due=given[1] + 900)
    there = replace(there, etag='"there"', digest="d-there", lastmod_checks=5, lastmod_agreed=5)
    refresher.adopt([here])
    before = refresher.revisits_of("a.test")
    assert refresher.adopt([there]) == (kept == "given")
    (row,) = refresher.revisits_of("a.test")
    if kept == "mine":
        # Its own history, due no sooner than the one given would be.
        (was,) = before
        assert replace(row, due=was.due) == was and shard.refresh_rows() == [row]
        assert row.due >= was.due
    else:
        assert (row.visits, row.last_visit, row.etag, row.digest) == (
            given[0],
            given[1],
            '"there"',
            "d-there",
        )
        assert shard.refresh_rows() == [row]
        trust = refresher.hints.hosts["a.test"]
        assert (trust.checks, trust.agreed) == (5, 5)  # the page's own, not added to
    shard.close()


async def test_a_page_this_runs_filters_drop_is_saved_not_kept(tmp_path: Path, clock: None) -> None:
    scheduler = _Scheduler()
    refresher, shard = _refresher(tmp_path, scheduler, UrlFilter(exclude=[r"/p2$"]))
    assert refresher.adopt([_row(1), _row(2)]) == 1
    assert [r.fp for r in refresher.revisits_of("a.test")] == [1]
    assert sorted(r.fp for r in shard.refresh_rows()) == [1, 2]
    shard.close()


async def test_a_history_kept_here_is_due_no_sooner_than_the_one_given(
    tmp_path: Path, clock: None
) -> None:
    """A peer back from a kill -9 keeps the history of more visits, its own, overdue
    since the kill; the peer that had its host meanwhile asked the page 10 s ago. It
    was asked here again at once: 150 pages seconds after the others had (QA)."""
    scheduler = _Scheduler()
    refresher, shard = _refresher(tmp_path, scheduler)
    refresher.adopt([_row(1, visits=5, last=NOW - 1000, due=NOW - 100)])
    assert refresher.adopt([_row(1, visits=3, last=NOW - 10, due=NOW + 890)]) == 0
    (row,) = refresher.revisits_of("a.test")
    assert (row.visits, row.last_visit) == (5, NOW - 1000)  # its own history
    assert row.due >= NOW + 890 - 1e-6 and shard.refresh_rows() == [row]
    refresher.plan()  # and a plan holds it there
    (planned,) = refresher.revisits_of("a.test")
    assert planned.due >= NOW + 890 - 1e-6
    shard.close()
