"""A host's rows are read and dropped (a hand-off, a replica's copy) without a scan of
the whole frontier: the work is the host's, not the shard's."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TypeVar

from tests.store.old_shards import downgrade
from ubipy.store.revisits import RefreshRow
from ubipy.store.shard import SCHEMA_VERSION, SHARD_FILE, HostMark, NewURL, PageRecord, Shard

T = TypeVar("T")


def _url(i: int, host: str) -> NewURL:
    return NewURL(fp=10_000 + i, url=f"http://{host}/{i}", host=host, depth=1, score=i / 10)


def _page(row: NewURL) -> PageRecord:
    return PageRecord(
        fp=row.fp,
        url=row.url,
        host=row.host,
        status=200,
        content_type="text/html",
        length=0,
        truncated=False,
        title=None,
        fetched_at=1.0,
        last_modified=None,
        etag=None,
        digest=None,
        depth=row.depth,
        error=None,
        body=None,
    )


def _refresh(row: NewURL) -> RefreshRow:
    return RefreshRow(
        row.fp, row.url, row.host, row.depth, 1, 0, 0.0, 1.0, 2.0, 0.0, None, None, None
    )


def _steps(shard: Shard, call: Callable[[], T]) -> tuple[T, int]:
    """What ``call`` returns, and how many SQLite VM instructions it took."""
    steps = 0

    def count() -> int:
        nonlocal steps
        steps += 1
        return 0

    shard._conn.set_progress_handler(count, 1)
    try:
        return call(), steps
    finally:
        shard._conn.set_progress_handler(None, 1)


def _shard(tmp_path: Path, others: int) -> Shard:
    """a.test with pending, done, skipped and 'fetched elsewhere' rows among ``others``
    rows of other hosts (most of them done), and a host with only a politeness mark."""
    shard = Shard.open(tmp_path)
    urls = [_url(i, f"h{i % 50}.test") for i in range(others)]
    mine = [_url(others + i, "a.test") for i in range(8)]
    # a.test's rows interleaved with the others', as admission leaves them.
    step = max(1, others // len(mine))
    for k, row in enumerate(mine):
        shard.add_to_frontier([*urls[k * step : (k + 1) * step], row])
    shard.add_to_frontier(urls[len(mine) * step :])
    fetched = [u for u in urls if u.fp % 10 != 0]
    shard.record_pages([_page(u) for u in fetched])
    shard.record_pages([_page(mine[1]), _page(mine[4])])
    # Under --recrawl each page fetched has its revisit row.
    shard.save_refresh([_refresh(u) for u in [*fetched, mine[1], mine[4]]], [])
    shard.mark_skipped([(mine[2].fp, "too deep")])
    shard.take_done("a.test", [mine[6].fp, 99_001])
    shard.save_host_marks({"a.test": HostMark(1.0, 2.0, 3), "m.test": HostMark(1.0, 2.0, 0)})
    return shard


def _brute_state(shard: Shard, host: str) -> tuple[list[NewURL], list[int]]:
    """host_state as it was: every row of the frontier looked at."""
    rows = shard._conn.execute(
        "SELECT fp, url, depth, state, score FROM frontier WHERE +host = ? ORDER BY seq",
        (host,),
    ).fetchall()
    pending = [
        NewURL(fp, url, host, depth, score) for fp, url, depth, state, score in rows if not state
    ]
    return pending, [fp for fp, _, _, state, _ in rows if state]


def test_a_hosts_state_is_read_in_admission_order(tmp_path: Path) -> None:
    shard = _shard(tmp_path, 200)
    pending, done, mark = shard.host_state("a.test")
    assert (pending, done) == _brute_state(shard, "a.test")
    assert [u.url for u in pending] == [f"http://a.test/{200 + i}" for i in (0, 3, 5, 7)]
    assert done == [10_201, 10_202, 10_204, 10_206, 99_001]
    assert mark == HostMark(1.0, 2.0, 3)
    assert shard.host_state("h3.test")[:2] == _brute_state(shard, "h3.test")
    # Under a ranked order (its own index of pending rows) the answer is the same.
    shard.rank_pending()
    assert shard.host_state("a.test") == (pending, done, mark)
    shard.close()


def test_held_hosts_are_those_with_rows_or_a_mark(tmp_path: Path) -> None:
    shard = _shard(tmp_path, 200)
    expected = {f"h{i}.test" for i in range(50)} | {"a.test", "m.test"}
    assert sorted(shard.held_hosts()) == sorted(expected)
    # A host with only done rows, one with only pending ones; rows of no host are none.
    shard.drop_host("h7.test")
    shard.take_done("d.test", [99_100])
    shard.add_to_frontier([_url(500, "p.test")])
    shard._conn.execute(
        "INSERT INTO frontier (seq, fp, url, host, depth, state) VALUES (9999, 1, '', '', 0, 1)"
    )
    expected = (expected - {"h7.test"}) | {"d.test", "p.test"}
    assert sorted(shard.held_hosts()) == sorted(expected)
    shard.close()


def test_dropping_a_host_forgets_every_row_of_it_and_no_other(tmp_path: Path) -> None:
    shard = _shard(tmp_path, 200)
    before = shard.counts().seen
    revisited = {row.host for row in shard.refresh_rows()}
    pending, done = _brute_state(shard, "a.test")
    fps = shard.drop_host("a.test")
    assert sorted(fps) == sorted([u.fp for u in pending] + done)
    assert len(fps) == 9
    assert shard.host_state("a.test") == ([], [], None)
    assert _brute_state(shard, "a.test") == ([], [])
    assert shard.counts().seen == before - 9
    assert "a.test" not in shard.held_hosts()
    # Its revisit rows go with it, the others' stay.
    assert {row.host for row in shard.refresh_rows()} == revisited - {"a.test"}
    shard.close()


def test_a_hosts_rows_cost_the_same_in_a_frontier_twenty_times_bigger(tmp_path: Path) -> None:
    # Before schema 10 each of these scanned the whole frontier (and drop_host the
    # revisit rows, one a page fetched under --recrawl): 20 times the rows, 20 times the
    # work (SQLite instructions at 1,000 rows and 20,000: host_state 3,113 and
    # 60,113, held_hosts 6,230 and 120,230, drop_host 6,193 and 120,193). Now it is the
    # host's rows, a seek each (205, 2,121 for 52 hosts, 309 at either size).
    costs = []
    for others in (1_000, 20_000):
        shard = _shard(tmp_path / str(others), others)
        state, read = _steps(shard, partial(shard.host_state, "a.test"))
        hosts, listed = _steps(shard, shard.held_hosts)
        fps, dropped = _steps(shard, partial(shard.drop_host, "a.test"))
        assert len(state[1]) == 5 and len(hosts) == 52 and len(fps) == 9
        costs.append((read, listed, dropped))
        shard.close()
    (small_read, small_listed, small_dropped), (big_read, big_listed, big_dropped) = costs
    assert big_read < 2 * small_read and big_read < 1_000
    # The hosts' list is a seek a host (52 here), not a look at each row.
    assert big_listed < 2 * small_listed and big_listed < 10_000
    assert big_dropped < 2 * small_dropped and big_dropped < 2_000


def test_a_version_9_shard_gets_its_done_rows_indexed(tmp_path: Path) -> None:
    shard = _shard(tmp_path, 100)
    expected = shard.host_state("a.test"), sorted(shard.held_hosts())
    shard.close()
    downgrade(tmp_path, 9)
    conn = sqlite3.connect(tmp_path / SHARD_FILE)
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "frontier_done" not in indexes
    conn.close()

    shard = Shard.open(tmp_path)
    assert (shard.host_state("a.test"), sorted(shard.held_hosts())) == expected
    _, read = _steps(shard, partial(shard.host_state, "a.test"))
    assert read < 1_000
    shard.close()
    conn = sqlite3.connect(tmp_path / SHARD_FILE)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    [(sql,)] = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'frontier_done'")
    assert "WHERE state != 0" in sql
    conn.close()


def test_a_pending_urls_tries_are_kept_and_a_settled_ones_go(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    rows = shard.add_to_frontier(
        [NewURL(fp, f"http://a.test/{fp}", "a.test", 1) for fp in (1, 2, 3)]
    )
    assert len(rows) == 3
    shard.save_tries({1: (1, 0), 2: (2, 1), 3: (1, 0)})
    shard.mark_skipped([(3, "robots")])  # settled: its tries are no longer owed
    shard.close()
    shard = Shard.open(tmp_path)
    assert shard.tries() == {1: (1, 0), 2: (2, 1)}
    shard.save_tries({1: (2, 0)})  # failed again
    assert shard.tries() == {1: (2, 0), 2: (2, 1)}
    shard.forget_tries([2])  # answered at last
    # Read only: a peer starts on a full disk.
    shard._conn.execute("PRAGMA query_only = ON")
    assert shard.tries() == {1: (2, 0)}
    shard._conn.execute("PRAGMA query_only = OFF")
    shard.close()
