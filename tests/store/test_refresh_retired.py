"""A page a continuous crawl retires (gone, moved for good, missing in a row): its
revisit row is deleted in the transaction that writes its last visit, or not at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from ubipy.errors import StorageError
from ubipy.peer.commits import Commits, Retired
from ubipy.store import RefreshRow, Shard, Visit


def _row(fp: int, due: float = 100.0) -> RefreshRow:
    return RefreshRow(
        fp, f"http://a.test/p{fp}", "a.test", 1, 2, 0, 60.0, 10.0, due, 0.0, None, None, "d"
    )


def _rows(shard: Shard) -> dict[int, float]:
    return {r.fp: r.due for r in shard.refresh_rows()}


def test_retired_rows_are_deleted_with_the_visits_or_not_at_all(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    shard.save_refresh([_row(1), _row(2), _row(3)], [])
    gone = Visit(2, 50.0, 410, False, "d", url="http://a.test/p2")
    with pytest.raises(RuntimeError), shard.transaction():
        shard.save_refresh([_row(1, 200.0)], [gone], retired=[2])
        raise RuntimeError("the commit failed")
    assert _rows(shard) == {1: 100.0, 2: 100.0, 3: 100.0}
    # A row of a page retired in the same call is not written.
    shard.save_refresh([_row(1, 200.0), _row(2, 300.0)], [gone], retired=[2])
    assert _rows(shard) == {1: 200.0, 3: 100.0}
    [visit] = shard._conn.execute("SELECT fp, status FROM visits").fetchall()
    assert tuple(visit) == (2, 410)
    shard.close()


def test_a_refused_commit_keeps_its_retired_pages_for_the_next(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    shard.save_refresh([_row(1), _row(2), _row(3)], [])
    commits = Commits()
    commits.refreshed(_row(1, 200.0), None)
    commits.refreshed(_row(2, 200.0), None)
    commits.refreshed(Retired(2), Visit(2, 50.0, 410, False, "d", url="http://a.test/p2"))
    commits.refreshed(Retired(3), None)
    batch = commits.take()
    assert batch is not None and batch.retired == (2, 3)
    shard._conn.execute("PRAGMA query_only = ON")  # as a read-only file would
    with pytest.raises(StorageError):
        batch.write(shard, lambda urls: ([], []))
    shard._conn.execute("PRAGMA query_only = OFF")
    commits.failed()
    assert _rows(shard) == {1: 100.0, 2: 100.0, 3: 100.0}
    # Meanwhile page 3 was kept again (a row of it since): it stays.
    commits.refreshed(_row(3, 300.0), None)
    batch = commits.take()
    assert batch is not None and batch.retired == (2,)
    batch.write(shard, lambda urls: ([], []))
    commits.committed()
    assert _rows(shard) == {1: 200.0, 3: 300.0}
    assert not commits
    shard.close()


def test_a_retired_page_is_not_taken_for_one_never_revisited(tmp_path: Path) -> None:
    """A restart with --recrawl makes due the pages fetched with no revisit row
    (Refresher._adopt_unrefreshed): a retired one has its visits, and stays retired; one
    of a host handed to another peer is that peer's to refresh."""
    shard = Shard.open(tmp_path)
    insert = (
        "INSERT INTO pages (fp, url, host, status, length, fetched_at, digest, depth, error) "
        "VALUES (?, ?, 'a.test', ?, 10, ?, ?, 1, ?)"
    )
    with shard.transaction():
        for fp, status, digest, error in (
            (1, 200, "d1", None),  # never revisited: taken
            (2, 200, "d2", None),  # retired: a 410 visit, no revisit row
            (3, 200, "d3", None),  # refreshed: has its revisit row
            (4, 404, "d4", None),
            (5, 200, None, None),  # no body kept
            (6, 200, "d6", "type not accepted: image/png"),
            (7, 200, "d7", None),  # its host handed to another peer: no frontier row
        ):
            url = f"http://a.test/p{fp}"
            shard._conn.execute(insert, (fp, url, status, 5.0 - fp, digest, error))
            if fp != 7:
                shard._conn.execute(
                    "INSERT INTO frontier (fp, url, host, depth, state) "
                    "VALUES (?, ?, 'a.test', 1, 1)",
                    (fp, url),
                )
    shard.save_refresh([_row(3)], [Visit(2, 50.0, 410, False, "d2", url="http://a.test/p2")])
    assert [r[0] for r in shard.never_revisited()] == [1]
    shard.close()
