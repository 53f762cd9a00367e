"""Properties every peer relies on, checked over generated member sets and hosts."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from hypothesis import given
from hypothesis import strategies as st

from ubipy.ring import ModuloPlacement, Placement, Ring, TwoLevelPlacement

member_id = st.text(alphabet="abcdef0123456789-.é", min_size=1, max_size=10)
members = st.lists(member_id, min_size=1, max_size=8, unique=True)
hosts = st.lists(st.text(max_size=30), min_size=1, max_size=40)
# Small V keeps examples fast; the properties hold for any V, and V=1 is the
# hardest case for ties and wrap-around.
vnodes = st.sampled_from([1, 3, 16, 64])

Factory = Callable[[Sequence[str]], Placement]
SCHEMES: list[Factory] = [
    lambda ids: Ring(ids, vnodes=16),
    ModuloPlacement,
    TwoLevelPlacement,
]
scheme = st.sampled_from(SCHEMES)


@given(scheme, members, hosts, st.randoms(use_true_random=False))
def test_member_order_does_not_matter(
    make: Factory, ids: list[str], keys: list[str], rnd: random.Random
) -> None:
    shuffled = list(ids)
    rnd.shuffle(shuffled)
    first, second = make(ids), make(shuffled + ids[:1])
    assert [first.owner(h) for h in keys] == [second.owner(h) for h in keys]


@given(members, member_id, hosts, vnodes)
def test_a_join_moves_hosts_only_to_the_joiner(
    ids: list[str], joiner: str, keys: list[str], v: int
) -> None:
    before, after = Ring(ids, vnodes=v), Ring([*ids, joiner], vnodes=v)
    for host in keys:
        if before.owner(host) != after.owner(host):
            assert after.owner(host) == joiner


@given(members, hosts, vnodes, st.data())
def test_a_leave_moves_only_the_leavers_hosts(
    ids: list[str], keys: list[str], v: int, data: st.DataObject
) -> None:
    leaver = data.draw(st.sampled_from(ids))
    before = Ring(ids, vnodes=v)
    after = Ring([m for m in ids if m != leaver], vnodes=v)
    for host in keys:
        if before.owner(host) != leaver:
            assert after.members == () or after.owner(host) == before.owner(host)


@given(members, hosts, vnodes, st.dictionaries(member_id, st.floats(0, 4)))
def test_weights_keep_the_join_property(
    ids: list[str], keys: list[str], v: int, weights: dict[str, float]
) -> None:
    joiner = "joiner"
    before = Ring([m for m in ids if m != joiner], vnodes=v, weights=weights)
    after = Ring([*ids, joiner], vnodes=v, weights=weights)
    for host in keys:
        assert after.owner(host) in (before.owner(host), joiner)


@given(scheme, members, hosts, st.integers(0, 10))
def test_successors_are_distinct_and_start_with_the_owner(
    make: Factory, ids: list[str], keys: list[str], n: int
) -> None:
    placement = make(ids)
    for host in keys:
        found = placement.successors(host, n)
        assert len(found) == min(n, len(ids))
        assert len(set(found)) == len(found)
        assert set(found) <= set(ids)
        if n:
            assert found[0] == placement.owner(host)


@given(members, hosts, vnodes)
def test_ring_successors_are_the_owners_after_leaves(
    ids: list[str], keys: list[str], v: int
) -> None:
    # The next successor is who takes the host over when the ones before it leave,
    # which is what makes successors usable as a fallback order.
    ring = Ring(ids, vnodes=v)
    for host in keys:
        order = ring.successors(host, len(ids))
        for k in range(1, len(order)):
            assert Ring([m for m in ids if m not in order[:k]], vnodes=v).owner(host) == order[k]


@given(st.sampled_from([ModuloPlacement, TwoLevelPlacement]), members, hosts)
def test_thesis_successors_are_the_owners_after_leaves(
    make: Callable[[Sequence[str]], ModuloPlacement | TwoLevelPlacement],
    ids: list[str],
    keys: list[str],
) -> None:
    roster = sorted(ids)
    for host in keys:
        order = make(ids).successors(host, len(ids))
        for k in range(1, len(order)):
            live = [m for m in ids if m not in order[:k]]
            if make is TwoLevelPlacement:
                placement: Placement = TwoLevelPlacement(live, roster=roster)
            else:
                placement = ModuloPlacement(live)
            assert placement.owner(host) == order[k]


@given(members, hosts, st.data())
def test_two_level_one_leave_from_a_full_table_moves_only_the_leavers_hosts(
    ids: list[str], keys: list[str], data: st.DataObject
) -> None:
    # The property the thesis's second level was designed for (its figure 4.3).
    leaver = data.draw(st.sampled_from(ids))
    before = TwoLevelPlacement(ids, roster=ids)
    after = TwoLevelPlacement([m for m in ids if m != leaver], roster=ids)
    for host in keys:
        if before.owner(host) != leaver and after.members:
            assert after.owner(host) == before.owner(host)
