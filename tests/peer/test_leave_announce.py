"""A leave the others need to drop this peer from their base (the tie-breaker of two,
stopped during a cut) is told on a connection of its own, and again every 2 s for a
minute while it cannot be: a frame handed to a relay counted as told, and the other,
never reached, waited for it for good (a review's fuzzer)."""

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
    def __init__(self, quorum: Quorum) -> None:
        self.quorum = quorum


def _membership() -> Membership:
    m = Membership("a", "10.0.0.1:7000", MembershipConfig(), random.Random(1))
    m._members["b"] = Member("b", "10.0.0.2:7000", MemberState.ALIVE, 0)
    return m


@pytest.mark.parametrize("reachable_after", [0.0, 30.0, None])
async def test_a_needed_leave_is_told_directly_again_until_it_gets_through(
    reachable_after: float | None,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "ubipy.peer.leaving")
    sent: list[tuple[float, bool]] = []
    start = trio.current_time()

    async def send_one(out: Outgoing, relay: bool) -> bool:
        assert isinstance(out.message, Leave) and out.address == "10.0.0.2:7000"
        sent.append((trio.current_time() - start, relay))
        if relay:
            return True  # handed to a relay: no word of delivery
        return reachable_after is not None and trio.current_time() - start >= reachable_after

    lease = cast(Lease, _Lease(Quorum("a", "ab", lease=3.0)))
    await _announce(_membership(), send_one, lease)
    direct = [at for at, relay in sent if not relay]
    said = caplog.text
    if reachable_after == 0.0:
        assert direct == [0.0] and "could be told" not in said
    elif reachable_after is not None:
        assert direct[-1] == pytest.approx(30.0, abs=2.0) and "leaving: b told" in said
        # The first at once, then every 2 s.
        assert all(b - a == pytest.approx(2.0, abs=0.01) for a, b in itertools.pairwise(direct))
    else:
        assert 60.0 <= trio.current_time() - start < 63.0
        assert "b not told: they fetch nothing until this peer is started again" in said


async def test_a_leave_nobody_needs_is_sent_once() -> None:
    sent: list[bool] = []

    async def send_one(out: Outgoing, relay: bool) -> bool:
        sent.append(relay)
        return False

    lease = cast(Lease, _Lease(Quorum("b", "ab", lease=3.0)))  # a alone holds without b
    membership = Membership("b", "10.0.0.2:7000", MembershipConfig(), random.Random(1))
    membership._members["a"] = Member("a", "10.0.0.1:7000", MemberState.ALIVE, 0)
    await _announce(membership, send_one, lease)
    assert sent == [True]
