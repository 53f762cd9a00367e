"""Hosts the crawl gave up on, why and when, kept across restarts.

A host is given up when its robots.txt cannot be had or its name does not resolve;
for a reason that may pass it is tried again a while later (ubipy.peer.giveups). Kept
in memory only, a restart forgot those times, and the host's closed rows stayed
closed for the rest of a crawl meant to run for weeks. A part of
:class:`ubipy.store.shard.Shard` (a mixin over its connection).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import NamedTuple

__all__ = ["GivenUp", "GivenUpMixin"]


class GivenUp(NamedTuple):
    host: str
    reason: str
    at: float  # wall-clock seconds


class GivenUpMixin:
    """The shard's hosts given up (see the module's docstring)."""

    _conn: sqlite3.Connection

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def save_given_up(self, hosts: Sequence[GivenUp]) -> None:
        """These hosts were given up (a host given up again: its latest reason and time)."""
        with self.transaction():
            self._conn.executemany(
                "INSERT OR REPLACE INTO given_up (host, reason, at) VALUES (?, ?, ?)", hosts
            )

    def given_up(self) -> list[GivenUp]:
        cur = self._conn.execute("SELECT host, reason, at FROM given_up")
        return [GivenUp(str(h), str(r), float(at)) for h, r, at in cur]

    def _forget_given_up(self, host: str) -> None:
        """The host is tried again, or no longer this shard's (in the caller's
        transaction)."""
        self._conn.execute("DELETE FROM given_up WHERE host = ?", (host,))
