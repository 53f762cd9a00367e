"""The peer's side of the majority lease, driven by hand on the autojump clock: who is
asked for a sign of life and when, on membership's tick or by the lease's own loop,
and a peer pausing when the lease lapses."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
import trio
import trio.testing

from ubipy.membership import (
    Member,
    Membership,
    MembershipConfig,
    MemberState,
    Outgoing,
    Ping,
    Quorum,
)
from ubipy.net import Reply
from ubipy.peer.crawler import Crawler
from ubipy.peer.handoff import Handoff
from ubipy.peer.lease import Lease, load_quorum
from ubipy.store import Shard
from ubipy.wire import BaseAnswer, BaseAsk, Message

M = TypeVar("M", bound=Message)

LEASE = 3.0  # a member is asked after a cadence of 1 s without a sign of life


class _Crawler:
    paused: str | None = None

    def pause(self, why: str | None) -> None:
        self.paused = why


class _Handoff:
    def resumed(self, ids: object) -> None:
        pass


class World:
    def __init__(
        self,
        shard: Shard,
        probe_interval: float = 1.0,
        others: str = "bc",
        quorum: Quorum | None = None,
    ) -> None:
        config = MembershipConfig(probe_interval=probe_interval, probe_timeout=0.5)
        self.membership = Membership("a", "10.0.0.1:7000", config, random.Random(1))
        for i, other in enumerate(others, start=2):
            self.membership._members[other] = Member(
                other, f"10.0.0.{i}:7000", MemberState.ALIVE, 0
            )
        self.quorum = quorum or Quorum("a", "a" + others, lease=LEASE)
        self.quorum.set_live("a" + others)
        self.crawler = _Crawler()
        self.pings: list[tuple[float, str]] = []
        self._unanswered: list[tuple[str, float]] = []
        self.lease = Lease(
            self.quorum,
            self.membership,
            cast(Crawler, self.crawler),
            cast(Handoff, _Handoff()),
            shard,
            self.sent,
        )

    def sent(self, outgoing: list[Outgoing]) -> None:
        for out in outgoing:
            assert isinstance(out.message, Ping)
            self.pings.append((trio.current_time(), out.message.target_id))
            self._unanswered.append((out.message.target_id, trio.current_time()))

    def answer_all(self) -> None:
        """Every ping of ours so far answered (as membership reports answers)."""
        answers, self._unanswered = self._unanswered, []
        self.lease.answered(answers)


@pytest.fixture
def shard(tmp_path: Path) -> Iterator[Shard]:
    shard = Shard.open(tmp_path)
    yield shard
    shard.close()


@asynccontextmanager
async def running(shard: Shard, others: str = "bc") -> AsyncIterator[World]:
    """A lease running, every member heard from at time 0."""
    world = World(shard, others=others)
    async with trio.open_nursery() as nursery:
        world.lease.answered([(m, 0.0) for m in others])
        nursery.start_soon(world.lease.run)
        yield world
        nursery.cancel_scope.cancel()


def probe(world: World, target: str) -> list[Outgoing]:
    """What membership's tick sent: a probe of ``target`` (answered as ours are)."""
    out = world.membership.ping(trio.current_time(), target)
    assert out is not None
    world._unanswered.append((target, trio.current_time()))
    return [out]


async def test_on_membership_s_tick_the_lease_asks_whom_the_probe_did_not(
    shard: Shard, autojump_clock: trio.testing.MockClock
) -> None:
    async with running(shard) as world:
        for second in range(1, 11):
            await trio.sleep_until(second)
            target = "bc"[second % 2]
            world.lease.tick(trio.current_time(), probe(world, target))
            await trio.testing.wait_all_tasks_blocked()
            world.answer_all()
        # Each tick, the member not probed is asked; never the one probed, never off
        # the tick (the loop had nothing to do), and the lease held throughout.
        assert world.pings == [(float(s), "cb"[s % 2]) for s in range(1, 11)]
        assert world.crawler.paused is None


async def test_without_membership_s_ticks_the_lease_asks_on_its_own(
    shard: Shard, autojump_clock: trio.testing.MockClock
) -> None:
    """A tick late or kept from coming (frames arriving at it): the lease's loop asks
    the members itself, half a cadence after they came due, and a member that answers
    keeps the lease."""
    async with running(shard) as world:
        for _ in range(10):
            await trio.sleep(0.5)
            world.answer_all()
        assert world.pings[:2] == [(1.5, "b"), (1.5, "c")]
        assert world.crawler.paused is None


