"""What the first lookup of each seed's host allowed, kept across restarts.

A seed on a name whose address is private (an intranet's) lets the crawl reach the
addresses its first lookup gave, and no other: a name of public address rebound
later to 127.0.0.1 is refused. Kept in memory only, a restart took its next lookup
for the first, and allowed whatever the name had been rebound to (found by a review).
Kept in the shard's meta table, a row a host (few: the seeds' hosts). A part of
:class:`ubipy.store.shard.Shard` (a mixin over its connection).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from contextlib import AbstractContextManager

__all__ = ["SeedLookupsMixin"]

_PREFIX = "seed_lookup:"
# The first key past every one that starts with the prefix (":" + 1 is ";").
_PAST = "seed_lookup;"


class SeedLookupsMixin:
    """The seeds' first lookups (see the module's docstring)."""

    _conn: sqlite3.Connection

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def save_seed_lookup(self, host: str, allowed: Iterable[str]) -> None:
        """``host``'s first lookup allowed these addresses (none: it was public)."""
        with self.transaction():
            self._conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                (_PREFIX + host, " ".join(sorted(allowed))),
            )

    def seed_lookups(self) -> dict[str, frozenset[str]]:
        """Every seed's host looked up so far, and what its first lookup allowed."""
        rows = self._conn.execute(
            "SELECT key, value FROM meta WHERE key >= ? AND key < ?", (_PREFIX, _PAST)
        ).fetchall()
        return {str(key)[len(_PREFIX) :]: frozenset(str(value).split()) for key, value in rows}
