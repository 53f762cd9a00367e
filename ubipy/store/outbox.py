"""URLs found here that belong to other peers, kept until their owner acknowledges
them: the router holds them in memory on their way, this table across restarts (and
while an owner that does not answer has more waiting than memory should hold). A
part of :class:`ubipy.store.shard.Shard` (a mixin over its connection).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Collection, Generator, Iterator, Sequence
from contextlib import AbstractContextManager

from ubipy.store.rows import NewURL
from ubipy.store.schema import distinct

__all__ = ["OutboxMixin"]

_OUTBOX = "fp, url, host, depth, score, redirects"  # the outbox's columns, as in NewURL
# Rows read at a time when the whole outbox is read (at a start).
CHUNK = 10_000

# The hosts of the rows kept on disk alone: a skip scan of their partial index.
_SPILLED_HOSTS = distinct("outbox", "host", "spilled = 1")


def _url(fp: int, url: str, host: str, depth: int, score: float, redirects: int) -> NewURL:
    """An outbox row (its columns as :data:`_OUTBOX` reads them) as the URL it holds."""
    return NewURL(int(fp), str(url), str(host), int(depth), float(score), int(redirects))


class OutboxMixin:
    """The shard's outbox (see the module's docstring)."""

    _conn: sqlite3.Connection

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def outbox_add(self, urls: Sequence[NewURL]) -> None:
        with self.transaction():
            self._conn.executemany(
                f"INSERT OR IGNORE INTO outbox ({_OUTBOX}) VALUES (?, ?, ?, ?, ?, ?)",
                [(u.fp, u.url, u.host, u.depth, u.score, u.redirects) for u in urls],
            )

    def outbox_remove(self, fps: Sequence[int]) -> None:
        with self.transaction():
            self._conn.executemany("DELETE FROM outbox WHERE fp = ?", [(fp,) for fp in fps])

    def outbox(self) -> list[NewURL]:
        return [u for chunk in self.outbox_chunks() for u in chunk]

    def outbox_chunks(self, size: int | None = None) -> Iterator[list[NewURL]]:
        """Every row, ``size`` (:data:`CHUNK`) at a time (an outbox kept for an owner
        that did not answer may hold millions); rows removed meanwhile are not read
        again."""
        size = size or CHUNK
        after, first = -(2**63), True  # fingerprints are signed 64-bit
        while True:
            cur = self._conn.execute(
                f"SELECT {_OUTBOX} FROM outbox WHERE fp {'>=' if first else '>'} ? "
                "ORDER BY fp LIMIT ?",
                (after, size),
            )
            first = False
            chunk = [_url(*row) for row in cur]
            if chunk:
                yield chunk
            if len(chunk) < size:
                return
            after = chunk[-1].fp

    def outbox_spill(self, fps: Sequence[int]) -> None:
        """These rows are kept on disk alone (the router holds them no more)."""
        with self.transaction():
            self._conn.executemany(
                "UPDATE outbox SET spilled = 1 WHERE fp = ?", [(fp,) for fp in fps]
            )

    def outbox_unspill(self, fps: Sequence[int]) -> None:
        """These rows are held in memory again."""
        with self.transaction():
            self._conn.executemany(
                "UPDATE outbox SET spilled = 0 WHERE fp = ? AND spilled = 1", [(fp,) for fp in fps]
            )

    def outbox_spilled_hosts(self) -> list[str]:
        """The hosts of the rows kept on disk alone (a seek a host in their index)."""
        return [str(h) for (h,) in self._conn.execute(_SPILLED_HOSTS)]

    def outbox_spilled_of(self, hosts: Collection[str]) -> Generator[NewURL, None, None]:
        """The rows of ``hosts`` kept on disk alone, read as they are taken (close the
        iterator when done with it: it holds a read statement open till then)."""
        if not hosts:
            return
        cur = self._conn.execute(
            f"SELECT {_OUTBOX} FROM outbox "
            "WHERE spilled = 1 AND host IN (SELECT value FROM json_each(?))",
            (json.dumps(list(hosts)),),
        )
        try:
            for row in cur:
                yield _url(*row)
        finally:
            cur.close()
