"""A ring made from another when members come and go is the ring a build makes: the
same points and owners, so every peer agrees on every owner whichever way it got there."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ubipy.ring import Ring
from ubipy.ring.ring import _merged

_IDS = st.text(alphabet="0123456789abcdef", min_size=1, max_size=6)


def _same(a: Ring, b: Ring) -> bool:
    return (a.members, list(a.points), a._owners, a._counts) == (
        b.members,
        list(b.points),
        b._owners,
        b._counts,
    )


@settings(max_examples=200, deadline=None)
@given(
    before=st.sets(_IDS, min_size=1, max_size=40),
    gone=st.sets(_IDS, max_size=6),
    new=st.sets(_IDS, max_size=6),
    vnodes=st.sampled_from([1, 3, 16, 256]),
)
def test_a_ring_made_from_another_is_the_ring_a_build_makes(
    before: set[str], gone: set[str], new: set[str], vnodes: int
) -> None:
    after = (before - gone) | new
    ring = Ring(before, vnodes)
    assert _same(ring.for_members(after), Ring(after, vnodes))


def test_equal_points_are_ordered_as_a_build_orders_them() -> None:
    """Two members' points never collide in practice (64 bits), but peers must agree
    even then: a build orders equal points by member id, and so does a merge."""
    merged = _merged([10, 20, 30], ["b", "b", "d"], [(20, "a"), (20, "c"), (30, "e")])
    assert list(zip(*merged, strict=True)) == [
        (10, "b"), (20, "a"), (20, "b"), (20, "c"), (30, "d"), (30, "e")
    ]  # fmt: skip


def test_a_death_among_a_thousand_is_the_ring_a_build_makes() -> None:
    thousand = Ring([f"{i:016x}" for i in range(1000)])
    assert _same(thousand.for_members(thousand.members[1:]), Ring(thousand.members[1:]))
    newcomer = [*thousand.members, "ffff"]
    assert _same(thousand.for_members(newcomer), Ring(newcomer))


@settings(max_examples=100, deadline=None)
@given(
    members=st.sets(_IDS, min_size=1, max_size=30),
    member=_IDS,
    heavy=st.floats(0.1, 3.0),
    vnodes=st.sampled_from([1, 2, 16, 256]),
    hosts=st.lists(st.text(max_size=12), min_size=1, max_size=50),
)
def test_what_a_member_owned_is_kept_without_the_ring(
    members: set[str], member: str, heavy: float, vnodes: int, hosts: list[str]
) -> None:
    """Holds keep what their peer owned under a ring (its arcs), not the ring: the same
    answer for every host, whoever the member (one not in the ring owns nothing, one
    alone owns all), whatever the weights."""
    ring = Ring(members, vnodes, weights={min(members): heavy})
    owned = ring.owned_by(member)
    hosts += [f"h{i}.synth.test" for i in range(200)]
    assert [owned.owns(h) for h in hosts] == [ring.owner(h) == member for h in hosts]


def test_a_weighted_ring_is_built_afresh_for_the_same_members() -> None:
    """for_members gives every member weight 1: the same members of a weighted ring
    were given back as they were, one of them with twice its points (a review)."""
    weighted = Ring(["a", "b"], weights={"a": 2.0})
    assert _same(weighted.for_members(["a", "b"]), Ring(["a", "b"]))
