"""The monitor: what a control peer keeps of the figures pushed to it, and whom it
asks for them (the control centre's end-to-end test runs it with real peers)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import trio

from ubipy.control.monitor import Monitor, Reply
from ubipy.membership import Member, MemberState
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

    def seed_urls(self, urls: Sequence[str]) -> SeedAck:
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


def test_a_control_peer_asks_every_member_known_or_joining_for_figures() -> None:
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
