"""diff(): the changed arcs are exactly where the owner changed."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from ubipy.ring import CIRCLE, Arc, Ring, arc_of, diff

member_id = st.text(alphabet="abcxyz0123456789", min_size=1, max_size=6)
member_sets = st.lists(member_id, max_size=6, unique=True)
hosts = st.lists(st.text(max_size=20), min_size=1, max_size=60)
vnodes = st.sampled_from([1, 2, 8, 32])


def brute_diff(old: Ring, new: Ring) -> tuple[Arc, ...]:
    """Compare the owners on every interval of the circle, then merge."""

    def owner(ring: Ring, point: int) -> str | None:
        return ring.owner_at(point) if ring.members else None

    bounds = sorted({0, *old.points, *new.points})
    arcs: list[Arc] = []
    for start, end in zip(bounds, [*bounds[1:], CIRCLE], strict=True):
        was, now = owner(old, start), owner(new, start)
        if was == now:
            continue
        if (
            arcs
            and arcs[-1].end == start
            and (arcs[-1].old_owner, arcs[-1].new_owner)
            == (
                was,
                now,
            )
        ):
            arcs[-1] = Arc(arcs[-1].start, end, was, now)
        else:
            arcs.append(Arc(start, end, was, now))
    return tuple(arcs)


def check_shape(arcs: tuple[Arc, ...]) -> None:
    for arc in arcs:
        assert 0 <= arc.start < arc.end <= CIRCLE
        assert arc.old_owner != arc.new_owner
    for left, right in itertools.pairwise(arcs):
        assert left.end <= right.start
        # Touching arcs with the same change would have been merged.
        if left.end == right.start:
            assert (left.old_owner, left.new_owner) != (right.old_owner, right.new_owner)


@given(member_sets, member_sets, hosts, vnodes)
def test_owner_changed_iff_the_point_is_in_a_changed_arc(
    old_ids: list[str], new_ids: list[str], keys: list[str], v: int
) -> None:
    old, new = Ring(old_ids, vnodes=v), Ring(new_ids, vnodes=v)
    arcs = diff(old, new)
    check_shape(arcs)
    assert arcs == brute_diff(old, new)
    for host in keys:
        was = old.owner(host) if old_ids else None
        now = new.owner(host) if new_ids else None
        arc = arc_of(arcs, Ring.point(host))
        if was == now:
            assert arc is None
        else:
            assert arc is not None
            assert (arc.old_owner, arc.new_owner) == (was, now)


@given(
    member_sets,
    member_sets,
    vnodes,
    st.dictionaries(member_id, st.floats(0, 3)),
    st.dictionaries(member_id, st.floats(0, 3)),
)
def test_diff_matches_comparing_every_interval(
    old_ids: list[str],
    new_ids: list[str],
    v: int,
    old_weights: dict[str, float],
    new_weights: dict[str, float],
) -> None:
    old = Ring(old_ids, vnodes=v, weights=old_weights)
    new = Ring(new_ids, vnodes=v, weights=new_weights)
    assert diff(old, new) == brute_diff(old, new)


@given(member_sets, vnodes)
def test_boundaries_belong_to_the_right_arc(ids: list[str], v: int) -> None:
    # Probe the exact points and their neighbours, where off-by-one errors live.
    old, new = Ring(ids, vnodes=v), Ring([*ids, "joiner"], vnodes=v)
    arcs = diff(old, new)
    check_shape(arcs)
    probes = {0, CIRCLE - 1}
    for p in new.points:
        probes.update({p - 1, p, p + 1})
    for point in sorted(q for q in probes if 0 <= q < CIRCLE):
        was = old.owner_at(point) if ids else None
        now = new.owner_at(point)
        arc = arc_of(arcs, point)
        assert (arc is None) == (was == now)
        if arc is not None:
            assert (arc.old_owner, arc.new_owner) == (was, now)


def test_a_join_only_gives_arcs_to_the_joiner() -> None:
    ids = [f"peer-{i}" for i in range(8)]
    arcs = diff(Ring(ids), Ring([*ids, "peer-8"]))
    assert {arc.new_owner for arc in arcs} == {"peer-8"}
    share = sum(arc.end - arc.start for arc in arcs) / CIRCLE
    assert 0.08 <= share <= 0.14


def test_a_leave_only_takes_the_leavers_arcs() -> None:
    ids = [f"peer-{i}" for i in range(8)]
    arcs = diff(Ring(ids), Ring(ids[1:]))
    assert {arc.old_owner for arc in arcs} == {"peer-0"}
    # Neighbouring arcs of the leaver that pass to the same member are merged.
    assert 0 < len(arcs) <= Ring(ids).point_count("peer-0")


def test_identical_rings_have_no_diff() -> None:
    ring = Ring(["a", "b", "c"])
    assert diff(ring, Ring(["c", "b", "a"])) == ()
    assert diff(Ring([]), Ring([])) == ()


def test_from_and_to_an_empty_ring_the_whole_circle_changes() -> None:
    ring = Ring(["a", "b"], vnodes=4)
    for arcs in (diff(Ring([]), ring), diff(ring, Ring([]))):
        assert arcs[0].start == 0
        assert arcs[-1].end == CIRCLE
        assert sum(arc.end - arc.start for arc in arcs) == CIRCLE


def test_a_wrapping_arc_is_split_at_zero() -> None:
    old = Ring(["a"], vnodes=1)
    # A joiner whose single point comes first on the circle owns the arc that wraps:
    # from a's point up through zero to its own.
    joiner = next(f"b{i}" for i in range(1000) if Ring([f"b{i}"], 1).points[0] < old.points[0])
    new = Ring(["a", joiner], vnodes=1)
    (joiner_point,) = Ring([joiner], 1).points
    assert diff(old, new) == (
        Arc(0, joiner_point, "a", joiner),
        Arc(old.points[0], CIRCLE, "a", joiner),
    )


def test_arc_membership() -> None:
    arc = Arc(0, 5, "a", "b")
    assert 0 in arc
    assert 4 in arc
    assert 5 not in arc
    assert "x" not in arc
