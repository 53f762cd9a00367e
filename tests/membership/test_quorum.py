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
    majority.heard("x", 0.0)
    assert majority.joined("x", 0.0) and majority.base == frozenset("abcx")
    assert majority.holds(0.0)  # the newcomer answered: 4 of 4
    assert not majority.gone("a", 0.0)  # never itself


def test_a_member_that_never_answers_is_never_counted_in_the_base() -> None:
    """A newcomer that gave an address not its own joins (its frames reach us), but
    our pings never reach it: a lone peer that took it in on its join held half of a
    base of two, and, its id the greater, never held again nor could drop it."""
    b = quorum("b", "b", live="ab")
    assert not b.admit_live(0.0) and b.base == frozenset("b") and b.holds(100.0)
    assert b.outside() == ["a"]  # pinged by the lease, to be admitted once it answers
    b.heard("a", 99.0)
    assert b.admit_live(100.0) and b.base == frozenset("ab")
    late = quorum("b", "b", live="ab")
    late.heard("a", 0.0)  # an answer older than the lease proves nothing now
    assert not late.joined("a", LEASE) and late.base == frozenset("b")


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


def test_a_newcomer_holds_nothing_until_a_holder_s_base_names_it() -> None:
    """The cut-off side's lone member answers with a base it does not hold: the
    newcomer stays pending, however many members it sees; a holder's base naming it
    lets it count, in that base."""
    d = Quorum("d", "", lease=LEASE, newcomer=True)
    d.set_live("cd")
    d.heard("c", 0.0)
    assert d.pending and not d.holds(0.0) and d.expires(0.0) is None
    assert not d.joined("c", 0.0) and d.base == frozenset()
    assert str(d.sight(0.0)) == "not yet counted by a member that holds the majority lease"
    assert d.last_heard() == {}  # no lease pings while there is no base to keep
    assert not d.answered("c", "abc", 0.0, holds=False, informed=False)
    assert not d.answered("c", "abcd", 0.0, holds=False, informed=False)  # not a holder's
    assert not d.answered("a", "abc", 0.0, holds=True, informed=False)  # not naming it yet
    assert d.pending and d.informed
    assert d.answered("a", "abcd", 0.0, holds=True, informed=False)
    assert not d.pending and d.base == frozenset("abcd")
    assert not d.holds(0.0)  # c and d: 2 of 4, and a is the smallest
    d.set_live("acd")
    d.heard("a", 1.0)
    assert d.holds(1.0)  # a, c and d: 3 of 4


def test_a_peer_that_joins_nobody_or_has_a_base_is_never_pending() -> None:
    assert not Quorum("a", "", lease=LEASE).pending  # the first peer: a base of itself
    restarted = Quorum("b", "ab", lease=LEASE, newcomer=True)
    assert not restarted.pending and restarted.base == frozenset("ab")


@pytest.mark.parametrize(
    ("answers", "founds"),
    [
        ({"b": False, "c": False}, True),
        ({"b": False}, False),  # c has not answered yet
        ({"b": False, "c": True}, False),  # c has heard of a base
    ],
)
def test_newcomers_that_meet_only_each_other_found_a_base_with_the_smallest_id(
    answers: dict[str, bool], founds: bool
) -> None:
    """A cluster whose peers all name each other with --join: the smallest id founds
    a base of them all once every other has answered that it is new and knows of no
    base; the others never found one of their own."""
    a, b = Quorum("a", "", lease=LEASE, newcomer=True), Quorum("b", "", lease=LEASE, newcomer=True)
    for q in (a, b):
        q.set_live("abc")
        q.expecting = False  # a join address of theirs answered
    for member, informed in answers.items():
        a.answered(member, "", 0.0, holds=False, informed=informed)
    b.answered("a", "", 0.0, holds=False, informed=False)
    b.answered("c", "", 0.0, holds=False, informed=False)
    assert not b.found()  # not the smallest id
    assert a.found() is founds
    assert a.base == (frozenset("abc") if founds else frozenset())
    assert a.pending is not founds