async def test_a_lease_nobody_answers_lapses_on_time_and_comes_back_with_an_answer(
    shard: Shard, autojump_clock: trio.testing.MockClock
) -> None:
    async with running(shard) as world:
        await trio.sleep(LEASE - 0.01)
        assert world.crawler.paused is None
        await trio.sleep(0.02)
        assert world.crawler.paused is not None  # no answer for the lease's 3 s
        world.answer_all()  # the pings it sent meanwhile are answered
        await trio.testing.wait_all_tasks_blocked()
        assert world.crawler.paused is None


async def test_a_holder_asks_a_majority_and_a_spare_and_another_for_one_gone_silent(
    shard: Shard, autojump_clock: trio.testing.MockClock
) -> None:
    """Eight in the base: each tick asks five (four others make a majority with this
    peer, and one to spare), not the seven it asked before. One of them goes silent:
    the next tick asks another beside the four that answered, and the lease holds."""
    world = World(shard, others="bcdefgh")
    world.lease.answered([(m, 0.0) for m in "bcdefgh"])
    await trio.sleep_until(1.0)
    world.lease.tick(1.0)
    first = {m for _, m in world.pings}
    assert len(first) == 5
    silent = min(first)
    world.lease.answered([(m, 1.0) for m in first - {silent}])
    await trio.sleep_until(2.0)
    world.lease.tick(2.0)
    second = {m for t, m in world.pings if t == 2.0}
    assert first - {silent} <= second and second - first
    world.lease.check()
    assert world.crawler.paused is None and world.quorum.holds(2.0)


async def test_an_ask_left_unanswered_is_repeated_half_a_cadence_later(
    shard: Shard, autojump_clock: trio.testing.MockClock
) -> None:
    """With five of seven asked, the lease has fewer answers to spare: one lost is
    asked for again half a cadence on, off the tick, not a cadence later, and the
    member not yet asked comes next to it; once only, then a cadence apart (asked every
    half cadence, a replaced peer that pinged the dead one's id at its own address got
    its own connections barred). At 15% loss each way, eight peers that asked all seven
    a cadence apart lost the lease 12 times in 12 runs of 300 s; asking five this way,
    4 times."""
    async with running(shard, others="bcdefgh") as world:
        await trio.sleep(1.6)  # no membership tick: the loop asks at 1.5
        first = {m for _, m in world.pings}
        assert len(first) == 5
        lost = min(first)
        world.lease.answered([(m, 1.5) for m in first - {lost}])
        await trio.sleep(0.5)
        again = [(t, m) for t, m in world.pings if t > 1.5]
        assert len(again) == 2 and (2.0, lost) in again
        assert all(t == 2.0 and m not in first - {lost} for t, m in again)
        assert world.crawler.paused is None
        await trio.sleep(1.1)  # unanswered again: next asked a cadence on, at 3.0
        assert [t for t, m in world.pings if m == lost] == [1.5, 2.0, 3.0]


class Frames:
    """What the lease sends and the handlers it installs, as the peer would take them."""

    def __init__(self, lease: Lease) -> None:
        self.sent: list[tuple[float, str, Message]] = []
        self.handlers: dict[type, Callable[[str, Any, Reply], Awaitable[None]]] = {}
        self.replies: list[Message] = []
        lease.install(self._handle, self._send, self._start_soon)
        self._nursery: trio.Nursery | None = None

    def _handle(self, kind: type[M], handler: Callable[[str, M, Reply], Awaitable[None]]) -> None:
        self.handlers[kind] = handler

    async def _send(self, address: str, message: Message) -> bool:
        self.sent.append((trio.current_time(), address, message))
        return True

    def _start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(fn, *args)

    async def deliver(self, sender: str, message: Message) -> None:
        async def reply(answer: Message) -> None:
            self.replies.append(answer)

        await self.handlers[type(message)](sender, message, reply)


