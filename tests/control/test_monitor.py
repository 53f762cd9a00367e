"""The monitor: what a control peer keeps of the figures pushed to it, and whom it
asks for them (the control centre's end-to-end test runs it with real peers)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import trio
import trio.testing

from tests.cluster.harness import SimPeer, host_of
from tests.cluster.harness import cluster as sim_cluster
from ubipy.control.monitor import ASK_AGAIN_AFTER, Monitor, Reply
from ubipy.membership import Member, MemberState
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.wire import Control, Figures, Message, SeedAck


@dataclass
class Status:
    pages: int = 7

    def as_json(self) -> dict[str, Any]:
        return {"peer_id": "me", "pages": self.pages}


@dataclass
class FakePeer:
    """What the monitor uses of a peer."""

    peer_id: str = "me"
    address: str = "127.0.0.1:1"
    secret: bytes = b"k"
    members_: dict[str, Member] = field(default_factory=dict)
    started: list[tuple[Any, ...]] = field(default_factory=list)
    handlers: dict[type, Callable[[str, Any, Reply], Awaitable[None]]] = field(default_factory=dict)
    joined: list[Callable[[str], None]] = field(default_factory=list)
    stopped: bool = False

    @property
    def membership(self) -> FakePeer:
        return self

    def members(self) -> list[Member]:
        return list(self.members_.values())

    def status(self) -> Status:
        return Status()

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        self.started.append(args)

    def stop(self) -> None:
        self.stopped = True

    async def seed(self, urls: Sequence[str]) -> SeedAck:
        return SeedAck(offered=len(urls), admitted=len(urls))

    async def send(self, address: str, message: Message) -> bool:
        await trio.lowlevel.checkpoint()
        return True

    def handle(
        self, kind: type[Any], handler: Callable[[str, Any, Reply], Awaitable[None]]
    ) -> None:
        self.handlers[kind] = handler

    def on_member_joined(self, callback: Callable[[str], None]) -> None:
        self.joined.append(callback)


async def no_reply(message: Message) -> None:
    raise AssertionError("figures are not answered")


def cluster() -> FakePeer:
    fake = FakePeer()
    for peer_id, port in (("me", 1), ("b", 2), ("c", 3)):
        fake.members_[peer_id] = Member(peer_id, f"127.0.0.1:{port}", MemberState.ALIVE, 0)
    return fake


async def test_a_control_peer_keeps_each_members_figures_and_a_dead_ones_last() -> None:
    fake = cluster()
    monitor = Monitor(fake)
    monitor.attach("127.0.0.1:8080")
    figures = Figures({"pages": 3, "pages_per_second": 1.5, "storage_error": None})
    await fake.handlers[Figures]("b", figures, no_reply)
    fake.members_["b"] = replace(fake.members_["b"], state=MemberState.DEAD)
    view = monitor.cluster_view()
    assert view["me"]["pages"] == 7 and view["me"]["state"] == "alive"
    assert view["b"] == {
        "pages": 3,
        "pages_per_second": 1.5,
        "storage_error": None,
        "address": "127.0.0.1:2",
        "state": "dead",
    }
    assert view["c"] == {"address": "127.0.0.1:3", "state": "alive"}  # not reported yet


def test_a_peer_that_is_not_a_control_peer_keeps_no_figures() -> None:
    fake = cluster()
    monitor = Monitor(fake)
    monitor.on_figures("b", Figures({"pages": 3}))
    assert monitor.cluster_view()["b"] == {"address": "127.0.0.1:2", "state": "alive"}
    assert fake.handlers == {}  # nor does it ask for them


async def test_a_control_peer_asks_every_member_known_or_joining_for_figures() -> None:
    fake = cluster()
    monitor = Monitor(fake)
    monitor.member_joined("127.0.0.1:2")
    assert fake.started == []  # not a control peer yet
    monitor.attach("127.0.0.1:8080")
    asked = Control("127.0.0.1:8080", "127.0.0.1:1")
    assert sorted(fake.started) == [("127.0.0.1:2", asked), ("127.0.0.1:3", asked)]
    fake.started.clear()
    for joined in fake.joined:
        joined("127.0.0.1:4")
    assert fake.started == [("127.0.0.1:4", asked)]


async def test_a_live_member_whose_figures_stop_is_asked_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Only a join asked a member for its figures: one that forgot the control peer
    (it saw it dead) or never got the CONTROL was never asked again (found by a
    review). A live member silent for ASK_AGAIN_AFTER is asked again, at most once in
    that time; one that pushes, and one that is dead, are not."""
    fake = cluster()
    fake.members_["d"] = Member("d", "127.0.0.1:4", MemberState.ALIVE, 0)
    monitor = Monitor(fake)
    monitor.attach("127.0.0.1:8080")
    fake.members_["d"] = replace(fake.members_["d"], state=MemberState.DEAD)
    asked = Control("127.0.0.1:8080", "127.0.0.1:1")
    fake.started.clear()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(monitor.ask_again_forever)
        # Four beats and a half: b pushes every second, c never.
        for _ in range(int(4.5 * ASK_AGAIN_AFTER)):
            await trio.sleep(1.0)
            await fake.handlers[Figures]("b", Figures({"pages": 1}), no_reply)
        nursery.cancel_scope.cancel()
    assert fake.started == [("127.0.0.1:3", asked)] * 4