def test_a_newcomer_whose_join_addresses_never_answered_founds_nothing() -> None:
    """Told to join a cluster that may be up there, it founds none with the newcomers
    that reach it meanwhile (QA: peers whose first named a bootstrap not up yet, the
    next the first, made a cluster of their own, then a second with the bootstrap)."""
    a = Quorum("a", "", lease=LEASE, newcomer=True)
    assert a.expecting
    a.set_live("ab")
    a.answered("b", "", 0.0, holds=False, informed=False)
    assert not a.found() and a.pending
    a.expecting = False
    assert a.found() and a.base == frozenset("ab")
    assert not Quorum("a", "", lease=LEASE).expecting  # the first peer: nothing to expect


def test_a_lone_newcomer_or_one_that_heard_of_a_base_founds_nothing() -> None:
    alone = Quorum("a", "", lease=LEASE, newcomer=True)
    assert not alone.found()  # its join addresses may be a cluster cut off from it
    told = Quorum("a", "", lease=LEASE, newcomer=True)
    told.set_live("ab")
    told.answered("b", "", 0.0, holds=False, informed=True)  # b was answered by a base
    assert not told.found() and told.informed
    # Only new peers in sight, a base heard of: its pause says so, and where to look.
    assert "every peer in sight is new too" in str(told.sight(0.0))
    assert "every peer in sight is new" not in str(alone.sight(0.0))


def test_a_holder_admits_the_live_members_missing_from_its_base() -> None:
    """Members that joined while the lease did not hold here (a newcomer on this side of
    a partition) join the base once it holds and they have answered."""
    c = quorum("c", "abc", live="cd")
    c.heard("d", 0.0)
    assert not c.admit_live(0.0) and c.base == frozenset("abc")  # 1 of 3: not held
    c.set_live("abcd")
    c.heard("a", 0.0)
    c.heard("b", 0.0)
    assert c.outside() == ["d"]
    assert c.admit_live(0.0) and c.base == frozenset("abcd") and c.holds(0.0)
    assert c.outside() == []
    assert not c.admit_live(0.0)


def test_a_member_added_by_a_peer_cut_off_an_instant_ago_does_not_make_it_a_half() -> None:
    """b is cut off from c and d at 0.5 but holds the lease until their answers of 0.0
    lapse; a (the smallest id) joins it at 1.0. Without the joint base, a and b would
    be the tie-breaking half of {a, b, c, d} for good, while c and d hold {b, c, d}.
    The old base stays joint until a majority of it answers a ping sent after the
    join: here, never while cut off; at once when healed."""
    b = quorum("b", "bcd")
    b.heard("c", 0.0)
    b.heard("d", 0.0)
    b.set_live("abcd")
    b.heard("a", 1.0)
    assert b.joined("a", 1.0) and b.base == frozenset("abcd")
    assert b.joint == frozenset("bcd")
    b.heard("a", 2.0)
    assert b.holds(4.9)  # c and d's answers still count
    assert not b.holds(5.0) and b.expires(4.9) == 5.0
    assert str(b.sight(5.0)) == "hears from 2 of 4 peers (1 of the 3 before the last joined)"
    b.heard("c", 0.9)  # an answer to a ping sent before the join confirms nothing
    assert b.joint == frozenset("bcd")
    b.heard("c", 6.0)  # healed: a ping sent after the join, answered
    assert b.joint is None and b.holds(6.0)


def test_a_base_taken_from_a_holder_waits_for_a_majority_of_the_holder_s_own() -> None:
    """The holder may have been cut off when it answered: the newcomer counts once a
    majority of the base it had without the newcomer answers the newcomer's pings."""
    d = Quorum("d", "", lease=LEASE, newcomer=True)
    d.set_live("abcd")
    assert d.answered("c", "abcd", 1.0, holds=True, informed=False)
    assert d.joint == frozenset("abc")
    d.heard("c", 1.5)
    d.heard("b", 1.5)  # b, c and d: 3 of 4, and b and c of the holder's a, b, c
    assert d.holds(1.5) and d.joint is None
    lone = Quorum("d", "", lease=LEASE, newcomer=True)
    lone.set_live("abcd")
    lone.answered("a", "abcd", 1.0, holds=True, informed=False)
    lone.heard("a", 1.5)  # a and d: the tie-breaking half of a, b, c, d
    assert not lone.holds(1.5) and lone.joint == frozenset("abc")


