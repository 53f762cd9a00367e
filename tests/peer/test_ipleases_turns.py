"""Peers take turns on an address at its owner: the peers denied it queue, each is told
when its turn should come, the free address is kept for the first due back, one that
is late keeps its place, and the owner's own asks queue with the others'. The cluster's
view of it (the web server's log) is tests/cluster/test_ip_lease_turns.py."""

from __future__ import annotations

import heapq
import itertools
import math

import pytest
import trio
import trio.testing

from tests.peer.test_ipleases import A, asker, table
from ubipy.peer.ipleases import ANSWER_HOLD
from ubipy.peer.leasetable import TURN_GRACE, LeaseTable
from ubipy.wire import IpGrant, IpLease

HOLD, GAP = 0.05, 0.2  # a request's length here, and the IP delay after it


def busy() -> LeaseTable:
    """``o`` (the owner) has held A from 0 to HOLD: the address is free at HOLD + GAP."""
    leases = table()
    assert leases.ask(A, ("o", 1), 0.0).granted
    assert leases.release(A, ("o", 1), HOLD)
    return leases


def test_the_owner_s_own_asks_queue_with_the_others() -> None:
    """The owner asks itself with no round trip: it had the address back every time
    it was free, the other peers denied again and again."""
    leases = table()
    assert leases.ask(A, ("o", 1), 0.0).granted
    assert not leases.ask(A, ("p", 1), 0.01).granted  # p queues
    assert leases.release(A, ("o", 1), HOLD)
    free = HOLD + GAP
    assert not leases.ask(A, ("o", 2), free).granted  # kept for p
    assert leases.ask(A, ("p", 2), free + 0.01).granted
    assert leases.release(A, ("p", 2), free + 0.01 + HOLD)
    # Now the owner's turn: it queued when it was denied.
    assert not leases.ask(A, ("p", 3), free + 0.01 + HOLD + GAP).granted
    assert leases.ask(A, ("o", 3), free + 0.02 + HOLD + GAP).granted


def test_each_peer_is_told_when_its_turn_should_come() -> None:
    leases = busy()
    free = HOLD + GAP
    first = leases.ask(A, ("p", 1), 0.1)
    # First in line, as the address waits its delay: it is its once the delay is over.
    assert not first.granted and first.next and first.wait == pytest.approx(free - 0.1)
    second = leases.ask(A, ("q", 1), 0.1)
    third = leases.ask(A, ("r", 1), 0.1)
    # Each after one more request and delay: not told too soon (its own rule would
    # hold it back a delay after a second denial), nor too late (the address idle).
    assert not second.next and second.wait == pytest.approx(free + (HOLD + GAP) - 0.1)
    assert third.wait == pytest.approx(free + 2 * (HOLD + GAP) - 0.1)


def test_the_free_address_is_kept_for_the_first_due_back_for_a_grace() -> None:
    leases = busy()
    free = HOLD + GAP
    leases.ask(A, ("p", 1), 0.1)  # told to come back when it is free
    denied = leases.ask(A, ("q", 1), free + TURN_GRACE)  # p may still come
    assert not denied.granted and denied.wait == pytest.approx(HOLD + GAP)
    assert leases.ask(A, ("p", 2), free + TURN_GRACE).granted


def test_a_late_peer_lets_the_next_have_it_and_keeps_its_place() -> None:
    """A peer whose own rule holds the address long after a denial (a server's
    back-off it heard) comes back late: sent to the back each time, it never had
    the address while the others took turns."""
    leases = busy()
    free = HOLD + GAP
    leases.ask(A, ("p", 1), 0.1)
    leases.ask(A, ("q", 1), 0.1)
    late = free + TURN_GRACE + 0.01
    assert leases.ask(A, ("q", 2), late).granted  # p is late: the next one's turn
    assert leases.release(A, ("q", 2), late + HOLD)
    # p comes back: still the longest waiting, ahead of r, due back now.
    r = leases.ask(A, ("r", 1), late + HOLD)
    assert not r.granted
    assert leases.ask(A, ("p", 2), late + HOLD + r.wait).granted
    assert not leases.ask(A, ("r", 2), late + HOLD + r.wait).granted


def test_a_queued_peer_that_does_not_come_back_leaves_the_queue() -> None:
    leases = busy()
    leases.ask(A, ("p", 1), 0.1)
    # A minute on, it has no more use for the address: the next ones are told as if
    # it were not there, and nothing is kept for it.
    assert leases.ask(A, ("q", 1), 100.0).granted


def test_a_peer_the_ring_dropped_leaves_the_queue() -> None:
    leases = busy()
    leases.ask(A, ("p", 1), 0.1)
    leases.members_changed({"o", "q"}, 0.2, 4.3)
    assert leases.ask(A, ("q", 1), HOLD + GAP).granted  # nothing kept for p


