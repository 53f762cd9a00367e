"""A leave the others need to drop this peer from their base (the tie-breaker of two,
stopped during a cut) is told until the member answers an ask sent after it, every
2 s for a minute: a frame handed to a relay, or written on a connection a silent cut
swallows, counted as told, and the other, never reached, waited for it for good (a
review's fuzzer and review)."""

from __future__ import annotations

import itertools
import logging
import random
from typing import cast

import pytest
import trio
import trio.testing

from ubipy.membership import (
    Leave,
    Member,
    Membership,
    MembershipConfig,
    MemberState,
    Outgoing,
    Quorum,
)
from ubipy.peer.lease import Lease
from ubipy.peer.leaving import _announce


class _Lease:
    """As much of a lease as a leave asks: its base, and whether a member answers."""

    def __init__(self, quorum: Quorum, answers_from: float | None) -> None:
        self.quorum = quorum
        self.left_with = quorum.base
        self.asked: list[float] = []
        self._start = trio.current_time()
        self._from = answers_from

    async def heard_after(self, member_id: str, address: str, patience: float) -> bool:
        now = trio.current_time() - self._start
        self.asked.append(now)
        if self._from is not None and now >= self._from:
            return True
        await trio.sleep(patience)  # no answer comes
        return False


def _membership(self_id: str = "a", other: str = "b") -> Membership:
    address = f"10.0.0.{ord(self_id) - 96}:7000"
    m = Membership(self_id, address, MembershipConfig(), random.Random(1))
    m._members[other] = Member(other, f"10.0.0.{ord(other) - 96}:7000", MemberState.ALIVE, 0)
    return m


@pytest.mark.parametrize("answers_from", [0.0, 30.0, None])
async def test_a_needed_leave_is_told_again_until_an_answer_proves_it(
    answers_from: float | None,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "ubipy.peer.leaving")
    sent: list[Outgoing] = []

    async def send_one(out: Outgoing) -> bool:
        sent.append(out)
        return True  # written somewhere: no word of delivery

    lease = _Lease(Quorum("a", "ab", lease=3.0), answers_from)
    start = trio.current_time()
    await _announce(_membership(), send_one, cast(Lease, lease))
    assert all(isinstance(out.message, Leave) for out in sent)
    said = caplog.text
    if answers_from == 0.0:
        assert lease.asked == [0.0] and "could be told" not in said
    elif answers_from is not None:
        assert lease.asked[-1] == pytest.approx(30.0, abs=3.0) and "leaving: b told" in said
        # Each try waits 2 s for the answer, then 1 s more (the first, at once).
        gaps = [b - a for a, b in itertools.pairwise(lease.asked)]
        assert gaps[0] == pytest.approx(2.0) and all(g == pytest.approx(3.0) for g in gaps[1:])
    else:
        assert 60.0 <= trio.current_time() - start < 64.0
        assert "b not told: they fetch nothing until this peer is started again" in said


async def test_a_needed_member_that_leaves_too_is_told_no_more(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """A whole cluster stopping: b, which this peer's leave was for, leaves as well, and
    will not answer; this peer stops asking, rather than wait out the minute."""
    caplog.set_level(logging.INFO, "ubipy.peer.leaving")
    membership = _membership()

    async def send_one(out: Outgoing) -> bool:
        return True

    async def b_leaves() -> None:
        await trio.sleep(5.0)
        membership._members["b"] = Member("b", "10.0.0.2:7000", MemberState.LEFT, 0)

    lease = _Lease(Quorum("a", "ab", lease=3.0), None)
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(b_leaves)
        await _announce(membership, send_one, cast(Lease, lease))
    assert trio.current_time() - start < 10.0
    assert "leaving: b left too" in caplog.text


async def test_a_leave_nobody_needs_is_sent_once(autojump_clock: trio.testing.MockClock) -> None:
    sent: list[Outgoing] = []

    async def send_one(out: Outgoing) -> bool:
        sent.append(out)
        return False

    lease = _Lease(Quorum("b", "ab", lease=3.0), None)  # a alone holds without b
    await _announce(_membership("b", "a"), send_one, cast(Lease, lease))
    assert len(sent) == 1 and lease.asked == []


async def test_a_cluster_stopping_together_waits_for_no_member_not_told(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """b, c and this peer were asked to stop; c left, b is frozen and answers nothing:
    b learns it when they are back (their answers say they left). Waited for, a frozen
    member held the others' stop a minute (tests/cluster/test_stop_frozen.py)."""
    membership = _membership()
    membership._members["c"] = Member("c", "10.0.0.3:7000", MemberState.LEFT, 0)

    async def send_one(out: Outgoing) -> bool:
        return True

    lease = _Lease(Quorum("a", "ab", lease=3.0), None)
    lease.left_with = frozenset("abc")
    start = trio.current_time()
    await _announce(membership, send_one, cast(Lease, lease))
    assert trio.current_time() - start < 3.0 and lease.asked == []
