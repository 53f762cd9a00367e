"""A peer's reporting: whom it pushes its figures to, and a stop from the control
centre (the control centre's end-to-end test runs it with real peers)."""

from __future__ import annotations

import random
from typing import Any

import trio
import trio.testing

from tests.wakeups import counting_steps
from ubipy.membership import Member, Membership, MembershipConfig, MemberState
from ubipy.peer.reporting import UNKNOWN_PATIENCE, Reporter
from ubipy.wire import Control, Figures, Message, Stop

FIGURES = Figures({"peer_id": "me", "pages": 7})


class World:
    def __init__(self) -> None:
        self.membership = Membership("me", "127.0.0.1:1", MembershipConfig(), random.Random(1))
        self.started: list[tuple[Any, ...]] = []
        self.stopped = False
        self.reporter = Reporter(
            "me", self.membership, lambda: FIGURES, self.send, self.start_soon, self.stop
        )

    async def send(self, address: str, message: Message) -> bool:
        return True

    def start_soon(self, fn: Any, *args: Any) -> None:
        self.started.append(args)

    def stop(self) -> None:
        self.stopped = True

    def learn(self, member: Member) -> None:
        self.membership._members[member.id] = member


async def no_reply(message: Message) -> None:
    raise AssertionError("not answered")


async def test_figures_go_to_each_live_control_peer_and_stop_when_it_dies() -> None:
    world = World()
    world.learn(Member("b", "127.0.0.1:2", MemberState.ALIVE, 0))
    world.reporter.push()
    assert world.started == []  # nobody asked for them
    await world.reporter.on_control("b", Control("127.0.0.1:8080", "127.0.0.1:2"), no_reply)
    world.reporter.push()
    assert world.started == [("127.0.0.1:2", FIGURES)]
    world.learn(Member("b", "127.0.0.1:2", MemberState.DEAD, 0))
    world.started.clear()
    world.reporter.push()
    world.reporter.push()
    assert world.started == []


async def test_a_newcomer_pushes_to_a_control_peer_it_has_not_heard_of_yet() -> None:
    world = World()
    await world.reporter.on_control("new", Control("127.0.0.1:8080", "127.0.0.1:9"), no_reply)
    world.reporter.push()
    assert world.started == [("127.0.0.1:9", FIGURES)]


async def test_a_control_peer_that_never_becomes_a_member_is_given_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Any authentic sender could name any address (another machine's, this peer's
    own): it was pushed to once a second for ever, the dials to an address that
    answers nothing piling up (found by a review). A member is pushed to at its own
    address; one gossip never tells of is given up after a minute."""
    world = World()
    await world.reporter.on_control("ghost", Control("127.0.0.1:8080", "10.9.9.9:7"), no_reply)
    await world.reporter.on_control("b", Control("127.0.0.1:8080", "10.9.9.9:7"), no_reply)
    world.learn(Member("b", "127.0.0.1:2", MemberState.ALIVE, 0))
    world.reporter.push()
    assert sorted(world.started) == [("10.9.9.9:7", FIGURES), ("127.0.0.1:2", FIGURES)]
    await trio.sleep(UNKNOWN_PATIENCE + 1)
    world.started.clear()
    world.reporter.push()
    assert world.started == [("127.0.0.1:2", FIGURES)]


async def test_a_stop_from_the_control_centre_stops_the_peer() -> None:
    world = World()
    await world.reporter.on_stop("b", Stop(), no_reply)
    assert world.stopped


async def test_figures_are_read_only_while_a_control_centre_listens(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An idle peer with no control centre does no reporting work at all; once one
    asks, its figures go out about once a second, and stop when it dies."""
    world = World()
    world.learn(Member("b", "127.0.0.1:2", MemberState.ALIVE, 0))
    readings: list[float] = []

    def figures() -> Figures:
        readings.append(trio.current_time())
        return FIGURES

    world.reporter._figures = figures
    async with trio.open_nursery() as nursery:
        nursery.start_soon(world.reporter.push_forever)
        with counting_steps("push_forever") as steps:
            await trio.sleep(30)
        assert steps.steps <= 1  # started, then asleep
        assert readings == []
        await world.reporter.on_control("b", Control("127.0.0.1:8080", "127.0.0.1:2"), no_reply)
        await trio.sleep(10.5)
        assert len(readings) == 10
        assert len(world.started) == 10
        world.learn(Member("b", "127.0.0.1:2", MemberState.DEAD, 0))
        await trio.sleep(1.0)  # the next push finds it dead and forgets it
        count = len(readings)
        with counting_steps("push_forever") as steps:
            await trio.sleep(30)
        assert steps.steps <= 2
        assert len(readings) == count
        nursery.cancel_scope.cancel()
