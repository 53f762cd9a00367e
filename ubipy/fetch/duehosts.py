"""Which host's time has come: the scheduler's heap of armed hosts, and the order
among the hosts that are due.

A host is armed for a time (its next allowed request, its address's or hop
target's turn) and comes up once that time is past. Under bfs the one due first
goes first; under a ranked order (``--order``, ranking.py) every host that is due
waits among the ready ones and the most urgent goes, while hosts with pages due
again (``--recrawl``) take their share of the turns in the order they came due
(refreshshare.py).

One choice in :data:`OLDEST_EVERY` among the ready hosts goes to the one that has
waited longest, whatever its priority. Ranked by score alone, a host whose URLs hold
no cash (what only a sitemap lists, a host taken over from a replica) was never
chosen while any host with cash was ready: when the crawler's connections, not the
hosts' delays, bound a crawl, that is for ever (a review: a seed's sitemap never read
in 36,000 requests under opic; at once under bfs).

An armed host's place is told by its tie-breaker (``armed_tie``): armed again, its
old places go stale and are skipped when met.

No I/O and no clock, as the scheduler.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections import deque
from collections.abc import Callable

from ubipy.config import CrawlOrder
from ubipy.fetch.refreshshare import RefreshShare
from ubipy.fetch.slots import HostRobots, HostSlot
from ubipy.fetch.windows import Windows

__all__ = ["OLDEST_EVERY", "DueHosts"]

#: Of the choices among ready hosts under a ranked order, one in this many goes to the
#: host that has waited longest.
OLDEST_EVERY = 16


class DueHosts:
    """``hosts()``: how many hosts the scheduler has (stale places are shed beyond
    twice that); ``tie``: the scheduler's tie-breakers, shared with its pages due
    again."""

    def __init__(
        self,
        order: CrawlOrder,
        share: RefreshShare,
        windows: Windows,
        hosts: Callable[[], int],
        tie: itertools.count[int],
    ) -> None:
        self._order = order
        self._share = share
        self._windows = windows
        self._hosts = hosts
        self._tie = tie
        # (time, tie-breaker, slot): the slot, so one dropped and made anew is told.
        self._heap: list[tuple[float, int, HostSlot]] = []
        # Under an order other than bfs, hosts whose time has come wait here to be
        # chosen by priority: (-priority, tie-breaker, the push it was armed by, slot).
        self._ready: list[tuple[float, int, int, HostSlot]] = []
        # Of those, the hosts that came up with pages due again (--recrawl), in turn.
        self._ready_refresh: deque[tuple[int, HostSlot]] = deque()
        # All of them again in the order they came up, for the longest waiting's turn.
        self._ready_oldest: deque[tuple[int, HostSlot]] = deque()
        self._choices = 0

    def __bool__(self) -> bool:
        """Whether any host is armed or ready."""
        return bool(self._heap or self._ready)

    @property
    def places(self) -> int:
        """Places in the heap, stale ones counted."""
        return len(self._heap)

    def push(self, slot: HostSlot, when: float) -> None:
        """Put the host in the heap at ``when``; an entry it had there goes stale for
        good (told by its tie-breaker: the host may be armed for that time again)."""
        heap = self._heap
        if len(heap) > 2 * self._hosts() + 1024:
            # Stale entries wait for their time to be popped; a peer whose hosts are
            # brought forward again and again sheds them here instead.
            heap[:] = [e for e in heap if e[2].armed and e[1] == e[2].armed_tie]
            heapq.heapify(heap)
        tie = next(self._tie)
        heapq.heappush(heap, (when, tie, slot))
        slot.armed, slot.armed_at, slot.armed_tie = True, when, tie

    def next_wakeup(self) -> float | None:
        """When the earliest armed host becomes ready, or None if none is (-inf: one
        is ready now, waiting to be chosen under a ranked order)."""
        if self._ready:
            return -math.inf
        return self._heap[0][0] if self._heap else None

    def _pop_due(self, now: float) -> HostSlot | None:
        """The host due first, if its time has come (stale heap entries skipped)."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, tie, slot = heapq.heappop(heap)
            if slot.armed and tie == slot.armed_tie:
                return slot
        return None

    def next_due(self, now: float) -> HostSlot | None:
        """The next host whose time has come: under bfs the one due first, under
        another order the most urgent of all that are due."""
        if self._order is CrawlOrder.BFS:
            return self._pop_due(now)
        ready = self._ready
        while (slot := self._pop_due(now)) is not None:
            if slot.robots_state is HostRobots.KNOWN and not slot.queue:
                self._windows.refill(slot)
            urgency = self._windows.priority(slot, self._order)
            heapq.heappush(ready, (-urgency, next(self._tie), slot.armed_tie, slot))
            self._ready_oldest.append((slot.armed_tie, slot))
            if slot.refresh and slot.refresh[0][0] <= now:
                self._ready_refresh.append((slot.armed_tie, slot))
        # Hosts with pages due again go in the order they came due while refreshes
        # are under their share of the requests: ranked by their new URLs alone, a
        # host with only pages due again was never chosen while more hosts with new
        # URLs were ready than requests could start (found by a review).
        refresh = self._ready_refresh
        if refresh and self._share.refresh_turn():
            if (slot := _first_live(refresh)) is not None:
                return _taken(slot)
        elif len(refresh) > 2 * len(ready) + 64:  # places gone stale, many of them
            self._ready_refresh = _live(refresh)
        self._choices += 1
        if self._choices % OLDEST_EVERY == 0 and (slot := _first_live(self._ready_oldest)):
            return _taken(slot)
        self._shed_stale()
        while ready:
            _, _, armed_tie, slot = heapq.heappop(ready)
            # Armed again meanwhile (brought forward by new URLs or a plan): that entry is
            # its place now, or the host would be handed out twice.
            if slot.armed and armed_tie == slot.armed_tie:
                return _taken(slot)
        return None

    def _shed_stale(self) -> None:
        """Drop the ready places gone stale when they are many: each host chosen leaves
        its place in the other queue (a low-ranked host chosen as the longest waiting,
        its place in the heap, which is not popped while better hosts come)."""
        ready, limit = self._ready, 2 * self._hosts() + 1024
        if len(ready) > limit:
            ready[:] = [e for e in ready if e[3].armed and e[2] == e[3].armed_tie]
            heapq.heapify(ready)
        if len(self._ready_oldest) > limit:
            self._ready_oldest = _live(self._ready_oldest)


def _taken(slot: HostSlot) -> HostSlot:
    """``slot``, chosen: its places in the other ready queues go stale (one parked, still
    armed, was otherwise chosen again from another, and parked twice; a review)."""
    slot.armed_tie = -1
    return slot


def _live(places: deque[tuple[int, HostSlot]]) -> deque[tuple[int, HostSlot]]:
    return deque((t, slot) for t, slot in places if slot.armed and t == slot.armed_tie)


def _first_live(places: deque[tuple[int, HostSlot]]) -> HostSlot | None:
    """The first host still in its place, its place and any stale before it taken."""
    while places:
        armed_tie, slot = places.popleft()
        if slot.armed and armed_tie == slot.armed_tie:
            return slot
    return None
