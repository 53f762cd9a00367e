"""Hosts with nothing to ask, forgotten the longest idle first beyond a bound.

A host's slot (:mod:`ubipy.fetch.slots`) holds its robots.txt rules, its pace, its
mark and its window: 2-3 KB, about 3.5 KB of the Python heap a host in all (a crawl
of 3,000 hosts against one of 1,000, tracemalloc). A broad crawl meets millions of
hosts and finishes most of them, so a slot kept for every host it ever met grew
without bound. Beyond ``limit`` hosts with nothing to ask, the longest idle are
forgotten. One that gets URLs again gets a new slot, which owes what the old one
did: the scheduler recalls the host's mark (when it may next be asked, and its
pages of ``--max-pages-per-host``) from the shard, where every request's mark is
written, and asks its robots.txt again first, as once its rules are a day old. A
host given up (robots.txt or its name unreachable) is tried again. What its answers
taught its pace (throttle.py: its latency, a run of 503s) is forgotten with it, as a
restart forgets it.

A slot is forgotten only when nothing refers to it: no request in flight, no URL
and no page due again, no place in an address's or a hop's queue, no other host's
hop to it under way (its address, looked up for the hop, is where the hop lands),
and a minute after its last request ended, by when that request's mark is on disk.

No I/O and no clock, as the scheduler (:mod:`ubipy.fetch.politeness`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Final

from ubipy.fetch.slots import HostSlot

__all__ = ["IdleHosts"]

# Seconds after its last request's end before a slot may be forgotten: its mark is
# written at the next commit (every second or so, or sooner).
FORGET_AFTER: Final = 60.0
# Idle hosts not yet due looked at in one call, at most.
_PASSES: Final = 8


def _idle(slot: HostSlot) -> bool:
    return not (
        slot.in_flight
        or slot.armed
        or slot.has_work
        or slot.refresh
        or slot.aside
        or slot.ip_wait is not None
        or slot.ip is not None
        or slot.hop is not None
        or slot.hop_wait is not None
    )


class IdleHosts:
    """The hosts that came to have nothing to ask, the longest idle first (a host may
    have work again since: it is passed over when its turn to be forgotten comes)."""

    __slots__ = ("_idle", "_limit", "forgotten")

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._idle: OrderedDict[str, HostSlot] = OrderedDict()
        # Slots forgotten so far.
        self.forgotten = 0

    def rest(self, slot: HostSlot) -> None:
        """``slot`` has nothing to ask now."""
        idle = self._idle
        idle[slot.host] = slot
        idle.move_to_end(slot.host)

    def forget(
        self,
        now: float,
        slots: Mapping[str, HostSlot],
        forget: Callable[[HostSlot], None],
        awaited: Callable[[str], bool] = lambda host: False,
    ) -> None:
        """Keep at most ``limit`` idle: ``forget`` the longest idle of the scheduler's
        ``slots`` that may be forgotten now; not a host ``awaited`` by another's
        request (a robots.txt redirected to it: hops.py), looked up for it."""
        idle = self._idle
        # A host owing a long wait (a Retry-After of an hour) goes to the back, and a
        # call looks at a few of them at most: they do not hold up the others.
        passed = 0
        while len(idle) > self._limit and passed < _PASSES:
            host, slot = next(iter(idle.items()))
            if slots.get(host) is not slot or not _idle(slot):
                del idle[host]  # busy again, or dropped: it rests again when idle
            elif slot.next_allowed + FORGET_AFTER > now or awaited(host):
                idle.move_to_end(host)
                passed += 1
            else:
                del idle[host]
                forget(slot)
                self.forgotten += 1

    def drop(self, slot: HostSlot) -> None:
        """``slot`` is no longer the scheduler's (handed to another peer)."""
        if self._idle.get(slot.host) is slot:
            del self._idle[slot.host]
