"""Which arcs of the circle changed owner between two rings.

A peer that sees the membership change asks this instead of re-hashing every host
it stores: it keeps each host's point, and the hosts to hand off are exactly those
whose point lies in an arc it used to own and no longer does.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from ubipy.ring.hashing import CIRCLE, member_points
from ubipy.ring.ring import Ring


@dataclass(frozen=True, slots=True)
class Arc:
    """The half-open arc ``[start, end)`` whose owner went from ``old`` to ``new``.

    ``start < end`` always: an arc that would wrap past zero is reported as two arcs,
    ``[s, CIRCLE)`` and ``[0, e)``, so each one is a plain range query on stored
    points. An owner is None when that ring had no members.
    """

    start: int
    end: int
    old_owner: str | None
    new_owner: str | None

    def __contains__(self, point: object) -> bool:
        return isinstance(point, int) and self.start <= point < self.end


def _owner_or_none(ring: Ring, point: int) -> str | None:
    return ring.owner_at(point) if ring.members else None


def _last_below(points: Sequence[int], point: int) -> int:
    """The largest point below ``point``, or -1 if there is none."""
    index = bisect_left(points, point) - 1
    return points[index] if index >= 0 else -1


def _changed_points(old: Ring, new: Ring) -> list[int]:
    """Every point held by a member whose points differ between the rings.

    A member's points are a function of its id and its point count alone, so a
    member with the same count in both rings contributes nothing: this touches
    the joiner's or the leaver's V points, not the whole circle.
    """
    changed: set[int] = set()
    for member in set(old.members) | set(new.members):
        counts = (old.point_count(member), new.point_count(member))
        if counts[0] != counts[1]:
            changed.update(member_points(member, max(counts)))
    return sorted(changed)


def diff(old: Ring, new: Ring) -> tuple[Arc, ...]:
    """The arcs, sorted by start and disjoint, where ``old`` and ``new`` disagree.

    Between consecutive points of the two rings together, each ring's owner is the
    member of the next point clockwise. That next point is shared, with the same
    owner, unless it belongs to a changed member, so only the interval just before
    each changed point can change hands. Touching arcs with the same change are
    merged, so the result is the same as comparing every interval of the circle.
    """
    candidates: set[tuple[int, int]] = set()
    for point in _changed_points(old, new):
        previous = max(_last_below(old.points, point), _last_below(new.points, point))
        if previous >= 0:
            candidates.add((previous, point))
            continue
        # The first point of the circle: its interval wraps, from the last point of
        # either ring through zero. Reported split at zero.
        if point > 0:
            candidates.add((0, point))
        last = max(ring.points[-1] for ring in (old, new) if ring.points)
        candidates.add((last, CIRCLE))
    arcs: list[Arc] = []
    for start, end in sorted(candidates):
        was = _owner_or_none(old, start)
        now = _owner_or_none(new, start)
        if was == now:
            continue
        last_arc = arcs[-1] if arcs else None
        if (
            last_arc
            and last_arc.end == start
            and (last_arc.old_owner, last_arc.new_owner) == (was, now)
        ):
            arcs[-1] = Arc(last_arc.start, end, was, now)
        else:
            arcs.append(Arc(start, end, was, now))
    return tuple(arcs)


def arc_of(arcs: tuple[Arc, ...], point: int) -> Arc | None:
    """The arc of ``diff()``'s result holding ``point``, or None if it did not move."""
    index = bisect_right(arcs, point, key=lambda arc: arc.start) - 1
    if index >= 0 and point in arcs[index]:
        return arcs[index]
    return None
