"""Copies of another peer's frontier and history (``--replicas 2``), kept for when it
dies: the pending URLs and done fingerprints its commits sent here, and its hosts'
politeness marks. A part of :class:`ubipy.store.shard.Shard` (a mixin over its
connection).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractContextManager

from ubipy.store.rows import HostMark, NewURL
from ubipy.store.schema import distinct

__all__ = ["ReplicaMixin"]

# The peers copies came from: a skip scan of the sources' primary key.
_SOURCES = distinct("replica_sources", "source")


class ReplicaMixin:
    """The shard's replica tables (see the module's docstring)."""

    _conn: sqlite3.Connection

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def replica_add(
        self,
        items: Sequence[tuple[str, str | None, int, int, bool]],
        marks: Mapping[str, HostMark] | None = None,
        *,
        source: str,
    ) -> None:
        """(host, url or None, depth, fp, done): pending URLs and done marks of others;
        ``marks``: their hosts' politeness marks (the latest request wins); ``source``:
        the peer that sent them (see :meth:`replica_strays`)."""
        hosts = {host for host, *_ in items} | set(marks or ())
        with self.transaction():
            # Looked up before written: a host's later copies from the same sender
            # (every commit's) write nothing here.
            self._conn.executemany(
                "INSERT OR IGNORE INTO replica_sources (source, host) VALUES (?, ?)",
                [(source, host) for host in hosts],
            )
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

    def replica_strays(self, gone: Collection[str]) -> list[str]:
        """Hosts with copies here from a peer in ``gone`` (dead, or left): it may have
        gone before it handed them to their new owner, and those copies are all that
        is left of what it knew of them."""
        sources = [str(s) for (s,) in self._conn.execute(_SOURCES) if s in gone]
        hosts: dict[str, None] = {}
        for source in sources:
            hosts.update((h, None) for h in self.replica_hosts_from(source))
        return list(hosts)

    def replica_hosts_from(self, source: str) -> list[str]:
        """The hosts with copies here from ``source``."""
        cur = self._conn.execute("SELECT host FROM replica_sources WHERE source = ?", (source,))
        return [str(h) for (h,) in cur]

    def replica_forget(self, source: str, hosts: Sequence[str]) -> None:
        """The copies of ``hosts`` from ``source`` are stale: forget whose they were, and
        drop the rows of those no other peer's copy names."""
        pairs = [(source, h) for h in hosts]
        with self.transaction():
            self._conn.executemany(
                "DELETE FROM replica_sources WHERE source = ? AND host = ?", pairs
            )
            alone = [
                (h,)
                for h in hosts
                if self._conn.execute(
                    "SELECT 1 FROM replica_sources WHERE host = ? LIMIT 1", (h,)
                ).fetchone()
                is None
            ]
            self._drop_rows(alone)

    def replica_unsource(self, host: str, alive: Collection[str]) -> None:
        """The copies of ``host`` from peers not in ``alive`` are its owner's now: forget
        whose they were (the rows stay, as the copy of the owner's successor)."""
        cur = self._conn.execute("SELECT source FROM replica_sources WHERE host = ?", (host,))
        gone = [(str(source), host) for (source,) in cur if source not in alive]
        with self.transaction():
            self._conn.executemany(
                "DELETE FROM replica_sources WHERE source = ? AND host = ?", gone
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
            self._drop_rows([(host,)])
            self._conn.execute("DELETE FROM replica_sources WHERE host = ?", (host,))

    def _drop_rows(self, hosts: Sequence[tuple[str]]) -> None:
        """Inside a transaction: the copies of ``hosts`` (1-tuples) and their marks."""
        self._conn.executemany("DELETE FROM replica WHERE host = ?", hosts)
        self._conn.executemany("DELETE FROM replica_marks WHERE host = ?", hosts)
