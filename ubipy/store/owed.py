"""What a restart owes the hosts a shard's peer asked: each host's politeness mark
(when its last request ended, the wait after it, its pages spent), and each pending
URL's failed tries (a restart gave a failing URL its retries afresh). A part of
:class:`ubipy.store.shard.Shard` (a mixin over its connection).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager

from ubipy.store.rows import HostMark

__all__ = ["OwedMixin"]


class OwedMixin:
    """The shard's politeness marks (see the module's docstring)."""

    _conn: sqlite3.Connection

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def save_host_marks(self, marks: Mapping[str, HostMark]) -> None:
        """Remember, per host, when its last request ended, its delay and budget spent."""
        with self.transaction():
            self._conn.executemany(
                "INSERT INTO hosts (host, last_end, delay, pages, robots_tries) "
                "VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(host) DO UPDATE SET last_end = excluded.last_end, "
                "delay = excluded.delay, pages = excluded.pages, "
                "robots_tries = excluded.robots_tries",
                [(h, m.last_end, m.delay, m.pages, m.robots_tries) for h, m in marks.items()],
            )

    def host_mark(self, host: str) -> HostMark | None:
        row = self._conn.execute(
            "SELECT last_end, delay, pages, robots_tries FROM hosts WHERE host = ?", (host,)
        ).fetchone()
        return None if row is None else HostMark.from_row(row)

    def host_marks(self) -> dict[str, HostMark]:
        cur = self._conn.execute("SELECT host, last_end, delay, pages, robots_tries FROM hosts")
        return {str(row[0]): HostMark.from_row(row[1:]) for row in cur}

    def save_tries(self, tries: Mapping[int, tuple[int, int]]) -> None:
        """Pending URLs' failed tries so far, by fingerprint: (all of them, those that
        spent none of its retries), as :class:`ubipy.fetch.Entry` counts them."""
        with self.transaction():
            self._conn.executemany(
                "INSERT OR REPLACE INTO tries (fp, attempt, free) VALUES (?, ?, ?)",
                [(fp, attempt, free) for fp, (attempt, free) in tries.items()],
            )

    def forget_tries(self, fps: Sequence[int]) -> None:
        """These URLs were settled (answered, or closed): their tries are owed no more."""
        with self.transaction():
            self._conn.executemany("DELETE FROM tries WHERE fp = ?", [(fp,) for fp in fps])

    def tries(self) -> dict[int, tuple[int, int]]:
        """The failed tries of the URLs still pending (see :meth:`save_tries`). Read
        only: a peer starts on a full disk (rows of URLs settled since stay, unread)."""
        cur = self._conn.execute(
            "SELECT t.fp, t.attempt, t.free FROM tries t "
            "JOIN frontier f ON f.fp = t.fp AND f.state = 0"
        )
        return {int(fp): (int(attempt), int(free)) for fp, attempt, free in cur}