def test_a_member_gone_leaves_the_joint_base_too() -> None:
    """The joint base loses the dead as the base does; while unconfirmed it still
    needs its own majority (c, alone of a, b, c, is no majority: a and b may be the
    other side of a cut, holding a, b, c)."""
    c = quorum("c", "abc")
    c.heard("a", 0.0)
    c.heard("b", 0.0)
    c.set_live("abcd")
    c.heard("d", 0.0)
    assert c.joined("d", 0.0) and c.joint == frozenset("abc")
    c.set_live("bcd")
    assert c.gone("a", 1.0) and c.joint == frozenset("bc") and c.base == frozenset("bcd")
    c.heard("b", 2.0)
    assert c.joint is None and c.holds(2.0)


def test_the_first_peer_s_base_grows_with_nothing_to_confirm() -> None:
    a = Quorum("a", "", lease=LEASE)
    a.set_live("ab")
    a.heard("b", 0.0)
    assert a.joined("b", 0.0) and a.joint is None and a.base == frozenset("ab")


def test_a_newcomer_whose_join_addresses_are_all_itself_founds_a_base_of_itself() -> None:
    q = Quorum("a", "", lease=LEASE, newcomer=True)
    assert q.alone() and not q.pending and q.base == frozenset("a") and q.holds(0.0)
    assert not q.alone()  # once only: a peer with a base keeps it


def test_a_newcomer_holds_the_holder_s_joint_base_which_may_predate_other_newcomers() -> None:
    """c, cut off from a and b a moment ago, still holds and adds d then e. e taking
    c, d, e of a, b, c, d as its joint would make them a majority with the
    tie-break's help; e holds c's own joint, a, b, c, as c does, and so holds
    nothing while cut off."""
    c = quorum("c", "abc")
    c.heard("a", 0.0)
    c.heard("b", 0.0)
    c.set_live("abcde")
    c.heard("d", 1.0)
    c.heard("e", 1.5)
    assert c.joined("d", 1.0) and c.joined("e", 1.5) and c.joint == frozenset("abc")
    e = Quorum("e", "", lease=LEASE, newcomer=True)
    e.set_live("cde")
    assert e.answered("c", "abcde", 2.0, holds=True, informed=False, joint="abc")
    e.heard("c", 3.0)
    e.heard("d", 3.0)  # c, d and e: 3 of 5, but only c of a, b, c
    assert e.joint == frozenset("abc") and not e.holds(3.0)


def test_a_joint_base_whose_members_all_left_is_dropped() -> None:
    """A newcomer's joint base lacks itself: once all of it has left, nobody's word is
    left to wait for, and the newcomer holds its base of itself."""
    b = Quorum("b", "", lease=LEASE, newcomer=True)
    b.set_live("ab")
    assert b.answered("a", "ab", 0.0, holds=True, informed=False)
    assert b.joint == frozenset("a")
    b.set_live("b")
    assert b.gone("a", 1.0, left=True) and b.joint is None and b.holds(1.0)


def test_a_joint_base_kept_by_the_last_run_still_binds_until_answered() -> None:
    """Restarted during the cut that followed its adding d: a and d are the
    tie-breaking half of a, b, c, d, but a alone is no majority of a, b, c."""
    a = Quorum("a", "abcd", lease=LEASE, joint="abc")
    a.set_live("ad")
    a.heard("d", 1.0)
    assert not a.holds(1.0) and a.joint == frozenset("abc")
    forgetful = Quorum("a", "abcd", lease=LEASE)  # the base alone, as kept before
    forgetful.set_live("ad")
    forgetful.heard("d", 1.0)
    assert forgetful.holds(1.0)
    a.set_live("abcd")
    a.heard("b", 2.0)  # a, b of a, b, c: confirmed by any answer after the restart
    assert a.joint is None and a.holds(2.0)


def test_a_peer_that_cannot_hold_on_its_own_base_takes_a_holder_s() -> None:
    """Back from a stop after a and b left for good and e and f came: c's kept base
    lets it hold nothing; a holder's base naming it does (joint with the holder's)."""
    q = quorum("c", "abcd", live="cdef")
    for m in "def":
        q.heard(m, 1.0)
    assert not q.holds(1.0)  # c and d of a, b, c, d, without a
    assert not q.answered("d", "def", 1.0, holds=True, informed=False)  # not naming it
    assert not q.answered("e", "cdef", 1.0, holds=False, informed=False)  # no holder
    assert q.answered("d", "cdef", 1.0, holds=True, informed=False, joint="def")
    assert q.base == frozenset("cdef") and q.joint == frozenset("def")
    assert q.holds(1.0)  # c, d, e, f of four, and d, e, f of the holder's three
    assert not q.answered("e", "cdefg", 1.0, holds=True, informed=False)  # holds: kept