async def test_a_member_asked_between_two_beats_is_asked_again_within_a_second_of_its_due(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A control peer back from a restart asks a member that still sees it dead, which
    drops the CONTROL. Looked at every ASK_AGAIN_AFTER, a member asked just after a
    beat was asked again two beats later (QA: its row empty for 11 s)."""
    fake = cluster()
    monitor = Monitor(fake)
    asked = Control("127.0.0.1:8080", "127.0.0.1:1")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(monitor.ask_again_forever)
        await trio.sleep(0.5)
        monitor.attach("127.0.0.1:8080")  # asks b and c; b pushes, c's ask was lost
        fake.started.clear()
        for _ in range(int(ASK_AGAIN_AFTER) + 1):
            await trio.sleep(1.0)
            await fake.handlers[Figures]("b", Figures({"pages": 1}), no_reply)
        nursery.cancel_scope.cancel()
    assert fake.started == [("127.0.0.1:3", asked)]


WEB = SyntheticWeb(WebSpec(seed=3, hosts=2, pages_per_host=2))


class WatchedMonitor(Monitor):
    """A monitor that says when figures arrive."""

    def __init__(self, sim: SimPeer) -> None:
        super().__init__(sim.peer)
        self.arrived = trio.Event()

    def on_figures(self, sender: str, figures: Figures) -> None:
        super().on_figures(sender, figures)
        self.arrived.set()
        self.arrived = trio.Event()

    async def until(self, condition: Callable[[], bool]) -> None:
        while not condition():
            await self.arrived.wait()


async def test_figures_come_again_after_the_control_peer_was_cut_off(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The control peer cut off: the others declare it dead and forget it, while it
    only suspects them; on the heal their suspicions are refuted, none joins, and no
    CONTROL was sent again. The dashboard showed their figures of before the cut for
    good (found by a review)."""
    async with sim_cluster(tmp_path, WEB, seed=1) as c:
        sims = await c.start_joined(4)
        control, others = sims[0], sims[1:]
        monitor = WatchedMonitor(control)

        def current() -> bool:
            """The control peer has each other's figures of the last few seconds."""
            view = monitor.cluster_view()
            return all(
                abs(view[s.peer_id].get("uptime", -99.0) - s.peer.status().uptime) < 3.0
                for s in others
            )

        def forgotten(sim: SimPeer) -> bool:
            member = sim.peer.membership.member(control.peer_id)
            return member is not None and member.state is MemberState.DEAD

        async with trio.open_nursery() as nursery:
            monitor.attach("127.0.0.1:8080")
            nursery.start_soon(monitor.ask_again_forever)
            with trio.fail_after(10):
                await monitor.until(current)
            c.net.partition([host_of(0)], [s.host for s in others])
            with trio.fail_after(60):
                await c.wait_until(lambda: all(forgotten(s) for s in others))
            assert not any(  # the control peer saw none of them die: no join will come
                m.state is MemberState.DEAD for m in control.peer.membership.members()
            )
            c.net.heal()
            with trio.fail_after(60):
                await monitor.until(current)
            await trio.sleep(10.0)  # and they keep coming
            assert current()
            nursery.cancel_scope.cancel()
