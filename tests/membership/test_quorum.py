"""The majority lease: who may fetch while the network is split."""

from __future__ import annotations

import math

import pytest

from ubipy.membership import Quorum, fence

LEASE = 5.0


def quorum(self_id: str, base: str, live: str | None = None) -> Quorum:
    q = Quorum(self_id, base, lease=LEASE)
    q.set_live(live if live is not None else base)
    return q


def test_a_majority_heard_within_the_lease_holds_it_until_the_heard_go_quiet() -> None:
    q = quorum("c", "abcde")
    assert not q.holds(0.0)  # only itself: 1 of 5
    q.heard("a", 1.0)
    assert not q.holds(1.0)
    q.heard("b", 2.0)
    assert q.holds(2.0) and str(q.sight(2.0)) == "hears from 3 of 5 peers"
    assert q.expires(2.0) == 1.0 + LEASE  # when a goes quiet, 2 of 5 are left
    q.heard("d", 3.0)
    assert q.expires(3.0) == 2.0 + LEASE  # one to spare: the second to go quiet ends it
    assert q.holds(2.0 + LEASE - 0.01) and not q.holds(2.0 + LEASE)


@pytest.mark.parametrize(
    ("side", "holds"), [("ab", True), ("cd", False), ("a", False), ("b", False)]
)
def test_an_even_split_goes_to_the_half_with_the_smallest_id(side: str, holds: bool) -> None:
    q = quorum(side[0], "abcd")
    for other in side[1:]:
        q.heard(other, 0.0)
    assert q.holds(0.0) is holds


def test_a_two_peer_cluster_goes_on_without_its_larger_id_only() -> None:
    assert quorum("a", "ab").holds(0.0)
    assert not quorum("b", "ab").holds(0.0)


def test_the_base_changes_only_while_the_lease_is_held() -> None:
    minority = quorum("d", "abcd", live="d")
    assert not minority.gone("a", 0.0) and minority.base == frozenset("abcd")
    # A member that left on purpose fetches nothing more: it goes whatever the lease.
    assert minority.gone("a", 0.0, left=True) and minority.base == frozenset("bcd")
    assert not minority.joined("x", 0.0) and minority.base == frozenset("bcd")
    majority = quorum("a", "abcd", live="abc")
    majority.heard("b", 0.0)
    majority.heard("c", 0.0)
    assert majority.gone("d", 0.0) and majority.base == frozenset("abc")
    assert majority.joined("x", 0.0) and majority.base == frozenset("abcx")
    assert majority.holds(0.0)  # the newcomer counts until its first answer is due
    assert not majority.gone("a", 0.0)  # never itself


def test_members_heard_but_not_live_do_not_count() -> None:
    """A side that declared the others dead does not count their frames until
    membership has taken them back: its ring still gives it their hosts."""
    q = quorum("d", "abcd", live="d")
    for other in "abc":
        q.heard(other, 0.0)
    assert not q.holds(0.0)
    q.set_live("abcd")
    assert q.holds(0.0)


def test_the_members_to_keep_in_sight_are_the_live_others_with_when_last_heard() -> None:
    q = quorum("a", "abcd", live="abc")
    q.heard("b", 2.0)
    q.heard("b", 1.0)  # an answer to an older ping
    assert q.last_heard() == {"b": 2.0, "c": -math.inf}


def test_the_fence_outlasts_the_lease_with_margin_for_clock_rates() -> None:
    assert fence(LEASE) > LEASE * 1.1
    with pytest.raises(ValueError):
        Quorum("a", "a", lease=0)


def test_the_lease_expires_after_now_whatever_the_rounding() -> None:
    """heard + lease can round to exactly now while now - heard < lease: the loop that
    waits for expires() must never be told "now" (it would spin at one instant)."""
    q = quorum("a", "ab")
    q.heard("b", 0.1)
    now = 3.1  # 3.1 - 0.1 = 2.9999999999999996 < 3, but 0.1 + 3.0 == 3.1
    q3 = Quorum("b", "ab", lease=3.0)
    q3.set_live("ab")
    q3.heard("a", 0.1)
    expires = q3.expires(now)
    assert expires is None or expires > now
    assert q.expires(0.2) is None  # "a" holds alone (the smaller id): forever