def test_a_peer_back_with_a_kept_base_holds_only_once_a_majority_of_it_still_counts_it() -> None:
    """b was killed; a and c dropped it and took d and e in. Back with a, b, c, b sees
    a: a majority of what it kept, but a's base no longer names it, so a does not
    count (a review's split brain). Only a's word that it still counts b does."""
    b = Quorum("b", "abc", lease=LEASE, restored=True)
    b.set_live("ab")
    b.heard("a", 1.0)
    assert b.restoring and not b.holds(1.0) and not b.restore(1.0)
    assert str(b.sight(1.0)) == (
        "not yet counted by a member that holds the majority lease, nor by a majority "
        "of the base it kept (1 of 3 peers)"
    )
    assert not b.answered("a", "acde", 1.0, holds=False, informed=False)
    assert not b.restore(1.0) and b.expires(1.0) is None
    assert b.last_heard() == {"a": 1.0}  # its pings go on: a may still count it
    b.answered("a", "abc", 1.0, holds=False, informed=False)  # a kept it too
    assert b.restore(1.0) and not b.restoring and b.holds(1.0) and b.base == frozenset("abc")
    assert not b.restore(1.0)  # once


def test_those_that_still_count_a_restoring_peer_must_be_a_majority_of_their_bases_too() -> None:
    """c kept b, c, d and sees d, whose base a, b, c, d names it: 2 of 3 of c's, but
    half of d's without its smallest id; a and b may hold that base elsewhere."""
    c = Quorum("c", "bcd", lease=LEASE, restored=True)
    c.set_live("cd")
    c.heard("d", 1.0)
    c.answered("d", "abcd", 1.0, holds=False, informed=False)
    assert not c.restore(1.0)
    c.answered("d", "bcd", 1.0, holds=False, informed=False)  # its latest word
    assert c.restore(1.0)
    joint = Quorum("c", "bcd", lease=LEASE, restored=True)
    joint.set_live("cd")
    joint.heard("d", 1.0)
    joint.answered("d", "bcd", 1.0, holds=False, informed=False, joint="abd")
    assert not joint.restore(1.0)  # d of a, b, d: no majority of d's joint base


def test_a_restoring_peer_takes_a_holder_s_base_and_a_lone_one_holds_at_once() -> None:
    b = Quorum("b", "abc", lease=LEASE, restored=True)
    b.set_live("abd")
    assert not b.answered("a", "acd", 1.0, holds=True, informed=False)  # not naming it
    assert b.answered("a", "abcd", 1.0, holds=True, informed=False, joint="acd")
    assert not b.restoring and b.base == frozenset("abcd") and b.joint == frozenset("acd")
    lone = Quorum("a", "a", lease=LEASE, restored=True)
    assert not lone.restoring and lone.holds(0.0)  # a single peer, or the last of one


def test_a_holder_keeps_in_sight_a_majority_and_a_spare_heard_from_last_first() -> None:
    """Of eight, a majority is a and four others: five kept in sight, the four heard
    from last and a spare, where each of seven was asked once a cadence before (a
    review: N - 2 pings a second a peer, N^2 for the cluster)."""
    q = quorum("a", "abcdefgh")
    for i, m in enumerate("bcdefgh"):
        q.heard(m, 1.0 + i / 10)  # h heard from last
    assert q.holds(2.0)
    assert set(q.to_keep(2.0)) == set("defgh")
    assert q.to_keep(2.0)["h"] == 1.6  # with when each was last heard from
    # h asked and silent since: kept (asked again), and c beside it.
    assert set(q.to_keep(2.0, silent="h")) == set("cdefgh")
    assert set(q.to_keep(2.0, silent="gh")) == set("bcdefgh")
    # A joint base needs its own majority and spare: b, c and d of a, b, c, d, though
    # e, f, g and h (they answered, and joined) were heard from since.
    grown = quorum("a", "abcd")
    for m in "bcd":
        grown.heard(m, 1.0)
    grown.set_live("abcdefgh")
    for m in "efgh":
        grown.heard(m, 2.0)
        assert grown.joined(m, 2.0)
    assert grown.joint == frozenset("abcd")
    assert set(grown.to_keep(2.0)) == set("bcdefgh")


