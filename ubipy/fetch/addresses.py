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
leaves the old one's queue. A request goes to the address of the host it lands on:
a host whose robots.txt was redirected to another host's (hops.py) waits for, and
holds, that host's address, when the scheduler knows it, not its own. A host never
waits in the queue of an address it will not use. No I/O and no clock, as the
scheduler.

After a request the address waits ``--ip-delay``, or what the server asked if longer:
the ending host's pace (its 503s' back-off among it) or Retry-After (the scheduler works
it out; a retry's back-off is the host's alone), and the address's own pace, which hears
every answer that came through any of its names. A server slow to answer, or answering
503 without a Retry-After, is paced as one: twenty names of a server answering 503 took
419 requests in ten minutes (each name its own run of strikes), where one name takes 23.
A site's Crawl-delay is that site's own: on shared hosting one site's
``Crawl-delay: 10`` would otherwise hold every other site on the address.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

from ubipy.fetch.gates import Gate, Gates
from ubipy.fetch.slots import HostSlot
from ubipy.fetch.throttle import Pace, ThrottleRules

__all__ = ["AddressRule"]


class AddressRule:
    """The addresses the scheduler's hosts resolved to, and who may use each when.

    ``push(slot, when)`` puts a host back among the ready ones at ``when``;
    ``current(slot)`` tells whether a host is still the scheduler's (not dropped);
    ``uses(slot)`` is the address the host's next request goes to (None: none known):
    its own, or the one of the host its robots.txt was redirected to (hops.py)."""

    def __init__(
        self,
        delay: float,
        push: Callable[[HostSlot, float], None],
        current: Callable[[HostSlot], bool],
        uses: Callable[[HostSlot], str | None],
        rules: ThrottleRules | None = None,
    ) -> None:
        """``rules``: how a server's pace turns into its delay (None: not paced)."""
        self._delay = delay
        self._rules = rules
        self._push = push
        self._current = current
        self._uses = uses
        self._addresses = Gates()
        # The hosts queued on an address for a hop (their robots.txt redirected to a
        # host on it), so that a host moving off it walks those, not the whole queue
        # (thousands of hosts on shared hosting, at every move a round robin answers).
        self._hops_waiting: dict[str, list[HostSlot]] = {}

    def __len__(self) -> int:
        return len(self._addresses)

    def may_start(self, slot: HostSlot, now: float, *, hop: bool = False) -> bool:
        """Whether the address the host's next request goes to may take it now; if
        not, the host waits for it (queued on the address, or back among the ready
        hosts at its time). ``hop``: the request goes to another host (hops.py)."""
        address = self._uses(slot)
        if slot.ip_wait is not None and slot.ip_wait != address:
            self.set_aside(slot)  # it waited for another address: never to use it
        ip = None if address is None else self._addresses.get(address)
        if address is None or ip is None:
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
                slot.ip_wait = address
                ip.waiting.appendleft(slot)
            elif slot.ip_wait != address:
                slot.ip_wait = address
                ip.waiting.append(slot)
            else:
                return False
            if hop:
                self._hop_waits(slot, address, len(ip.waiting))
            return False
        if ip.next_allowed > now:
            self._push(slot, ip.next_allowed)
            return False
        return True

    def has_turn(self, slot: HostSlot) -> bool:
        """Whether the host has the turn of the address it waited for."""
        ip = None if slot.ip_wait is None else self._addresses.get(slot.ip_wait)
        return ip is not None and ip.turn is slot

    def _hop_waits(self, slot: HostSlot, address: str, queued: int) -> None:
        """``slot`` queued on ``address`` (``queued`` places long) for a hop: noted for
        :meth:`moved`. Places gone stale (started, passed, held, dropped) go once
        they are many, so the list stays about as long as the queue."""
        hops = self._hops_waiting.setdefault(address, [])
        hops.append(slot)
        if len(hops) > 2 * queued + 16:
            hops[:] = {id(o): o for o in hops if o.ip_wait == address}.values()

    def started(self, slot: HostSlot) -> None:
        """A request of the host starts (after :meth:`may_start` said yes): the
        address it goes to is busy until :meth:`ended`."""
        address = self._uses(slot)
        if slot.ip_wait is not None and slot.ip_wait != address:
            self.set_aside(slot)
        slot.ip_wait = None  # its place in the queue, if it had one, is stale
        slot.ip = address
        if address is None:
            return
        ip = self._addresses.entry(address)
        ip.in_flight = True
        if ip.turn is slot:
            ip.turn = None

    def heard(
        self, slot: HostSlot, latency: float | None, status: int | None, asked: float | None
    ) -> None:
        """How the server answered the host's request (:meth:`Pace.heard`), on the pace
        of the address the request went to."""
        ip = None if slot.ip is None else self._addresses.get(slot.ip)
        if ip is None or self._rules is None:
            return
        if ip.pace is None:
            ip.pace = Pace()
        ip.pace.heard(latency, status, asked=asked, rules=self._rules)

    def ended(self, slot: HostSlot, now: float, server: float = -math.inf) -> None:
        """A request of the host ended: the address it went to waits its delay, or until
        ``server`` if later (the server's own wait, whichever of its names it came
        through), then the first host waiting for it gets its turn."""
        address, slot.ip = slot.ip, None
        ip = None if address is None else self._addresses.get(address)
        if address is None or ip is None or not ip.in_flight:
            return
        ip.in_flight = False
        if ip.pace is not None and self._rules is not None:
            server = max(server, now + ip.pace.delay(self._rules, 0.0))
        ip.next_allowed = max(now + self._delay, server)
        if ip.turn is None:
            self._give_turn(ip, address)
        self._addresses.sweep(now)

    def free_at(self, address: str) -> float:
        """When the address may next be asked, as far as this rule knows (-inf: now)."""
        ip = self._addresses.get(address)
        return -math.inf if ip is None else ip.next_allowed

    def defer(self, address: str, until: float) -> None:
        """No request to ``address`` before ``until`` (another peer has it, and its
        lease's owner said how long it would be): its hosts wait, not ask again."""
        ip = self._addresses.entry(address)
        ip.next_allowed = max(ip.next_allowed, until)

    def resolved(self, slot: HostSlot, address: str | None) -> None:
        """The host's lookup answered ``address`` (None: the host is held by no
        address, ``--no-per-ip``). A host that waited for an address
        it will not use now leaves its queue: given that address's turn later, it
        would use it on another, and the address would wait for it for ever, its
        other hosts with it. Hosts whose robots.txt was redirected to this one wait
        for its old address no more either (:meth:`moved`)."""
        old, slot.address = slot.address, address
        if slot.ip_wait is not None and slot.ip_wait != self._uses(slot):
            self.set_aside(slot)
        if old is not None and old != address:
            self.moved(old)

    def moved(self, address: str) -> None:
        """A host on ``address`` moved or was dropped: the hosts waiting for it that
        will not use it now (their robots.txt was redirected to that host) leave its
        queue and its turn, and come up again to wait for what they will use."""
        ip = self._addresses.get(address)
        if ip is None:
            return
        kept: list[HostSlot] = []
        for other in self._hops_waiting.pop(address, ()):
            if other.ip_wait != address or other is ip.turn:
                continue  # a stale place (the one with the turn: below)
            if self._uses(other) == address:
                kept.append(other)
                continue
            # Its place in the queue is stale now, and skipped when reached.
            other.ip_wait = None
            if self._current(other) and not other.in_flight:
                when = other.next_allowed
                if not other.armed or other.armed_at > when:
                    self._push(other, when)
        if kept:
            self._hops_waiting[address] = kept
        if ip.turn is not None and self._uses(ip.turn) != address:
            self.passed(ip.turn)  # it comes up anyway: it was put back for its turn

    def set_aside(self, slot: HostSlot) -> None:
        """The host is held (see the scheduler's ``hold``): it leaves its address's
        queue, and its turn, if it had it; released, it comes up as any host does."""
        self.passed(slot)
        slot.ip_wait = None

    def passed(self, slot: HostSlot) -> None:
        """The host will not use the address whose turn it has now (dropped, held,
        looked up again, nothing to ask): the next host waiting gets it."""
        address = slot.ip_wait
        ip = None if address is None else self._addresses.get(address)
        if address is not None and ip is not None and ip.turn is slot:
            ip.turn = None
            slot.ip_wait = None
            if not ip.in_flight:
                self._give_turn(ip, address)

    def _give_turn(self, ip: Gate, address: str) -> None:
        """The first host still waiting for ``ip`` goes back among the ready hosts,
        due when the address's delay is over (or its own, if later)."""
        waiting = ip.waiting
        while waiting:
            other = waiting.popleft()
            if not waiting:
                ip.waiting = None
                self._hops_waiting.pop(address, None)
            if other.ip_wait != address:
                continue  # it had the address since, or was held, or moved
            if not self._current(other) or other.in_flight:
                other.ip_wait = None
                continue
            if self._uses(other) != address:
                # It will not use it (no path leaves one so: a safety net): it
                # comes up again to wait for what it will use.
                other.ip_wait = None
                if not other.armed or other.armed_at > other.next_allowed:
                    self._push(other, other.next_allowed)
                continue
            ip.turn = other
            when = max(other.next_allowed, ip.next_allowed)
            # Armed already, it is among the ready hosts (new links) unless it was
            # armed for later (a plan put its page off): then the turn would wait for it.
            if not other.armed or other.armed_at > when:
                self._push(other, when)
            return
