"""Whole copies (``--replicas 2``): after a ring change, the hosts whose successor
changed are copied whole to the new one. Only their names are noted then; each
host's state is read from the shard when its frame is made, a frame's worth at a
time with the event loop turning between reads, and as it is then."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.peer.test_handoff import crawler_at
from tests.peer.test_replica import page
from ubipy.fetch.urls import fingerprint
from ubipy.peer.crawler import Crawler
from ubipy.peer.replica import Replicator
from ubipy.peer.replicaframes import CHUNK
from ubipy.ring import Ring
from ubipy.store.shard import HostMark, NewURL
from ubipy.wire import HostCopy, Message, Replica

AB = Ring(["a", "b"])
ABC = Ring(["a", "b", "c"])


def hosts_where(count: int, *rings: tuple[Ring, str, str | None]) -> list[str]:
    """``count`` hosts that, under each ring given, have that owner and successor
    (None: not a's)."""
    found = []
    for i in range(100_000):
        host = f"h{i:05d}.synth.test"
        if all(
            ring.owner(host) == owner
            and (successor is None or ring.successors(host, 2)[1] == successor)
            for ring, owner, successor in rings
        ):
            found.append(host)
            if len(found) == count:
                return found
    raise AssertionError("not so many such hosts")


@dataclass
class Peers:
    """a's replicator and what its frames brought b and c (stored there as on the wire)."""

    a: Crawler
    ra: Replicator
    received: dict[str, Replicator]
    entries: dict[str, list[HostCopy]] = field(default_factory=dict)
    arrived: trio.Event = field(default_factory=trio.Event)

    def hosts_at(self, peer: str) -> list[str]:
        return [e.host for e in self.entries.get(peer, [])]

    async def wait_for(self, peer: str, hosts: int) -> None:
        with trio.fail_after(5):
            while len(set(self.hosts_at(peer))) < hosts:
                await self.arrived.wait()


@asynccontextmanager
async def peers(tmp: Path) -> AsyncIterator[Peers]:
    async with (
        crawler_at(tmp / "a") as a,
        crawler_at(tmp / "b") as b,
        crawler_at(tmp / "c") as c,
    ):
        received = {
            name: Replicator(name, 2, crawler, crawler._shard, _unused, lambda p: None)
            for name, crawler in (("b", b), ("c", c))
        }
        at: Peers

        async def send(address: str, message: Message) -> bool:
            assert isinstance(message, Replica)
            peer = address.removesuffix(":1")
            received[peer].receive(message, "a")
            at.entries.setdefault(peer, []).extend(message.hosts)
            at.arrived.set()
            at.arrived = trio.Event()
            return True

        ra = Replicator("a", 2, a, a._shard, send, lambda peer: f"{peer}:1")
        at = Peers(a, ra, received)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ra.run)
            yield at
            nursery.cancel_scope.cancel()


async def _unused(address: str, message: Message) -> bool:
    raise AssertionError("the successors send nothing here")


async def test_a_ring_change_reads_its_hosts_a_few_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """1,000 hosts read whole at a ring change held the event loop 5 s (5 ms a read at
    2M rows) and all their rows in memory until sent. Now none is read as the ring
    changes; the reads come as their frames are made, another task running between
    any two, and no more than about a frame's worth read and not yet sent."""
    per_host = 50
    hosts = hosts_where(3 * CHUNK // per_host, (AB, "a", "b"))
    async with peers(tmp_path) as at:
        at.a.seed([f"http://{h}/{i}" for h in hosts for i in range(per_host)])
        turns = 0
        reads: list[tuple[int, int]] = []  # the other task's turns and the hosts unsent
        host_state = at.a._shard.host_state

        def counted(host: str) -> tuple[list[NewURL], list[int], HostMark | None]:
            reads.append((turns, len(reads) - len(set(at.hosts_at("b")))))
            return host_state(host)

        monkeypatch.setattr(at.a._shard, "host_state", counted)

        async def other_task() -> None:
            nonlocal turns
            while True:
                turns += 1
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_task)
            at.ra.ring_changed(AB)  # every host of a's has a successor now: b
            assert reads == []
            await at.wait_for("b", len(hosts))
            nursery.cancel_scope.cancel()
        assert len(reads) == len(hosts)
        # Trio runs a batch of tasks in either order: the other task ran between any
        # read and the one after the next.
        assert all(reads[i][0] < reads[i + 2][0] for i in range(len(reads) - 2))
        assert max(unsent for _, unsent in reads) <= CHUNK // per_host
        b = at.received["b"]._shard
        assert sorted(b.replica_hosts()) == sorted(hosts)
        assert all(len(b.replica_of(h)[0]) == per_host for h in hosts)