def test_a_peer_that_does_not_hold_keeps_every_live_member_in_sight() -> None:
    q = quorum("a", "abcdefgh", live="abcdefg")
    q.heard("b", 1.0)
    assert not q.holds(1.0)
    assert set(q.to_keep(1.0)) == set("bcdefg")  # not h: membership holds it dead
    restoring = Quorum("a", "abcdefgh", lease=LEASE, restored=True)
    restoring.set_live("abcdefgh")
    assert set(restoring.to_keep(0.0)) == set("bcdefgh")


def test_a_peer_is_needed_by_the_others_only_where_they_hold_nothing_without_it() -> None:
    """Who must hear a peer's leave to drop it (peer/leaving.py): the others of its
    base, when without it they are no majority: of two, the smaller id."""
    assert Quorum("a", "ab", lease=LEASE).needed(0.0) == {"b"}
    assert Quorum("b", "ab", lease=LEASE).needed(0.0) == frozenset()
    assert Quorum("a", "abc", lease=LEASE).needed(0.0) == frozenset()
    assert Quorum("a", "a", lease=LEASE).needed(0.0) == frozenset()
    assert Quorum("a", (), lease=LEASE, newcomer=True).needed(0.0) == frozenset()
    # a holds {a, b} and counts c: its joint {a, b} is confirmed by its own word (the
    # half with the smallest id), but b and c may be joint on {a, b} still, which
    # needs a (a review): for two leases after the addition, they are told.
    a = quorum("a", "ab", live="abc")
    a.heard("b", 0.0)
    a.heard("c", 0.0)
    assert a.admit_live(0.0) and a.base == frozenset("abc")
    assert a.needed(1.0) == {"b", "c"}
    assert a.needed(2 * LEASE + 1.0) == frozenset()
    # Of two, a dropped b as dead: b, cut off and not dead, counts a still, but is not
    # waited for (a stop after a partner's death waited a minute); it learns a left
    # when a is back (its answers say so).
    two = quorum("a", "ab")
    two.heard("b", 0.0)
    assert two.gone("b", 1.0) and two.base == {"a"}
    assert two.needed(1.0) == frozenset()


def test_a_peer_back_after_a_leave_founds_once_the_base_it_left_is_all_back_new() -> None:
    """It knows the base it left: until each other member of it is in sight and says
    it left too, that base may be a cluster out of sight, and it founds nothing, nor
    lets a newcomer found (its answers say informed). A whole cluster stopped and
    started again, each joining the others, founds as before."""
    a = Quorum("a", (), lease=LEASE, newcomer=True, returned=True, left_base="abc")
    a.answered_at_join("b")
    a.set_live("abd")
    a.answered("b", (), 0.0, holds=False, informed=True, left=True)
    a.answered("d", (), 0.0, holds=False, informed=False)
    assert a.informed and not a.found()  # c, of the base it left, is out of sight
    a.set_live("abcd")
    a.answered("c", (), 0.0, holds=False, informed=False)  # back, but not after a leave
    assert a.informed and not a.found()
    a.answered("c", (), 0.0, holds=False, informed=True, left=True)
    assert not a.informed  # all of it back new: no base there any more
    assert not a.found()  # but b and c say they know of one (theirs, not settled yet)
    for other in "bc":  # each has seen the rest back too
        a.answered(other, (), 0.0, holds=False, informed=False, left=True)
    assert a.found() and a.base == frozenset("abcd")
    # A newcomer told "informed" by one back after a leave keeps no such word of its own.
    d = Quorum("d", (), lease=LEASE, newcomer=True)
    d.answered("a", (), 0.0, holds=False, informed=True, left=True)
    assert not d.informed
    # Brand new, or back from a leave of an earlier version (no base kept): as before.
    assert not Quorum("e", (), lease=LEASE, newcomer=True, returned=True).informed
