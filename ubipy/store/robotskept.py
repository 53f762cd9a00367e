"""Each host's robots.txt of each scheme as last answered, kept across restarts.

Kept in memory only, every restart asked every host's robots.txt again before its
next page (QA), though its answer may be cached for a day (RFC 9309 §2.4, and
``--robots-ttl``): the rules, not a failure's, are kept here, the body compressed,
and a restarted peer reads a host's when the host's first URL of a scheme comes up
(:class:`ubipy.fetch.RobotsRule`'s ``cache``). A part of
:class:`ubipy.store.shard.Shard` (a mixin over its connection).

Each answer (any status, a redirect's too) also goes to the WARC files when the peer
keeps them, as Heritrix and wget archive theirs: a replay serves the robots.txt of the
time, and an archive shows which rules the crawl obeyed.
"""

from __future__ import annotations

import sqlite3
import zlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import NamedTuple

from ubipy.store.warcrecords import HttpHead
from ubipy.store.warcstore import WarcStore

__all__ = ["RobotsAnswer", "RobotsKept", "RobotsKeptMixin"]


class RobotsKept(NamedTuple):
    host: str
    scheme: str  # "http:" or "https:"
    at: float  # wall-clock seconds of the answer
    body: bytes | None  # None: nothing restricts (a 4xx, a redirect past the limit)


@dataclass(frozen=True, slots=True)
class RobotsAnswer:
    """A robots.txt answer as received, for the WARC files: ``fp`` its URL's
    fingerprint, ``at`` the wall clock when it ended."""

    fp: int
    url: str
    at: float
    head: HttpHead
    body: bytes
    truncated: bool


class RobotsKeptMixin:
    """The shard's robots.txt answers (see the module's docstring)."""

    _conn: sqlite3.Connection
    _warc: WarcStore | None

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def save_robots(self, answers: Sequence[RobotsKept]) -> None:
        """These answers came (a later one of a host and scheme replaces the earlier)."""
        with self.transaction():
            self._conn.executemany(
                "INSERT OR REPLACE INTO robots (host, scheme, at, body) VALUES (?, ?, ?, ?)",
                [
                    (a.host, a.scheme, a.at, None if a.body is None else zlib.compress(a.body))
                    for a in answers
                ],
            )

    def archive_robots(self, answers: Sequence[RobotsAnswer]) -> None:
        """Write these answers' records to the WARC files (nothing without them)."""
        if self._warc is None or not answers:
            return
        with self.transaction():
            for a in answers:
                self._warc.robots(a.fp, a.url, a.at, a.head, a.body, truncated=a.truncated)

    def robots_kept(self, host: str, scheme: str) -> RobotsKept | None:
        row = self._conn.execute(
            "SELECT at, body FROM robots WHERE host = ? AND scheme = ?", (host, scheme)
        ).fetchone()
        if row is None:
            return None
        at, body = row
        try:
            text = None if body is None else zlib.decompress(body)
        except zlib.error:
            return None  # asked again, as if never kept
        return RobotsKept(host, scheme, float(at), text)

    def _forget_robots(self, host: str) -> None:
        """The host is no longer this shard's (in the caller's transaction)."""
        self._conn.execute("DELETE FROM robots WHERE host = ?", (host,))
