"""What the per-IP rule (:mod:`ubipy.fetch.addresses`) and the robots.txt hop rule
(:mod:`ubipy.fetch.hops`) keep of each thing one request at a time may use, with a
delay between two: an address, or a host other hosts' robots.txt redirect to."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ubipy.fetch.slots import HostSlot
from ubipy.fetch.throttle import Pace

__all__ = ["Gate", "Gates"]

# Gates kept before the first sweep of those with nothing left to say; after a sweep,
# twice as many as it kept (so a sweep costs O(1) a request, amortised).
_SWEEP_AT = 1024


@dataclass(slots=True)
class Gate:
    in_flight: bool = False
    next_allowed: float = 0.0
    # Hosts that came up while a request was in flight; an entry that no longer waits
    # for this gate (the rule tells how) is stale and skipped. Made when first needed:
    # an empty deque takes 760 bytes, and a crawl meets a gate for most of its hosts,
    # few of them shared.
    waiting: deque[HostSlot] | None = None
    # The waiting host put back among the ready ones to have the gate next.
    turn: HostSlot | None = None
    # An address's server as heard through any of its names (addresses.py).
    pace: Pace | None = None


class Gates:
    """Gates by key, forgetting the free ones past their delay that nobody waits for:
    one per host ever looked up would otherwise stay for the whole crawl."""

    __slots__ = ("_gates", "_sweep_at")

    def __init__(self) -> None:
        self._gates: dict[str, Gate] = {}
        self._sweep_at = _SWEEP_AT

    def __len__(self) -> int:
        return len(self._gates)

    def get(self, key: str) -> Gate | None:
        return self._gates.get(key)

    def entry(self, key: str) -> Gate:
        """The gate, made if unknown (or swept)."""
        gate = self._gates.get(key)
        if gate is None:
            gate = self._gates[key] = Gate()
        return gate

    def sweep(self, now: float) -> None:
        """Forget what has nothing left to say, once the gates have doubled."""
        if len(self._gates) < self._sweep_at:
            return
        self._gates = {
            k: g
            for k, g in self._gates.items()
            if g.in_flight
            or g.next_allowed > now
            or g.waiting
            or g.turn is not None
            # A server in a run of strikes: its next answer counts on from there.
            or (g.pace is not None and g.pace.strikes > 0)
        }
        self._sweep_at = max(_SWEEP_AT, 2 * len(self._gates))