def test_an_address_kept_for_a_peer_is_not_forgotten() -> None:
    leases = LeaseTable(ip_delay=GAP, term=30.0)
    leases.ask(A, ("o", 1), 0.0)
    leases.ask(A, ("p", 1), 0.01)
    leases.release(A, ("o", 1), HOLD)
    for i in range(1100):  # a sweep, once the address's delay is over
        address = f"11.0.{i // 250}.{i % 250}"
        leases.ask(address, ("o", 2), HOLD + GAP)
        leases.release(address, ("o", 2), HOLD + GAP)
    assert not leases.ask(A, ("o", 3), HOLD + GAP).granted  # still p's
    assert leases.ask(A, ("p", 2), HOLD + GAP).granted


async def test_an_ask_next_for_the_address_is_granted_when_its_delay_is_over(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Denied, the peer would hold the address back a delay of its own: the owner
    keeps the ask, and grants it the moment the address is free."""
    owner, _, wire = asker("p")  # this peer ("p") owns the address
    async with trio.open_nursery() as nursery:
        owner._start_soon = nursery.start_soon
        await owner.on_lease("q", IpLease(1, A), wire.reply)
        granted_at = trio.current_time()
        owner.table.release(A, ("q", 1), granted_at + HOLD)
        autojump_clock.jump(HOLD + 0.05)
        await owner.on_lease("r", IpLease(2, A), wire.reply)
        assert len(wire.sent) == 1  # kept
    assert wire.sent == [("reply", IpGrant(1, A, True)), ("reply", IpGrant(2, A, True))]
    assert trio.current_time() == pytest.approx(granted_at + HOLD + GAP)


async def test_an_ask_is_kept_no_longer_than_the_answer_hold(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A server's long wait (a Retry-After) is said, not waited out: the asker's
    patience is short."""
    owner, _, wire = asker("p")
    await owner.on_lease("q", IpLease(1, A), wire.reply)
    owner.table.release(A, ("q", 1), trio.current_time(), wait=ANSWER_HOLD + 1)
    await owner.on_lease("r", IpLease(2, A), wire.reply)
    _, answer = wire.sent[-1]
    assert isinstance(answer, IpGrant) and answer.id == 2 and not answer.granted
    assert answer.wait == pytest.approx(ANSWER_HOLD + 1)


async def test_the_owner_s_own_ask_waits_its_turn(autojump_clock: trio.testing.MockClock) -> None:
    owner, crawler, wire = asker("p")  # the asker "p" owns the address
    await owner.on_lease("q", IpLease(1, A), wire.reply)
    assert not await crawler.clear_to_fetch("h.test")  # q holds it; p queues behind
    crawler.on_request_end("h.test")
    now = trio.current_time()
    owner.table.release(A, ("q", 1), now)
    await owner.on_lease("r", IpLease(2, A), wire.reply)  # r queues behind p
    # Next once the delay is over: kept that long, then granted.
    assert await crawler.clear_to_fetch("h.test")
    assert trio.current_time() == pytest.approx(now + GAP)


def test_a_free_address_is_not_kept_for_a_peer_due_much_later() -> None:
    """One slow request makes the mean hold long, and a peer denied while the next
    request runs is told to come back long after (18 s here). The address was kept
    for it from then on: idle, everyone else, its owner included, denied it."""
    leases = table()
    now = 0.0
    for i in range(3):  # a few ordinary requests
        assert leases.ask(A, ("p", i), now).granted
        assert leases.release(A, ("p", i), now + HOLD)
        now += HOLD + GAP
    assert leases.ask(A, ("p", 10), now).granted
    now += 60.0  # one slow request: a large page near the fetch deadline
    assert leases.release(A, ("p", 10), now)
    now += GAP
    assert leases.ask(A, ("p", 11), now).granted  # an ordinary one again
    far = leases.ask(A, ("q", 1), now + 0.01)
    assert far.wait > 10  # told as the mean hold says
    assert leases.release(A, ("p", 11), now + HOLD)
    free = now + HOLD + GAP
    assert leases.ask(A, ("r", 1), free + 0.01).granted  # q is not expected yet


def test_an_address_stands_idle_no_longer_than_a_gap_after_a_slow_request() -> None:
    """Four peers take turns, each doing as told (back the wait after a denial, or
    the gap if longer; the gap after its own request), one request of 60 s among
    them: the 18 s wait the slow request makes others be told leaves the address
    idle no longer than about a request and a gap."""
    leases = LeaseTable(ip_delay=GAP, term=121.0)
    events = [(0.01 * i, f"p{i}") for i in range(4)]
    starts: list[float] = []
    slow_done = math.inf
    for n in itertools.count():
        now, peer = heapq.heappop(events)
        if now > slow_done + 60:
            break
        verdict = leases.ask(A, (peer, n), now)
        if verdict.granted:
            length = 60.0 if math.isinf(slow_done) and now > 20 else HOLD
            if length > HOLD:
                slow_done = now + length
            starts.append(now)
            assert leases.release(A, (peer, n), now + length)
            heapq.heappush(events, (now + length + GAP, peer))
        else:
            heapq.heappush(events, (now + max(verdict.wait, GAP), peer))
    after = [s for s in starts if s >= slow_done]
    assert after[0] - slow_done < HOLD + GAP
    assert max(b - a for a, b in itertools.pairwise(after)) < 2 * (HOLD + GAP)
