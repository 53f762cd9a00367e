"""The share of requests that pages due again may take (``--recrawl``).

A continuous crawl asks each page again when it is due (refresh.py), but a crawl that
only ever refreshed would never reach the new URLs it keeps finding: while new URLs
wait too, pages due again take at most ``share`` of the requests handed out. The
politeness scheduler asks this class which of the two a host's request goes to.

The share is kept over the recent requests, not since the start, and a host's choice
between its own two kinds counts only the choices where it had both. Counted over every
request since the start, a crawl's late hours (most hosts with only pages due again)
put the refreshes over their share for good, and a big site still being crawled got a
new URL at every turn, its pages never asked again (a review: 1 refresh in 55 turns);
after hours of new URLs alone, the refreshes took every turn until they caught up.

No I/O and no clock, as the scheduler (:mod:`ubipy.fetch.politeness`).
"""

from __future__ import annotations

from ubipy.fetch.slots import Entry, HostSlot
from ubipy.fetch.windows import Windows

__all__ = ["RefreshShare"]

# The counts are halved when they reach twice this many requests: the share holds
# over about the last this many.
_WINDOW = 1000


class _Count:
    """Requests counted, and how many of them were pages due again, fading."""

    __slots__ = ("refreshes", "taken")

    def __init__(self) -> None:
        self.taken = 0.0
        self.refreshes = 0.0

    def under(self, share: float, at_least: float) -> bool:
        return self.refreshes < share * max(self.taken, at_least)

    def add(self, refresh: bool) -> None:
        self.taken += 1
        self.refreshes += refresh
        if self.taken >= 2 * _WINDOW:
            self.taken /= 2
            self.refreshes /= 2


class RefreshShare:
    __slots__ = ("_all", "_both", "_share")

    def __init__(self, share: float) -> None:
        self._share = share
        # Every request handed out (hosts in turn, see refresh_turn), and those of a
        # host that had both kinds waiting (see take).
        self._all = _Count()
        self._both = _Count()

    def refresh_turn(self) -> bool:
        """Whether a page due again may go next, were new URLs waiting too (the first
        request of all counts as one handed out, so a refresh may be the first)."""
        return self._all.under(self._share, 1)

    def take(self, slot: HostSlot, now: float, windows: Windows) -> Entry | None:
        """The host's next entry: a page due again, or a new URL, the refreshes taking
        at most their share of the requests of hosts where both wait."""
        due = bool(slot.refresh) and slot.refresh[0][0] <= now
        both = due and slot.has_work
        if due and (not both or self._both.under(self._share, 0)):
            if both:
                self._both.add(True)
            self._all.add(True)
            return slot.pop_due()
        entry = windows.pop(slot) if slot.has_work else None
        if entry is not None:
            if both:
                self._both.add(False)
            self._all.add(False)
        return entry
