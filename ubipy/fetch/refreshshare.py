"""The share of requests that pages due again may take (``--recrawl``).

A continuous crawl asks each page again when it is due (refresh.py), but a crawl that
only ever refreshed would never reach the new URLs it keeps finding: while new URLs
wait too, pages due again take at most ``share`` of the requests handed out. The
politeness scheduler asks this class which of the two a host's request goes to.

No I/O and no clock, as the scheduler (:mod:`ubipy.fetch.politeness`).
"""

from __future__ import annotations

import heapq

from ubipy.fetch.slots import Entry, HostSlot
from ubipy.fetch.windows import Windows

__all__ = ["RefreshShare"]


class RefreshShare:
    __slots__ = ("_refreshes", "_share", "_taken")

    def __init__(self, share: float) -> None:
        self._share = share
        # Requests handed out so far, and how many of them were pages due again.
        self._taken = 0
        self._refreshes = 0

    def refresh_turn(self) -> bool:
        """Whether a page due again may go next, were new URLs waiting too (the first
        request of all counts as one handed out, so a refresh may be the first)."""
        return self._refreshes < self._share * max(self._taken, 1)

    def take(self, slot: HostSlot, now: float, windows: Windows) -> Entry | None:
        """The host's next entry: a page due again, or a new URL, the refreshes taking
        at most their share of requests while new URLs wait too."""
        due = bool(slot.refresh) and slot.refresh[0][0] <= now
        if due and (not slot.has_work or self._refreshes < self._share * self._taken):
            self._refreshes += 1
            self._taken += 1
            return heapq.heappop(slot.refresh)[2]
        entry = windows.pop(slot) if slot.has_work else None
        self._taken += entry is not None
        return entry