async def test_a_new_peer_asks_each_member_once_a_cadence_until_a_holder_counts_it(
    shard: Shard, autojump_clock: trio.testing.MockClock
) -> None:
    """Pending: paused from the start, BASE_ASK to b and c every second; c's answer
    (cut off, not holding) changes nothing; b's, holding and naming it, lets it fetch,
    stops the asks, and is kept in the shard for the next run."""
    world = World(shard)
    world.lease.quorum = world.quorum = Quorum("a", "", lease=LEASE, newcomer=True)
    world.quorum.set_live("abc")
    frames = Frames(world.lease)
    async with trio.open_nursery() as nursery:
        frames._nursery = nursery
        world.lease.check()
        assert world.crawler.paused == (
            "new to the cluster: not yet counted by a member that holds the majority lease"
        )
        nursery.start_soon(world.lease.run)
        await trio.sleep(2.5)
        asks = sorted((t, a) for t, a, m in frames.sent if isinstance(m, BaseAsk))
        assert asks == [(t, f"10.0.0.{i}:7000") for t in (0.0, 1.0, 2.0) for i in (2, 3)]
        await frames.deliver("c", BaseAnswer(("b", "c", "d"), holds=False))
        await trio.testing.wait_all_tasks_blocked()
        assert world.crawler.paused is not None and world.quorum.pending
        await frames.deliver("b", BaseAnswer(("a", "b", "c"), holds=True))
        world.lease.answered([("b", trio.current_time())])  # b answers a ping, too
        await trio.testing.wait_all_tasks_blocked()
        assert world.crawler.paused is None and world.quorum.base == frozenset("abc")
        asked = len(frames.sent)
        for _ in range(10):  # its pings answered: it holds, and asks no more
            await trio.sleep(0.5)
            world.answer_all()
        assert not any(isinstance(m, BaseAsk) for _, _, m in frames.sent[asked:])
        await trio.sleep(LEASE + 1)  # unanswered: not holding, it asks for the base again
        assert any(isinstance(m, BaseAsk) for _, _, m in frames.sent[asked:])
        nursery.cancel_scope.cancel()
    assert load_quorum("a", shard, lease=LEASE, newcomer=True).base == frozenset("abc")


async def test_a_holder_asked_counts_the_asker_and_answers_with_its_base(
    shard: Shard, autojump_clock: trio.testing.MockClock
) -> None:
    world = World(shard)
    world.lease.answered([("b", 0.0), ("c", 0.0)])
    world.membership._members["d"] = Member("d", "10.0.0.4:7000", MemberState.ALIVE, 0)
    world.quorum.set_live("abcd")  # d joined
    frames = Frames(world.lease)
    await frames.deliver("d", BaseAsk())
    # Not before d has answered a ping (its address may not be its own): the lease
    # pings it, and d, not named yet, asks again.
    assert frames.replies == [BaseAnswer(("a", "b", "c"), holds=True)]
    world.lease.tick(0.0)
    assert (0.0, "d") in world.pings
    async with trio.open_nursery() as nursery:
        frames._nursery = nursery
        world.answer_all()
    # d is not confirmed yet: a, b and c stay joint with the base, and the newcomer
    # will hold that joint too. It is told at once, unasked (its next ask is a cadence
    # away, and the holder may be gone by then: a review), and again when it asks.
    counted = BaseAnswer(("a", "b", "c", "d"), holds=True, joint=("a", "b", "c"))
    assert [(to, m) for _, to, m in frames.sent if isinstance(m, BaseAnswer)] == [
        ("10.0.0.4:7000", counted)
    ]
    await frames.deliver("d", BaseAsk())
    assert frames.replies[1:] == [counted]
    # Kept with its joint base: back from a stop before d is confirmed, the peer still
    # needs a majority of a, b and c.
    restored = load_quorum("a", shard, lease=LEASE, newcomer=False)
    assert (restored.base, restored.joint) == (frozenset("abcd"), frozenset("abc"))


async def test_a_newcomer_told_its_base_by_a_holder_gone_since_drops_it_and_holds(
    shard: Shard, autojump_clock: trio.testing.MockClock
) -> None:
    """A holder that leaves tells its base first; when its leave comes first all the
    same, the base taken names a peer gone, which the newcomer, holding no lease on
    it, could never drop (a review: new to the cluster for good). It is dropped as the
    leave would have dropped it."""
    world = World(shard, others="b", quorum=Quorum("a", (), lease=LEASE, newcomer=True))
    world.membership._members["b"] = Member("b", "10.0.0.2:7000", MemberState.LEFT, 0)
    world.lease.membership_changed([])
    frames = Frames(world.lease)
    await frames.deliver("b", BaseAnswer(("a", "b"), holds=True, joint=("b",)))
    assert not world.quorum.pending
    assert (world.quorum.base, world.quorum.joint) == (frozenset("a"), None)
    assert world.quorum.holds(trio.current_time())


