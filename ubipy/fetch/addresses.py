"""The per-IP rule: one request in flight per address, ``--ip-delay`` between two.

Shared hosting puts many sites, thousands at times, on one server: the rule keeps a
crawl of all of them as gentle as a crawl of one. Hosts that come up while their
address is busy, or others wait for it, queue for it, first come first served, and
get it one at a time: when the address is free, the first of them has the ``turn``
(it is put back among the ready hosts, due when the address's delay is over) and
passes it on if it does not use it. Handing the address to all of them at once made
every request cost a pass over every host behind it, and under a ranked order a scan
of each one's window (``python bench/shared_ip.py``: 10 ms a request for a thousand
hosts under ``opic``).

A host's address is the one its lookup gave (the DNS stage); a host not looked up
has none and is not held by the rule, and one looked up again at another address
leaves the old one's queue. No I/O and no clock, as the scheduler.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from ubipy.fetch.gates import Gate, Gates
from ubipy.fetch.slots import HostSlot

__all__ = ["AddressRule"]


class AddressRule:
    """The addresses the scheduler's hosts resolved to, and who may use each when.

    ``push(slot, when)`` puts a host back among the ready ones at ``when``;
    ``current(slot)`` tells whether a host is still the scheduler's (not dropped)."""

    def __init__(
        self,
        delay: float,
        push: Callable[[HostSlot, float], None],
        current: Callable[[HostSlot], bool],
    ) -> None:
        self._delay = delay
        self._push = push
        self._current = current
        self._addresses = Gates()

    def __len__(self) -> int:
        return len(self._addresses)

    def may_start(self, slot: HostSlot, now: float) -> bool:
        """Whether the host's address may take a request now; if not, the host waits
        for it (queued on the address, or back among the ready hosts at its time)."""
        ip = self._of(slot)
        if ip is None:
            return True
        if ip.in_flight or (ip.turn is not None and ip.turn is not slot):
            # Another host has it, or has the next turn: this one queues, so that a
            # host back at once (or, under a ranked order, a richer one) does not
            # take the address again and again from those waiting. The host whose
            # turn it was keeps its place at the head of the queue; one already
            # queued (and put back among the ready hosts by new links since) keeps
            # the place it has.
            if ip.waiting is None:
                ip.waiting = deque()
            if ip.turn is slot:
                ip.turn = None
                slot.waits_for_ip = True
                ip.waiting.appendleft(slot)
            elif not slot.waits_for_ip:
                slot.waits_for_ip = True
                ip.waiting.append(slot)
            return False
        if ip.next_allowed > now:
            self._push(slot, ip.next_allowed)
            return False
        return True

    def started(self, slot: HostSlot) -> None:
        """A request to the host starts: its address is busy until :meth:`ended`."""
        if slot.address is None:
            return
        ip = self._entry(slot.address)
        ip.in_flight = True
        slot.waits_for_ip = False  # its place in the queue, if it had one, is stale
        if ip.turn is slot:
            ip.turn = None

    def ended(self, slot: HostSlot, now: float) -> None:
        """A request to the host ended: its address waits its delay, then the first
        host waiting for it gets its turn."""
        ip = self._of(slot)
        if ip is None or not ip.in_flight:
            return
        ip.in_flight = False
        ip.next_allowed = now + self._delay
        if ip.turn is None:
            self._give_turn(ip)
        self._addresses.sweep(now)

    def defer(self, address: str, until: float) -> None:
        """No request to ``address`` before ``until`` (another peer has it, and its
        lease's owner said how long it would be): its hosts wait, not ask again."""
        ip = self._entry(address)
        ip.next_allowed = max(ip.next_allowed, until)

    def resolved(self, slot: HostSlot, address: str) -> None:
        """The host's lookup answered ``address``. A host that moved leaves its old
        address's queue first: given that address's turn later, it would use it on
        the new one, and the old address would wait for it for ever, its other hosts
        with it."""
        if slot.address is not None and slot.address != address:
            self.set_aside(slot)
        slot.address = address

    def set_aside(self, slot: HostSlot) -> None:
        """The host is held (see the scheduler's ``hold``): it leaves its address's
        queue, and its turn, if it had it; released, it comes up as any host does."""
        slot.waits_for_ip = False
        self.passed(slot)

    def passed(self, slot: HostSlot) -> None:
        """The host will not use its address now (dropped, held, looked up again,
        nothing to ask): if it had the address's turn, the next host waiting gets it."""
        ip = self._of(slot)
        if ip is not None and ip.turn is slot:
            ip.turn = None
            if not ip.in_flight:
                self._give_turn(ip)

    def _of(self, slot: HostSlot) -> Gate | None:
        """The host's address, if it has one and the rule knows it."""
        return None if slot.address is None else self._addresses.get(slot.address)

    def _entry(self, address: str) -> Gate:
        """The address, made if the rule does not know it (or swept it)."""
        return self._addresses.entry(address)

    def _give_turn(self, ip: Gate) -> None:
        """The first host still waiting for ``ip`` goes back among the ready hosts,
        due when the address's delay is over (or its own, if later)."""
        waiting = ip.waiting
        while waiting:
            other = waiting.popleft()
            if not waiting:
                ip.waiting = None
            if not other.waits_for_ip:
                continue  # it had the address since, or was held
            if self._addresses.get(other.address or "") is not ip:
                continue  # it moved, and may wait for its new address: its place there stands
            other.waits_for_ip = False
            if not self._current(other) or other.in_flight:
                continue
            ip.turn = other
            when = max(other.next_allowed, ip.next_allowed)
            # Armed already, it is among the ready hosts (new links) unless it was
            # armed for later (a plan put its page off): then the turn would wait for it.
            if not other.armed or other.armed_at > when:
                self._push(other, when)
            return
