"""The ring's contract on concrete cases: edges, weights, pinned hash values."""

from __future__ import annotations

from collections import Counter

import pytest

from ubipy.ring import (
    CIRCLE,
    DEFAULT_VNODES,
    Arc,
    EmptyRingError,
    ModuloPlacement,
    Placement,
    Ring,
    TwoLevelPlacement,
    diff,
    host_point,
)
from ubipy.ring.hashing import member_points
from ubipy.ring.ring import point_count

HOSTS = [f"h{i:05d}.synth.test" for i in range(20_000)]
PEERS = ["alpha", "bravo", "charlie", "delta"]


def test_every_scheme_is_a_placement() -> None:
    for placement in (Ring(PEERS), ModuloPlacement(PEERS), TwoLevelPlacement(PEERS)):
        assert isinstance(placement, Placement)
        assert placement.members == tuple(sorted(PEERS))


def test_host_points_are_pinned() -> None:
    # These numbers are the wire contract between peers: if this test fails, every
    # host in every running cluster would change owner on upgrade.
    assert host_point("h003.synth.test") == host_point("h003.synth.test")
    assert host_point("example.com:8080") == 0x7C8CBE4CE3EC1CFE
    assert host_point("h003.synth.test") == 0xFF9AAE0231A04E46
    assert host_point("bücher.example") == 0x9244BA8D73DD7B59
    assert member_points("alpha", 2) == [0x710CF3AB0577D49D, 0x9ACCF9E49203AB3C]


def test_owners_are_pinned() -> None:
    ring = Ring(PEERS, vnodes=256)
    hosts = ["h003.synth.test", "example.com:8080", "bücher.example", "a", "b", "c"]
    assert [ring.owner(h) for h in hosts] == [
        "bravo",
        "delta",
        "alpha",
        "alpha",
        "bravo",
        "bravo",
    ]


def test_a_ring_s_key_names_its_members_whatever_their_order() -> None:
    """A HANDOFF_DONE names the ring its sender swept under; the receiver compares it
    with its own ring's key."""
    assert Ring(["b", "a", "c", "a"]).key == Ring(["c", "b", "a"]).key == "a,b,c"
    assert Ring(["a", "b"]).key != Ring(["a", "b", "c"]).key


def test_empty_ring_raises_a_clear_error() -> None:
    for placement in (Ring([]), ModuloPlacement([]), TwoLevelPlacement([])):
        with pytest.raises(EmptyRingError, match="no members"):
            placement.owner("example.com")
        with pytest.raises(EmptyRingError):
            placement.successors("example.com", 1)
        assert placement.successors("example.com", 0) == []


def test_one_member_owns_everything() -> None:
    for placement in (Ring(["solo"]), ModuloPlacement(["solo"]), TwoLevelPlacement(["solo"])):
        assert {placement.owner(h) for h in HOSTS[:500]} == {"solo"}
        assert placement.successors("example.com", 3) == ["solo"]


def test_duplicate_ids_are_collapsed() -> None:
    doubled = Ring(["bravo", "alpha", "bravo", "alpha"], vnodes=32)
    single = Ring(["alpha", "bravo"], vnodes=32)
    assert doubled.members == ("alpha", "bravo")
    assert doubled.point_count("alpha") == 32
    assert [doubled.owner(h) for h in HOSTS[:500]] == [single.owner(h) for h in HOSTS[:500]]


def test_successors_beyond_the_members_returns_them_all() -> None:
    ring = Ring(PEERS)
    found = ring.successors("example.com", 10)
    assert sorted(found) == sorted(PEERS)
    assert found[0] == ring.owner("example.com")
    with pytest.raises(ValueError, match="n must be"):
        ring.successors("example.com", -1)


def test_members_must_be_strings() -> None:
    with pytest.raises(TypeError, match="str"):
        Ring([b"alpha"])  # type: ignore[list-item]


def test_vnodes_must_be_positive() -> None:
    with pytest.raises(ValueError, match="vnodes"):
        Ring(PEERS, vnodes=0)
    assert Ring(PEERS).vnodes == DEFAULT_VNODES


def test_point_count_rounds_and_never_drops_a_member() -> None:
    assert point_count(256, 1.0) == 256
    assert point_count(256, 2.0) == 512
    assert point_count(256, 0.5) == 128
    assert point_count(10, 0.25) == 2  # round-half-even: 2.5 -> 2, on every machine
    assert point_count(256, 0.0) == 1
    for bad in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="weights"):
            point_count(256, bad)


def test_a_weight_two_member_gets_about_twice_the_hosts() -> None:
    ring = Ring(PEERS, weights={"alpha": 2.0, "not-a-member": 5.0})
    assert ring.point_count("alpha") == 2 * DEFAULT_VNODES
    assert ring.point_count("not-a-member") == 0
    counts = Counter(ring.owner(h) for h in HOSTS)
    others = sum(counts[p] for p in PEERS[1:]) / 3
    assert 1.7 < counts["alpha"] / others < 2.3


def test_a_zero_weight_member_still_has_a_point() -> None:
    ring = Ring(PEERS, weights={"alpha": 0.0})
    assert ring.point_count("alpha") == 1
    assert "alpha" in ring.successors("example.com", 4)


def test_balance_at_the_default_v() -> None:
    ring = Ring([f"peer-{i}" for i in range(8)])
    counts = Counter(ring.owner(h) for h in HOSTS)
    assert max(counts.values()) / (len(HOSTS) / 8) <= 1.2


def test_owner_at_agrees_with_owner() -> None:
    ring = Ring(PEERS, vnodes=16)
    for host in HOSTS[:500]:
        assert ring.owner_at(Ring.point(host)) == ring.owner(host)
    # A host exactly on a point belongs to the next point clockwise.
    first, second = ring.points[0], ring.points[1]
    assert ring.owner_at(first) == ring.owner_at(second)
    assert ring.owner_at(first - 1) == ring.owner_at(ring.points[-1] + 1)


def test_colliding_points_go_to_the_smaller_id(monkeypatch: pytest.MonkeyPatch) -> None:
    # 64-bit collisions are too rare to meet by chance, so fake the hash.
    fake = {"a": [100], "b": [100], "c": [200]}
    monkeypatch.setattr("ubipy.ring.ring.member_points", lambda m, count: fake[m][:count])
    monkeypatch.setattr("ubipy.ring.arcs.member_points", lambda m, count: fake[m][:count])
    ring = Ring(["c", "b", "a"], vnodes=1)
    assert [ring.owner_at(p) for p in (99, 100, 150, 200, 250)] == ["a", "c", "c", "a", "a"]
    without_a = Ring(["c", "b"], vnodes=1)
    assert without_a.owner_at(99) == "b"
    assert diff(ring, without_a) == (Arc(0, 100, "a", "b"), Arc(200, CIRCLE, "a", "b"))
