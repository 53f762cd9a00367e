"""Consistent hashing with virtual nodes: the placement ubipy uses.

Each member id yields V points on a 64-bit circle; a host belongs to the member of
the first point strictly clockwise of the host's own point, so a point at ``q``
owns the half-open arc ``[previous point, q)``. Adding a member only carves arcs
out of others' ranges and removing one only hands its arcs to the next points, which
is why a join or a leave moves no host between two members that stayed.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from typing import Final, TypeVar

from xxhash import xxh3_64_intdigest

from ubipy.ring.hashing import CIRCLE, HOST_SEED, host_point, member_points
from ubipy.ring.placement import EmptyRingError, check_count, normalise_members

#: Virtual points per member at weight 1, from bench/ring_balance.py (docs/ring.md):
#: the smallest V in the sweep whose 99th percentile over random id sets keeps
#: max/mean hosts <= 1.2 at N=8 with every join moving 8-14% of hosts. Part of the
#: protocol: peers with different V disagree on owners.
DEFAULT_VNODES: Final = 256

T = TypeVar("T")


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

    def owned_by(self, member: str) -> Owned:
        """What ``member`` owns in this ring, kept without it (see :class:`Owned`)."""
        return Owned(self, member)

    def for_members(self, members: Iterable[str]) -> Ring:
        """The ring of ``members`` (each at weight 1, this ring's vnodes): the very ring
        ``Ring(members)`` builds, made from this one when few members differ. A build
        hashes and sorts every member's points: 0.4 s at N = 1000, and a cluster told
        of a thousand members (a push-pull's worth) made one at every death among them,
        its loop starved for minutes (QA). Here only the members that came or went are
        hashed, and the rest is copied in slices."""
        wanted = normalise_members(members)
        uniform = all(count == self._vnodes for count in self._counts.values())
        if wanted == self._members and uniform:
            return self
        keep = set(wanted)
        gone = [m for m in self._members if m not in keep]
        new = [m for m in wanted if m not in self._counts]
        if not uniform or not self._points or len(gone) + len(new) > max(8, len(wanted) // 8):
            return Ring(wanted, self._vnodes)
        points, owners = self._points, self._owners[:-1]
        drop = _indices(points, owners, gone, self._vnodes)
        points, owners = _without(points, drop), _without(owners, drop)
        added = sorted((p, m) for m in new for p in member_points(m, self._vnodes))
        points, owners = _merged(points, owners, added)
        ring = Ring.__new__(Ring)
        ring._members, ring._vnodes = wanted, self._vnodes
        ring._counts = dict.fromkeys(wanted, self._vnodes)
        ring._points = points
        ring._owners = [*owners, owners[0]] if owners else []
        return ring


def _indices(points: list[int], owners: list[str], members: list[str], count: int) -> list[int]:
    """Where the ``count`` points of each of ``members`` are (an equal point of another
    member beside one of theirs is told apart by its owner)."""
    found: set[int] = set()
    for member in members:
        for point in member_points(member, count):
            i = bisect_left(points, point)
            while owners[i] != member or i in found:  # two equal points of its own
                i += 1
            found.add(i)
    return sorted(found)


def _without(items: list[T], drop: list[int]) -> list[T]:
    """``items`` less those at the sorted indices ``drop``, copied in slices."""
    out: list[T] = []
    start = 0
    for i in drop:
        out += items[start:i]
        start = i + 1
    out += items[start:]
    return out


def _merged(
    points: list[int], owners: list[str], added: list[tuple[int, str]]
) -> tuple[list[int], list[str]]:
    """The sorted ``added`` (point, member) put in place, an equal point after those of
    smaller member ids, as a build's stable sort puts it."""
    out_points: list[int] = []
    out_owners: list[str] = []
    start = 0
    for point, member in added:
        i = max(bisect_left(points, point), start)
        while i < len(points) and points[i] == point and owners[i] < member:
            i += 1
        out_points += points[start:i]
        out_owners += owners[start:i]
        out_points.append(point)
        out_owners.append(member)
        start = i
    out_points += points[start:]
    out_owners += owners[start:]
    return out_points, out_owners


class Owned:
    """The positions of the circle one member owns in a ring, kept without the ring:
    its arcs, two integers each, where a ring holds every member's points. A hold on
    the hosts a peer gained kept the whole old ring, 25 MB at N = 2000, one a ring
    change, for minutes (QA: 2.7 GB)."""

    __slots__ = ("_ends", "_starts")

    def __init__(self, ring: Ring, member: str) -> None:
        points = ring._points
        arcs: list[tuple[int, int]] = []
        count = ring.point_count(member)
        for i in _indices(points, ring._owners, [member], count) if count else ():
            # The arc [previous point, this point); the first point's wraps round.
            if i > 0:
                arcs.append((points[i - 1], points[i]))
            else:
                arcs += [(0, points[0]), (points[-1], CIRCLE)]
        arcs = sorted(arc for arc in arcs if arc[0] < arc[1])
        self._starts = [start for start, _ in arcs]
        self._ends = [end for _, end in arcs]

    def owns(self, host: str) -> bool:
        """Whether the member owned ``host`` (as ``ring.owner(host) == member`` was)."""
        point = host_point(host)
        i = bisect_right(self._starts, point) - 1
        return i >= 0 and point < self._ends[i]
