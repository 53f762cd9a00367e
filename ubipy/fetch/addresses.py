"""The per-IP rule: one request in flight per address, ``--ip-delay`` between two.

Shared hosting puts many sites, thousands at times, on one server: the rule keeps a
crawl of all of them as gentle as a crawl of one. Hosts that come up while their
address is busy wait for it; when the request ends, the address waits its delay and
the hosts waiting for it compete again among the ready ones.

A host's address is the one its lookup gave (the DNS stage); a host not looked up
has none and is not held by the rule. No I/O and no clock, as the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ubipy.fetch.slots import HostSlot

__all__ = ["AddressRule"]


@dataclass(slots=True)
class _Address:
    in_flight: bool = False
    next_allowed: float = 0.0
    # Hosts that came up while a request to the address was in flight.
    waiting: list[HostSlot] = field(default_factory=list)


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
        self._addresses: dict[str, _Address] = {}

    def may_start(self, slot: HostSlot, now: float) -> bool:
        """Whether the host's address may take a request now; if not, the host waits
        for it (parked on the address, or back among the ready hosts at its time)."""
        ip = None if slot.address is None else self._addresses.get(slot.address)
        if ip is None:
            return True
        if ip.in_flight:
            ip.waiting.append(slot)
            return False
        if ip.next_allowed > now:
            self._push(slot, ip.next_allowed)
            return False
        return True

    def started(self, slot: HostSlot) -> None:
        """A request to the host starts: its address is busy until :meth:`ended`."""
        if slot.address is not None:
            self._addresses.setdefault(slot.address, _Address()).in_flight = True

    def ended(self, slot: HostSlot, now: float) -> None:
        """A request to the host ended: the address waits its delay, then the hosts
        waiting for it compete again (the heap picks the earliest)."""
        ip = None if slot.address is None else self._addresses.get(slot.address)
        if ip is None or not ip.in_flight:
            return
        ip.in_flight = False
        ip.next_allowed = now + self._delay
        waiting, ip.waiting = ip.waiting, []
        for other in waiting:
            if self._current(other) and not other.armed and not other.in_flight:
                self._push(other, max(other.next_allowed, ip.next_allowed))
