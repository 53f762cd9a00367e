"""Turns for reading sitemaps: a few at once, taken before a request is handed out.

A sitemap may hold 50 MB, uncompressed, twice over while it is read (its body, then
its parse), so only a few are read at once (QA: 40 hosts' gzip bombs at /sitemap.xml
took 3.4 GB). The crawler once waited for a turn after the request had taken one of
the concurrency's slots: on a broad crawl, where each host's /sitemap.xml is admitted
with its robots.txt's answer and comes up at about the same point for every host, a
peer with 64 slots made 4 requests at a time for 40 s while 28,000 pages waited (QA,
10,000 hosts). Here the scheduler asks for the turn before it hands the request out:
a host whose next entry is a sitemap while every turn is taken goes on with a page
behind it (the sitemap first again once a turn is free), and a host with nothing
else to ask waits, parked, holding no slot. Each request that ends unparks as many
hosts as there are free turns, so a turn a host left for a page passes on.

No I/O and no clock, as the scheduler (:mod:`ubipy.fetch.politeness`).
"""

from __future__ import annotations

import enum
from collections import deque
from collections.abc import Callable
from typing import Final, Literal

from ubipy.fetch.refreshshare import RefreshShare
from ubipy.fetch.sitemaps import is_sitemap
from ubipy.fetch.slots import Entry, HostSlot
from ubipy.fetch.windows import Windows

__all__ = ["SITEMAP_READS", "SitemapTurns", "Turn"]

#: Sitemaps read at once by a peer.
SITEMAP_READS: Final = 4
# Entries looked through for a page behind a host's sitemaps (a robots.txt may name
# several): past them the host waits for a turn.
_LOOK_BEHIND = 8


class Turn(enum.Enum):
    WAIT = "wait"  # only sitemaps to ask, and no turn free: the host waits, parked


class SitemapTurns:
    __slots__ = ("_limit", "_parked", "_reading", "_share", "_windows")

    def __init__(self, share: RefreshShare, windows: Windows, limit: int = SITEMAP_READS) -> None:
        self._share = share
        self._windows = windows
        self._limit = limit
        self._reading: set[str] = set()  # hosts whose sitemap is being asked
        self._parked: deque[HostSlot] = deque()

    def take(self, slot: HostSlot, now: float) -> Entry | Literal[Turn.WAIT] | None:
        """The host's next entry (:meth:`RefreshShare.take`'s), or, while every turn is
        taken, the first page behind its sitemaps (they stay first), or
        :attr:`Turn.WAIT` when there is none near."""
        entry = self._share.take(slot, now, self._windows)
        if entry is None or len(self._reading) < self._limit or not is_sitemap(entry.depth):
            return entry
        aside = [entry]
        while len(aside) < _LOOK_BEHIND:
            behind = self._share.take(slot, now, self._windows)
            if behind is None:
                break
            if not is_sitemap(behind.depth):
                self._put_back(slot, aside)
                return behind
            aside.append(behind)
        self._put_back(slot, aside)
        self._parked.append(slot)
        return Turn.WAIT

    def _put_back(self, slot: HostSlot, entries: list[Entry]) -> None:
        for entry in reversed(entries):  # each to the front: in the order they came
            self._windows.put_back(slot, entry)

    def started(self, host: str) -> None:
        """``host``'s sitemap is being asked: a turn is taken."""
        self._reading.add(host)

    def ended(self, host: str, live: Callable[[HostSlot], bool]) -> list[HostSlot]:
        """A request to ``host`` ended (its sitemap's turn, if it had one, is free): the
        parked hosts to look again, one a free turn (``live``: still the scheduler's)."""
        self._reading.discard(host)
        again: list[HostSlot] = []
        while self._parked and len(again) < self._limit - len(self._reading):
            if live(slot := self._parked.popleft()):
                again.append(slot)
        return again

    @property
    def reading(self) -> int:
        """Sitemaps being asked now."""
        return len(self._reading)

    @property
    def waiting(self) -> bool:
        """Whether a host waits for a turn."""
        return bool(self._parked)
