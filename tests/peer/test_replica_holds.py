"""Holds (``--replicas 2``): a host gets no new request until the outcome of its last
one is stored by its successor, so the frame whose acknowledgement releases it must
hold that outcome and go to the successor it has now."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import trio

from tests.peer.test_handoff import crawler_at
from tests.peer.test_replica import page
from tests.peer.test_replica_whole import AB, ABC, hosts_where
from ubipy.peer.crawler import Crawler
from ubipy.peer.replica import Replicator
from ubipy.store.shard import HostMark
from ubipy.wire import Message, Replica, ReplicaAck


@dataclass
class Link:
    """a's frames to b and c, stored there; acknowledged when the test says. A send
    to a peer in ``slow`` waits until its gate opens (a connection's write)."""

    received: dict[str, Replicator]
    seqs: dict[str, list[int]] = field(default_factory=dict)
    hosts: dict[str, list[str]] = field(default_factory=dict)
    slow: dict[str, trio.Event] = field(default_factory=dict)
    waiting: set[str] = field(default_factory=set)  # sends held at a gate
    changed: trio.Event = field(default_factory=trio.Event)
    owner: Replicator | None = None

    async def send(self, address: str, message: Message) -> bool:
        assert isinstance(message, Replica)
        peer = address.removesuffix(":1")
        if peer in self.slow:
            self.waiting.add(peer)
            self._tell()
            await self.slow[peer].wait()
            self.waiting.discard(peer)
        self.received[peer].receive(message, "a")
        self.seqs.setdefault(peer, []).append(message.seq)
        self.hosts.setdefault(peer, []).extend(h.host for h in message.hosts)
        self._tell()
        return True

    def _tell(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def until(self, what: str, test: Callable[[], bool]) -> None:
        """Wait until ``test()`` (``what`` names it for the reader)."""
        with trio.fail_after(5):
            while not test():
                await self.changed.wait()

    def ack(self, peer: str, seqs: list[int] | None = None) -> None:
        assert self.owner is not None
        for seq in list(self.seqs.get(peer, [])) if seqs is None else seqs:
            self.owner.acked(ReplicaAck(seq))


@asynccontextmanager
async def replicating(tmp: Path) -> AsyncIterator[tuple[Crawler, Replicator, Link]]:
    async with (
        crawler_at(tmp / "a") as a,
        crawler_at(tmp / "b") as b,
        crawler_at(tmp / "c") as c,
    ):
        link = Link(
            {
                name: Replicator(name, 2, crawler, crawler._shard, _unused, lambda p: None)
                for name, crawler in (("b", b), ("c", c))
            }
        )
        ra = link.owner = Replicator("a", 2, a, a._shard, link.send, lambda peer: f"{peer}:1")
        ra.ring_changed(AB)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ra.run)
            yield a, ra, link
            nursery.cancel_scope.cancel()


async def _unused(address: str, message: Message) -> bool:
    raise AssertionError("the successors send nothing here")


async def test_a_frame_made_before_a_requests_commit_does_not_release_its_host(
    tmp_path: Path,
) -> None:
    """A frame naming a host, made before the commit recording the host's last
    request and sent while that commit was made, released the host once it was
    acknowledged: the outcome, queued after it, was not stored by the successor yet."""
    [host] = hosts_where(1, (AB, "a", "b"))
    url = f"http://{host}/0"
    async with replicating(tmp_path) as (a, ra, link):
        link.slow["b"] = gate = trio.Event()
        a.seed([url])  # its frame is on its way to b
        await link.until("the first frame at the gate", lambda: "b" in link.waiting)
        a.on_request_end(host)
        a._shard.record_pages([page(url)])
        a.on_commit([], [page(url)], {host: HostMark(time.time(), 0.0, 1)})
        assert ra.holding == 1
        del link.slow["b"]
        gate.set()
        await link.until("two frames at b", lambda: len(link.seqs.get("b", [])) == 2)
        first, second = link.seqs["b"]
        link.ack("b", [first])
        assert ra.holding == 1  # the outcome is in the second frame
        link.ack("b", [second])
        assert ra.holding == 0


async def test_a_held_host_is_released_by_its_new_successor_not_its_old_one(
    tmp_path: Path,
) -> None:
    """The outcome of a host's last request was queued for its successor b when the
    ring changed and made c its successor: c's acknowledgement of the host's whole
    copy releases it, not b's of the frame that was queued."""
    [host] = hosts_where(1, (AB, "a", "b"), (ABC, "a", "c"))
    async with replicating(tmp_path) as (a, ra, link):
        a.seed([f"http://{host}/0"])
        await link.until("the URL at b", lambda: link.hosts.get("b") == [host])
        link.ack("b")
        link.slow["c"] = gate = trio.Event()
        a.on_request_end(host)
        a._shard.record_pages([page(f"http://{host}/0")])
        a.on_commit([], [page(f"http://{host}/0")], {host: HostMark(time.time(), 0.0, 1)})
        ra.ring_changed(ABC)  # before b's sender's turn
        await link.until("the outcome at b", lambda: link.hosts["b"] == [host, host])
        await link.until("the whole copy at c's gate", lambda: "c" in link.waiting)
        link.ack("b")
        assert ra.holding == 1  # c has not stored the host's last request yet
        gate.set()
        await link.until("the whole copy at c", lambda: link.hosts.get("c") == [host])
        link.ack("c")
        assert ra.holding == 0
        done = link.received["c"]._shard.replica_of(host)[1]
        assert len(done) == 1