async def test_what_is_committed_while_a_whole_copy_waits_goes_once(tmp_path: Path) -> None:
    """A host's state is read when its frame is made: a page fetched and a URL found
    since the ring change are in it once, the page done (read at the change, its URL
    went as pending and its page as done too)."""
    [host] = hosts_where(1, (AB, "a", "b"))
    urls = [f"http://{host}/{i}" for i in range(5)]
    async with peers(tmp_path) as at:
        at.a.seed(urls)
        at.ra.ring_changed(AB)
        # Before the sender's turn: a page of the host is stored, a URL found on it.
        at.a._shard.record_pages([page(urls[0])])
        at.ra.committed([], [page(urls[0])], {})
        at.a.seed([f"http://{host}/new"])
        await at.wait_for("b", 1)
        await trio.testing.wait_all_tasks_blocked()
        [entry] = at.entries["b"]
        assert sorted(u for u, _, _ in entry.pending) == sorted([*urls[1:], f"http://{host}/new"])
        assert list(entry.done) == [fingerprint(urls[0])]
        pending, done, _ = at.received["b"]._shard.replica_of(host)
        assert len(pending) == 5 and done == [fingerprint(urls[0])]


async def test_a_host_no_longer_ours_when_its_whole_copy_is_read_is_not_copied(
    tmp_path: Path,
) -> None:
    """The ring changed again before the read: a host that became c's (and was handed
    to c, forgotten here) goes to nobody; one whose successor became c goes to c, and
    not to b, its successor no more."""
    [gone] = hosts_where(1, (AB, "a", "b"), (ABC, "c", None))
    [moved] = hosts_where(1, (AB, "a", "b"), (ABC, "a", "c"))
    [stays] = hosts_where(1, (AB, "a", "b"), (ABC, "a", "b"))
    async with peers(tmp_path) as at:
        at.a.seed([f"http://{h}/{i}" for h in (gone, moved, stays) for i in range(3)])
        at.ra.ring_changed(AB)
        at.ra.ring_changed(ABC)
        at.a.handed_off(gone)
        await at.wait_for("c", 1)
        await at.wait_for("b", 1)
        await trio.testing.wait_all_tasks_blocked()
        assert at.hosts_at("b") == [stays]
        assert at.hosts_at("c") == [moved]
        assert len(at.received["c"]._shard.replica_of(moved)[0]) == 3


async def test_a_host_taken_over_goes_to_its_successor_with_its_history_and_mark(
    tmp_path: Path,
) -> None:
    """a takes a host from its previous owner (a hand-off's chunk): its pending URLs
    went to a's successor as any admitted, but not the pages done elsewhere nor its
    mark. Had a died, its successor would have fetched those pages again, without the
    wait owed after the last request. They go now too."""
    [host] = hosts_where(1, (AB, "a", "b"))
    done = [fingerprint(f"http://{host}/done{i}") for i in range(3)]
    mark = HostMark(last_end=1_700_000_000.0, delay=7.0, pages=3)
    async with peers(tmp_path) as at:
        at.ra.ring_changed(AB)
        pending = [f"http://{host}/todo"]
        new = [NewURL(fingerprint(u), u, host, 1) for u in pending]
        at.a.take_over(host, new, done, mark)
        await at.wait_for("b", 1)
        await trio.testing.wait_all_tasks_blocked()
        copied, copied_done, copied_mark = at.received["b"]._shard.replica_of(host)
        assert [u.url for u in copied] == pending
        assert sorted(copied_done) == sorted(done)
        assert copied_mark == mark
