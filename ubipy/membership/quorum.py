"""Who may fetch while the network is split: a majority lease, as a pure class (no
I/O, no clock of its own; the driver passes ``now`` in).

SWIM cannot tell a dead peer from one cut off: during a partition each side
declares the other dead and, left alone, would take the other side's hosts over
while their owners, cut off from the peers but not from the web, go on fetching
them. So a peer fetches only while it holds a *lease*: within the last ``lease``
seconds it has heard directly (any authentic frame) from a strict majority of the
*base*, the last membership agreed while a majority was in sight, itself included.
An exact half holds the lease only if it includes the smallest id of the base (a
deterministic tie-break: of a 2|2 split one side goes on, and of a two-peer
cluster the peer with the smaller id).

The base changes only while the lease is held: a member that joins is added, one
declared dead or gone is removed. A side without a majority can therefore never
shrink the base to a majority of its own; the other side can, so a crashed
minority is still taken over and the cluster goes on shrinking one death at a
time.

Counting only members that membership holds alive or suspect (``live``) keeps a
side that declared the others dead from counting them again when their frames get
through before membership has taken them back: until then its ring still gives it
their hosts.

The other half of the rule is on the majority's side: it takes a lost member's
hosts over only ``fence(lease)`` after declaring it dead, by then any peer
that lost sight of the majority has stopped (with margin for clock rates, which
only time intervals depend on, never clock values).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

# How much faster one machine's clock may run than another's, as a rate.
CLOCK_RATE_MARGIN = 0.1
# On top: a frame in flight, a scheduler's late wake-up.
FENCE_SLACK = 1.0


def fence(lease: float) -> float:
    """How long after losing a member the majority waits before fetching its hosts:
    by then the member, if it is alive but cut off, has stopped fetching."""
    return lease * (1 + CLOCK_RATE_MARGIN) + FENCE_SLACK


@dataclass(frozen=True, slots=True)
class Sight:
    """What a peer sees of its base now."""

    heard: int  # base members heard from within the lease, self included
    size: int  # members of the base
    holds: bool  # whether that is a majority (or the tie-breaking half)

    def __str__(self) -> str:
        return f"hears from {self.heard} of {self.size} peers"


class Quorum:
    def __init__(self, self_id: str, base: Iterable[str], *, lease: float) -> None:
        if lease <= 0:
            raise ValueError("the lease must be positive")
        self.self_id = self_id
        self.lease = lease
        self._base = set(base) | {self_id}
        self._heard: dict[str, float] = {}
        self._live: frozenset[str] = frozenset({self_id})

    @property
    def base(self) -> frozenset[str]:
        return frozenset(self._base)

    def heard(self, member_id: str, now: float) -> None:
        """An authentic frame came from ``member_id``."""
        if now > self._heard.get(member_id, -math.inf):
            self._heard[member_id] = now

    def set_live(self, live: Iterable[str]) -> None:
        """The members membership holds alive or suspect now."""
        self._live = frozenset(live) | {self.self_id}

    def sight(self, now: float) -> Sight:
        counted = self._counted(now)
        return Sight(len(counted), len(self._base), self._holds(counted))

    def holds(self, now: float) -> bool:
        return self._holds(self._counted(now))

    def expires(self, now: float) -> float | None:
        """When the lease lapses if nothing more is heard; None if it is not held
        (or held with nobody else in the base: forever)."""
        counted = self._counted(now)
        if not self._holds(counted):
            return None
        ends = sorted((self._until(m), m) for m in counted if m != self.self_id)
        for end, member in ends:
            counted.discard(member)
            if not self._holds(counted):
                return end
        return None

    def last_heard(self) -> dict[str, float]:
        """The live base members but this one, and when each was last heard from (-inf:
        never): those to ask for a sign of life before the lease depends on them."""
        return {
            m: self._heard.get(m, -math.inf)
            for m in sorted(self._base & self._live)
            if m != self.self_id
        }

    def joined(self, member_id: str, now: float) -> bool:
        """A member joined; added to the base while the lease holds, and counted as
        heard from now (the base and the members in sight grow together: a lease held
        stays held while the newcomer's first answer is on its way). One already in
        the base (back after a partition) must answer first. True if the base
        changed."""
        if member_id in self._base or not self.holds(now):
            return False
        self._base.add(member_id)
        self.heard(member_id, now)
        return True

    def gone(self, member_id: str, now: float, *, left: bool = False) -> bool:
        """A member died, or ``left`` on purpose; removed from the base while the lease
        holds, and always if it left: a peer that said it leaves fetches nothing more
        (when a whole cluster stops, the last ones would otherwise lose their lease
        as the others go, and abandon what they have in flight). True if the base
        changed."""
        if member_id == self.self_id or member_id not in self._base:
            return False
        if not left and not self.holds(now):
            return False
        self._base.discard(member_id)
        return True

    def _counted(self, now: float) -> set[str]:
        counted = {m for m in self._base & self._live if m != self.self_id and self._until(m) > now}
        counted.add(self.self_id)
        return counted

    def _until(self, member_id: str) -> float:
        # The one expression for "in sight until": counting and expires() must agree
        # to the last bit, or a lease would expire "now" and never.
        return self._heard.get(member_id, -math.inf) + self.lease

    def _holds(self, counted: set[str]) -> bool:
        twice, size = 2 * len(counted), len(self._base)
        return twice > size or (twice == size and min(self._base) in counted)
