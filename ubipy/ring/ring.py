"""Consistent hashing with virtual nodes: the placement ubipy uses.

Each member id yields V points on a 64-bit circle; a host belongs to the member of
the first point strictly clockwise of the host's own point, so a point at ``q``
owns the half-open arc ``[previous point, q)``. Adding a member only carves arcs
out of others' ranges and removing one only hands its arcs to the next points, which
is why a join or a leave moves no host between two members that stayed.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from xxhash import xxh3_64_intdigest

from ubipy.ring.hashing import HOST_SEED, host_point, member_points
from ubipy.ring.placement import EmptyRingError, check_count, normalise_members

#: Virtual points per member at weight 1, from bench/ring_balance.py (docs/ring.md):
#: the smallest V in the sweep whose 99th percentile over random id sets keeps
#: max/mean hosts <= 1.2 at N=8 with every join moving 8-14% of hosts. Part of the
#: protocol: peers with different V disagree on owners.
DEFAULT_VNODES: Final = 256


def point_count(vnodes: int, weight: float) -> int:
    """Points for a member of ``weight``: ``round(vnodes * weight)``, at least one.

    At least one so that a member with a tiny weight is still reachable as a
    successor; Python's round-half-even is IEEE-exact, so peers agree on it.
    """
    if not math.isfinite(weight) or weight < 0:
        raise ValueError(f"weights must be finite and >= 0, got {weight!r}")
    return max(1, round(vnodes * weight))


class Ring:
    """Owners of hosts by consistent hashing; immutable once built.

    ``weights`` maps a member to its capacity (1.0 when absent); ids in ``weights``
    that are not members are ignored, so one capacity table can serve every
    membership view. Duplicate member ids are collapsed.
    """

    __slots__ = ("_counts", "_members", "_owners", "_points", "_vnodes")

    _members: tuple[str, ...]
    _vnodes: int
    _counts: dict[str, int]
    _points: list[int]
    _owners: list[str]

    def __init__(
        self,
        members: Iterable[str],
        vnodes: int = DEFAULT_VNODES,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        if vnodes < 1:
            raise ValueError(f"vnodes must be >= 1, got {vnodes}")
        self._members = normalise_members(members)
        self._vnodes = vnodes
        weights = weights or {}
        self._counts = {m: point_count(vnodes, weights.get(m, 1.0)) for m in self._members}
        flat_points: list[int] = []
        flat_owners: list[str] = []
        for member in self._members:
            points = member_points(member, self._counts[member])
            flat_points += points
            flat_owners += [member] * len(points)
        # The flat lists are in member-id order and sorted() is stable, so a 64-bit
        # collision is broken by member id: the smaller id keeps the arc and the
        # other point owns the empty arc [q, q). Sorting indices by point is faster
        # than sorting (point, member) tuples.
        order = sorted(range(len(flat_points)), key=flat_points.__getitem__)
        self._points = [flat_points[i] for i in order]
        self._owners = [flat_owners[i] for i in order]
        if self._owners:
            # A sentinel for hosts past the last point, which wrap to the first one,
            # so owner() needs no modulo or branch.
            self._owners.append(self._owners[0])

    def __repr__(self) -> str:
        return f"Ring({len(self._members)} members, vnodes={self._vnodes})"

    @property
    def members(self) -> tuple[str, ...]:
        return self._members

    @property
    def key(self) -> str:
        """The members, sorted, comma-joined: how a peer names the ring it swept under
        (HANDOFF_DONE), and another tells whether it is its own."""
        return ",".join(self._members)

    @property
    def vnodes(self) -> int:
        return self._vnodes

    @property
    def points(self) -> Sequence[int]:
        """All virtual points, sorted; a read-only view for diffs and tests."""
        return self._points

    def point_count(self, member: str) -> int:
        """How many virtual points ``member`` has (0 for a non-member)."""
        return self._counts.get(member, 0)

    @staticmethod
    def point(host: str) -> int:
        """The host's position on the circle."""
        return host_point(host)

    def owner_at(self, point: int) -> str:
        """The member owning the circle position ``point``."""
        try:
            return self._owners[bisect_right(self._points, point)]
        except IndexError:
            raise EmptyRingError() from None

    def owner(self, host: str) -> str:
        # The hash is inlined rather than calling host_point(): this is the crawler's
        # hottest call and a Python-level call costs about as much as the bisect.
        try:
            return self._owners[
                bisect_right(self._points, xxh3_64_intdigest(host.encode("utf-8"), seed=HOST_SEED))
            ]
        except IndexError:
            raise EmptyRingError() from None

    def successors(self, host: str, n: int) -> list[str]:
        """The first ``n`` distinct members clockwise from the host (all, if fewer)."""
        check_count(n)
        if n == 0:
            return []
        points = self._points
        if not points:
            raise EmptyRingError()
        want = min(n, len(self._members))
        start = bisect_right(points, host_point(host))
        size = len(points)
        found: list[str] = []
        seen: set[str] = set()
        owners = self._owners
        for step in range(size):
            member = owners[(start + step) % size]
            if member not in seen:
                seen.add(member)
                found.append(member)
                if len(found) == want:
                    break
        return found