async def test_a_member_back_after_a_leave_that_was_lost_leaves_the_bases_naming_it(
    shard: Shard, autojump_clock: trio.testing.MockClock
) -> None:
    """Back with the base {a, b} its last run kept, a waited for b to count it; b had
    left during a cut, its leave lost, and came back new, counting nobody: both waited
    for good (a review's triage). b's answer says it left: a drops it, as the leave
    would have made it, and holds alone. A newcomer that did not leave is kept."""
    restored = Quorum("a", "ab", lease=LEASE, restored=True)
    world = World(shard, others="bc", quorum=restored)
    frames = Frames(world.lease)
    await frames.deliver("c", BaseAnswer((), False))  # new: never named in a's base
    await frames.deliver("b", BaseAnswer((), False, informed=True))
    assert world.quorum.base == {"a", "b"}  # pending, but not said to have left
    await frames.deliver("b", BaseAnswer((), False, informed=True, left=True))
    assert world.quorum.base == {"a"}
    assert world.quorum.restore(trio.current_time())
    assert world.quorum.holds(trio.current_time())
    # A holder takes no such word: the answer may be older than a base counting b again.
    world.quorum.set_live("abc")
    async with trio.open_nursery() as nursery:
        frames._nursery = nursery
        world.lease.answered([("c", trio.current_time())])
    assert world.quorum.base == {"a", "c"}
    await frames.deliver("c", BaseAnswer((), False, left=True))
    assert world.quorum.base == {"a", "c"}
    # What a returned peer says of itself, and only while nobody has counted it.
    back = Quorum("b", (), lease=LEASE, newcomer=True, returned=True)
    assert back.returned
    assert back.answered("a", ("a", "b"), 0.0, holds=True, informed=False)
    assert not back.returned
    assert not Quorum("b", (), lease=LEASE, newcomer=True).returned


async def test_a_peer_that_leaves_keeps_no_base_unless_it_was_alone(
    shard: Shard, autojump_clock: trio.testing.MockClock
) -> None:
    """The others drop a leaving peer from their base at once; the one it would keep
    would name it where theirs no longer do. Started again, it is new to the cluster
    (pending, with --join). Later leaves shrink its base as they come (to itself alone
    as a whole cluster stops), but what it keeps is decided before they do."""
    world = World(shard)
    world.lease.answered([("b", 0.0), ("c", 0.0)])
    world.membership.leave(0.0)
    world.lease.left()  # as the peer's leave does, whether or not its event comes back
    back = load_quorum("a", shard, lease=LEASE, newcomer=True)
    assert back.pending and back.returned  # and says so (a base still naming it drops it)
    assert back.informed  # of the base it left, {a, b, c}: none of it is back in sight
    world.quorum.gone("b", 0.5, left=True)
    world.quorum.gone("c", 0.5, left=True)
    world.lease._remember()  # as a change of the base does
    assert world.quorum.base == frozenset("a")
    assert load_quorum("a", shard, lease=LEASE, newcomer=True).pending
    # Killed instead, the peer keeps its base, and restores it.
    kept = World(shard)
    kept.lease.answered([("b", 0.0), ("c", 0.0)])
    kept.quorum.set_live("abcd")
    kept.lease.answered([("d", 0.0)])  # d admitted: the base is written
    back = load_quorum("a", shard, lease=LEASE, newcomer=True)
    assert back.restoring and back.base == frozenset("abcd")


async def test_a_lone_peer_that_leaves_keeps_its_base_of_itself(
    shard: Shard, autojump_clock: trio.testing.MockClock
) -> None:
    world = World(shard)
    world.lease.quorum = world.quorum = Quorum("a", "a", lease=LEASE)
    world.lease._remember()
    world.lease.stopping()
    world.membership.leave(0.0)
    world.lease.left()
    again = load_quorum("a", shard, lease=LEASE, newcomer=True)
    assert again.base == frozenset("a") and again.holds(0.0)


async def test_what_a_peer_keeps_is_decided_when_it_is_asked_to_stop(
    shard: Shard, autojump_clock: trio.testing.MockClock
) -> None:
    """A whole cluster stopped at once: b's and c's leaves reach a while it drains,
    before its own leave, and shrink its base to itself alone. Decided at its leave, a
    kept that, as a lone peer does, and started again held a lease alone beside the
    base another founded (a review). It keeps none: it was not alone when asked."""
    world = World(shard)
    world.lease.answered([("b", 0.0), ("c", 0.0)])
    world.lease.stopping()
    world.quorum.gone("b", 0.5, left=True)
    world.quorum.gone("c", 0.5, left=True)
    world.lease._remember()  # as a change of the base does
    assert world.quorum.base == frozenset("a")
    world.membership.leave(1.0)
    world.lease.left()
    assert load_quorum("a", shard, lease=LEASE, newcomer=True).pending
    # Alone when asked to stop, but b admitted while it drains: not alone either.
    lone = World(shard)
    lone.lease.quorum = lone.quorum = Quorum("a", "a", lease=LEASE)
    lone.lease.stopping()
    lone.quorum.set_live("ab")
    lone.lease.answered([("b", 0.0)])  # b admitted: the base is written
    assert lone.quorum.base == frozenset("ab")
    lone.membership.leave(1.0)
    lone.lease.left()
    assert load_quorum("a", shard, lease=LEASE, newcomer=True).pending
