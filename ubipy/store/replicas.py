"""Copies of another peer's frontier and history (``--replicas 2``), kept for when it
dies: the pending URLs and done fingerprints its commits sent here, and its hosts'
politeness marks. A part of :class:`ubipy.store.shard.Shard` (a mixin over its
connection).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager

from ubipy.store.rows import HostMark, NewURL

__all__ = ["ReplicaMixin"]


class ReplicaMixin:
    """The shard's replica tables (see the module's docstring)."""

    _conn: sqlite3.Connection

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def replica_add(
        self,
        items: Sequence[tuple[str, str | None, int, int, bool]],
        marks: Mapping[str, HostMark] | None = None,
    ) -> None:
        """(host, url or None, depth, fp, done): pending URLs and done marks of others;
        ``marks``: their hosts' politeness marks (the latest request wins)."""
        with self.transaction():
            self._conn.executemany(
                "INSERT INTO replica (fp, host, url, depth, done) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT(fp) DO UPDATE SET done = MAX(done, excluded.done), "
                "url = COALESCE(replica.url, excluded.url)",
                [(fp, host, url, depth, int(done)) for host, url, depth, fp, done in items],
            )
            if marks:
                self._conn.executemany(
                    "INSERT INTO replica_marks (host, last_end, delay, pages) "
                    "VALUES (?, ?, ?, ?) ON CONFLICT(host) DO UPDATE SET "
                    "last_end = excluded.last_end, delay = excluded.delay, "
                    "pages = excluded.pages WHERE excluded.last_end >= replica_marks.last_end",
                    [(h, m.last_end, m.delay, m.pages) for h, m in marks.items()],
                )

    def replica_hosts(self) -> list[str]:
        cur = self._conn.execute("SELECT host FROM replica UNION SELECT host FROM replica_marks")
        return [str(h) for (h,) in cur]

    def replica_of(self, host: str) -> tuple[list[NewURL], list[int], HostMark | None]:
        """A host's replica: pending URLs, done fingerprints, its mark (kept until
        :meth:`replica_drop`, once they are this shard's own)."""
        pending: list[NewURL] = []
        done: list[int] = []
        row = self._conn.execute(
            "SELECT last_end, delay, pages FROM replica_marks WHERE host = ?", (host,)
        ).fetchone()
        mark = None if row is None else HostMark.from_row(row)
        cur = self._conn.execute("SELECT fp, url, depth, done FROM replica WHERE host = ?", (host,))
        for fp, url, depth, is_done in cur.fetchall():
            if is_done:
                done.append(int(fp))
            elif url is not None:
                pending.append(NewURL(int(fp), str(url), host, int(depth)))
        return pending, done, mark

    def replica_fetched(self, host: str) -> list[tuple[int, str, int]]:
        """(fingerprint, URL, depth) of the URLs a host's replica holds as done whose
        URL it knows (a copy sent pending first, then done)."""
        cur = self._conn.execute(
            "SELECT fp, url, depth FROM replica WHERE host = ? AND done AND url IS NOT NULL",
            (host,),
        )
        return [(int(fp), str(url), int(depth)) for fp, url, depth in cur]

    def replica_drop(self, host: str) -> None:
        """Forget a host's replica."""
        with self.transaction():
            self._conn.execute("DELETE FROM replica_marks WHERE host = ?", (host,))
            self._conn.execute("DELETE FROM replica WHERE host = ?", (host,))
