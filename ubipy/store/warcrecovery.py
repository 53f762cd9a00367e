"""A peer's WARC files put right at open, after a crash: the files a crash left open
closed, and the open one cut back to the shard's mark (meta ``warc_end``, see
:mod:`ubipy.store.warcstore`). Captures the file lost (an OS crash: its end was never
on disk) are forgotten, and their pages go back to the frontier."""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

from ubipy.errors import ShardError
from ubipy.store.warcfiles import OPEN_SUFFIX, WARC_DIR, Recovered, close_file, recover
from ubipy.store.warcstore import END_META, CaptureKind, named_peer

__all__ = ["recover_warc"]

log = logging.getLogger("ubipy.store.warcstore")  # the WARC store's log, as before


def _mark(conn: sqlite3.Connection) -> tuple[str, int] | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (END_META,)).fetchone()
    if row is None:
        return None
    name, _, end = str(row[0]).rpartition(" ")
    return name, int(end)


def own_files(conn: sqlite3.Connection) -> str:
    """How the names of the shard's WARC files begin (WarcStore's): ``ubipy-<its
    peer's id>-``, ``ubipy-local-`` before a peer gave it an id."""
    return f"ubipy-{named_peer(conn) or 'local'}-"


def recover_warc(
    conn: sqlite3.Connection, data_dir: Path, synced: Callable[[], object] = lambda: None
) -> Recovered | None:
    """At open: close the files a crash left open, cut back to the shard's mark. If the
    open file lost committed records (an OS crash), their captures are forgotten and
    their pages go back to the frontier, to be fetched again. ``synced``: puts the
    shard's commits on disk (its WAL synced)."""
    directory = data_dir / WARC_DIR
    mark = _mark(conn)
    if not directory.is_dir():
        if mark is None:
            return None
        # An OS crash may lose a directory made a moment before, with the one file it
        # held; nothing else. A disk not mounted is no crash: its captures stay (QA:
        # 136 pages of 137 forgotten, to be fetched again, then the start refused).
        if os.path.lexists(directory):  # a file, a link to nothing
            raise ShardError(f"{directory}: not a directory (WARC files go there)")
        (elsewhere,) = conn.execute(
            "SELECT COUNT(*) FROM warc WHERE file != ?", (mark[0],)
        ).fetchone()
        if elsewhere:
            raise ShardError(
                f"{directory}: missing, and the shard has {elsewhere} captures in the WARC "
                "files that were there (a disk not mounted?): put it back"
            )

    def ends(name: str, within: int | None) -> int | None:
        row = conn.execute(
            "SELECT MAX(end) FROM warc WHERE file = ? AND end <= ?",
            (name, within if within is not None else 2**62),
        ).fetchone()
        return None if row[0] is None else int(row[0])

    done = recover(directory, mark, ends, own_files(conn))
    closed = list(done.closed)
    for name, end in done.short:
        conn.execute("BEGIN IMMEDIATE")
        try:
            lost = conn.execute(
                "SELECT fp, at, kind FROM warc WHERE file = ? AND end > ?", (name, end)
            ).fetchall()
            for fp, at, kind in lost:
                # A first fetch lost: the page is fetched again, its revisit state gone
                # with it; a later visit: forgotten, and its page's validators and
                # digest with it, the lost version's (a review: the next 304, or the
                # same digest, made a revisit record point at the lost capture).
                if conn.execute(
                    "DELETE FROM pages WHERE fp = ? AND fetched_at = ?", (fp, at)
                ).rowcount:
                    conn.execute("UPDATE frontier SET state = 0 WHERE fp = ?", (fp,))
                    conn.execute("DELETE FROM refresh WHERE fp = ?", (fp,))
                elif (
                    conn.execute("DELETE FROM visits WHERE fp = ? AND at = ?", (fp, at)).rowcount
                    and kind != CaptureKind.OTHER  # not a version of the page: nothing held
                ):
                    conn.execute(
                        "UPDATE refresh SET etag = NULL, last_modified = NULL, digest = NULL "
                        "WHERE fp = ?",
                        (fp,),
                    )
            conn.execute("DELETE FROM warc WHERE file = ? AND end > ?", (name, end))
            if mark is not None and name == mark[0]:
                conn.execute("DELETE FROM meta WHERE key = ?", (END_META,))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        robots = sum(1 for _, _, kind in lost if kind == CaptureKind.ROBOTS)
        log.warning(
            "warc: %d capture(s) lost with the end of %s, to be fetched again%s",
            len(lost) - robots,
            name,
            f" (and {robots} robots.txt answer(s), kept in the shard alone)" if robots else "",
        )
        # Closed only once the shard no longer counts what it lost (see recover), on
        # disk: its WAL unsynced, a power cut kept the file closed and lost the commit.
        if (path := directory / (name + OPEN_SUFFIX)).exists():
            synced()
            if end:
                closed.append(close_file(path))
            else:  # nothing whole was left in it: gone only now (see recover)
                path.unlink()
    return Recovered(tuple(closed), done.short)
