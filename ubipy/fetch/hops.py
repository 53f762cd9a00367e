"""Requests a host's slot makes to another host: its robots.txt redirected there.

A host's robots.txt may answer with a redirect to another host's (subdomains to
``www``, a hosting provider's shared file). The hop is requested through the host's
own slot, but it lands on the other host, the target, which must not see more of
this peer than its own slot would give it: one request in flight at once, whether a
hop or its own slot's, and its delay between two. Hops to one host therefore take
turns as hosts sharing an address do (addresses.py): a host whose hop finds its
target busy waits in the target's queue, holding no request and not asked again, and
gets the target's turn when the request in flight there ends, due when the target's
delay is over. The target's own slot, if this peer has one, waits for a hop in flight
to it in the same queue. A redirect to the host itself (http to https) is no hop.
What the target answers paces the target (a 503 slows its own pages, not the
redirecting host's), when this peer has it.
A hop lands on the target's address too: the per-IP rule (addresses.py) has it wait
for that address, and hold it. The scheduler looks the target up before the hop when
this peer never did, or forgot the target's slot (another peer's host, an idle one);
without a lookup stage, the hop holds no address (not the redirecting host's). While
a hop to the target is under way, its slot is kept. The address's queue
serializes the target's requests, and the target hands out no turns: two queues on
one request, each passing its turn while its host waited for the other's, went
round for ever under a ranked order; the target's turn kept while its host waited
for the address let one hop through a round of the address's queue.

No I/O and no clock, as the scheduler.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from ubipy.fetch.gates import Gate, Gates
from ubipy.fetch.robots import RobotsState
from ubipy.fetch.slots import HostSlot
from ubipy.fetch.urls import host_key

__all__ = ["HopRule", "target_of"]


def target_of(slot: HostSlot) -> str:
    """The host the slot's next request goes to: its own, unless its robots.txt was
    redirected (a hop's target may be its own host: http to https)."""
    fetch = slot.robots_fetch
    # A fetch under way: the first, or a refetch past the TTL (a finished one stays
    # with the slot, its redirects no longer anyone's target).
    if fetch is not None and fetch.redirects and fetch.state is RobotsState.AWAITING_RESPONSE:
        return host_key(fetch.url)
    return slot.host


class HopRule:
    """The hosts other hosts' robots.txt redirected to, and who may ask each when.

    ``push(slot, when)`` puts a host back among the ready ones at ``when``;
    ``current(slot)`` tells whether a host is still the scheduler's; ``own(host)`` is
    the host's own slot, if the scheduler has one; ``delay(host)`` its delay."""

    def __init__(
        self,
        push: Callable[[HostSlot, float], None],
        current: Callable[[HostSlot], bool],
        own: Callable[[str], HostSlot | None],
        delay: Callable[[str], float],
    ) -> None:
        self._push = push
        self._current = current
        self._own = own
        self._delay = delay
        self._targets = Gates()
        # The address each hop in flight landed on (None: not known here).
        self._landed: dict[str, str | None] = {}

    def __len__(self) -> int:
        return len(self._targets)

    def awaited(self, host: str) -> bool:
        """Whether a hop to ``host`` is in flight, has its turn or waits for one: its
        slot, the hop's way to the host's address, is kept (idlehosts.py)."""
        t = self._targets.get(host)
        return t is not None and (t.in_flight or t.turn is not None or bool(t.waiting))

    def may_start(self, slot: HostSlot, target: str, now: float, *, address: str | None) -> bool:
        """Whether ``slot`` may make a request to ``target`` (its own host, or the
        host its robots.txt was redirected to) now; if not, it waits for it (queued
        on the target, or back among the ready hosts at the target's time).

        ``address``: the target's, where the request lands, when known here. Its rule
        (addresses.py) then lets the target's requests through one at a time, in
        turn, and the target hands out no turns of its own: a host with one, waiting
        for the address, kept the target from the hosts given the address meanwhile,
        one hop a round of the address's queue. Only the target's delay, and a
        request still in flight to it at another address (it moved since), hold the
        request back."""
        t = self._targets.get(target)
        own = None if target == slot.host else self._own(target)
        if t is None and own is None:
            return True
        if address is None:
            busy = (own is not None and own.in_flight) or (
                t is not None and (t.in_flight or (t.turn is not None and t.turn is not slot))
            )
        else:
            busy = (own is not None and own.in_flight and own.ip != address) or (
                t is not None and t.in_flight and self._landed.get(target) != address
            )
        if busy:
            if t is None:
                t = self._targets.entry(target)
            if t.waiting is None:
                t.waiting = deque()
            if t.turn is slot:  # its turn, taken meanwhile: first in the queue again
                t.turn = None
                slot.hop_wait = target
                t.waiting.appendleft(slot)
            elif slot.hop_wait != target:
                slot.hop_wait = target
                t.waiting.append(slot)
            return False
        when = max(
            -math.inf if t is None else t.next_allowed,
            -math.inf if own is None else own.next_allowed,
        )
        if when > now:
            self._push(slot, when)
            return False
        return True

    def started(self, slot: HostSlot, target: str) -> None:
        """``slot``'s request to ``target`` starts (after :meth:`may_start` said yes)."""
        if slot.hop_wait is not None and slot.hop_wait != target:
            self.passed(slot)
        slot.hop_wait = None
        t = self._targets.get(target)
        if t is not None and t.turn is slot:
            t.turn = None
        if target != slot.host:
            if t is None:
                t = self._targets.entry(target)
            t.in_flight = True
            slot.hop = target
            self._landed[target] = slot.ip

    def ended(self, slot: HostSlot, now: float) -> None:
        """A request of ``slot`` ended at ``now``: a hop's target waits its delay, then
        the first host waiting for it has its turn; so does ``slot``'s own host's."""
        target = slot.hop
        if target is not None:
            slot.hop = None
            self._landed.pop(target, None)
            t = self._targets.get(target)
            if t is not None:
                t.in_flight = False
                t.next_allowed = max(t.next_allowed, now + self._delay(target))
                self._free(t, target)
        self.freed(slot)
        self._targets.sweep(now)

    def freed(self, slot: HostSlot) -> None:
        """``slot`` has nothing in flight any more (a request or a lookup ended): hops
        waiting for its host may go."""
        t = self._targets.get(slot.host)
        if t is not None:
            self._free(t, slot.host)

    def passed(self, slot: HostSlot) -> None:
        """The host will not use the turn it has now (dropped, held, nothing to ask,
        waiting for its address): the next host waiting gets it."""
        target = slot.hop_wait
        t = None if target is None else self._targets.get(target)
        if target is not None and t is not None and t.turn is slot:
            t.turn = None
            slot.hop_wait = None
            self._free(t, target)

    def set_aside(self, slot: HostSlot) -> None:
        """The host is held: it leaves the queue it waited in, and its turn."""
        self.passed(slot)
        slot.hop_wait = None

    def _free(self, t: Gate, target: str) -> None:
        """Give ``target``'s turn to the first host still waiting for it, unless a
        request to it is in flight (its end will) or another host has the turn."""
        own = self._own(target)
        if t.in_flight or t.turn is not None or (own is not None and own.in_flight):
            return
        waiting = t.waiting
        while waiting:
            other = waiting.popleft()
            if not waiting:
                t.waiting = None
            if other.hop_wait != target:
                continue  # it went since, or was held
            if not self._current(other) or other.in_flight:
                other.hop_wait = None
                continue  # dropped, or its lookup is in flight: it asks again after
            t.turn = other
            when = max(other.next_allowed, t.next_allowed)
            if own is not None and own is not other:
                when = max(when, own.next_allowed)
            if not other.armed or other.armed_at > when:
                self._push(other, when)
            return
