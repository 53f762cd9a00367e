"""The monitor: what a control peer keeps of the figures pushed to it, and who a
peer pushes to (the control centre's end-to-end test runs it with real peers)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
import trio

from ubipy.control.monitor import Monitor
from ubipy.membership import Member, MemberState
from ubipy.wire import FrameType


@dataclass
class Status:
    pages: int = 7

    def as_json(self) -> dict[str, Any]:
        return {"peer_id": "me", "pages": self.pages}


@dataclass
class FakePeer:
    """What Monitor uses of a Peer."""

    peer_id: str = "me"
    address: str = "127.0.0.1:1"
    secret: bytes = b"k"
    members_: dict[str, Member] = field(default_factory=dict)
    started: list[tuple[Any, ...]] = field(default_factory=list)
    stopped: bool = False

    @property
    def membership(self) -> FakePeer:
        return self

    def members(self) -> list[Member]:
        return list(self.members_.values())

    def member(self, peer_id: str) -> Member | None:
        return self.members_.get(peer_id)

    def status(self) -> Status:
        return Status()

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        self.started.append(args)

    def stop(self) -> None:
        self.stopped = True

    def seed_urls(self, urls: object) -> dict[str, Any]:
        return {"offered": urls}


def monitor_of(fake: FakePeer) -> Monitor:
    async def send(address: str, kind: FrameType, payload: Any) -> bool:
        await trio.lowlevel.checkpoint()
        return True

    return Monitor(fake, send)


def cluster() -> FakePeer:
    fake = FakePeer()
    for peer_id, port in (("me", 1), ("b", 2), ("c", 3)):
        fake.members_[peer_id] = Member(peer_id, f"127.0.0.1:{port}", MemberState.ALIVE, 0)
    return fake


def test_a_control_peer_keeps_each_members_figures_and_a_dead_ones_last() -> None:
    fake = cluster()
    monitor = monitor_of(fake)
    monitor.control_address = "127.0.0.1:8080"
    monitor.on_figures("b", {"pages": 3, "pages_per_second": 1.5, "storage_error": None})
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


@pytest.mark.parametrize(
    "payload",
    [[1, 2], {"pages": [1]}, {1: 2}, {f"k{i}": i for i in range(101)}, {"x": {"y": 1}}],
)
def test_figures_that_are_not_a_flat_map_are_refused(payload: Any) -> None:
    monitor = monitor_of(cluster())
    monitor.control_address = "127.0.0.1:8080"
    with pytest.raises(ValueError):
        monitor.on_figures("b", payload)
    assert "b" not in monitor._figures


def test_a_peer_that_is_not_a_control_peer_keeps_no_figures() -> None:
    monitor = monitor_of(cluster())
    monitor.on_figures("b", {"pages": 3})
    assert monitor.cluster_view()["b"] == {"address": "127.0.0.1:2", "state": "alive"}


def test_figures_go_to_each_live_control_peer_and_stop_when_it_dies() -> None:
    fake = cluster()
    monitor = monitor_of(fake)
    monitor.push()
    assert fake.started == []  # nobody asked for them
    monitor.on_control("b", {"control": "127.0.0.1:8080", "peer": "127.0.0.1:2"})
    monitor.push()
    assert fake.started == [("127.0.0.1:2", FrameType.FIGURES, {"peer_id": "me", "pages": 7})]
    fake.members_["b"] = replace(fake.members_["b"], state=MemberState.DEAD)
    fake.started.clear()
    monitor.push()
    monitor.push()
    assert fake.started == []
    with pytest.raises(ValueError):
        monitor.on_control("c", {"control": "127.0.0.1:8080"})
    with pytest.raises(ValueError):
        monitor.on_control("c", {"control": 5, "peer": "127.0.0.1:3"})


def test_a_newcomer_pushes_to_a_control_peer_it_has_not_heard_of_yet() -> None:
    fake = cluster()
    monitor = monitor_of(fake)
    monitor.on_control("new", {"control": "127.0.0.1:8080", "peer": "127.0.0.1:9"})
    monitor.push()
    assert fake.started == [("127.0.0.1:9", FrameType.FIGURES, {"peer_id": "me", "pages": 7})]


def test_a_control_peer_asks_every_member_it_learns_of_for_figures() -> None:
    fake = cluster()
    monitor = monitor_of(fake)
    monitor.member_joined("127.0.0.1:2")
    assert fake.started == []  # not a control peer
    monitor.control_address = "127.0.0.1:8080"
    monitor.member_joined("127.0.0.1:2")
    assert fake.started == [
        ("127.0.0.1:2", FrameType.CONTROL, {"control": "127.0.0.1:8080", "peer": "127.0.0.1:1"})
    ]
