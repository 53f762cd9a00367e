"""What a peer tells another it holds is on disk before it says so: a batch's
acknowledgement, a hand-off's, a replica's wait for a sync of the shard (its WAL
fsynced), which one sync serves for every acknowledgement waiting when it starts. The
shard's commits alone survive a kill of the process, not of the machine, and the
acknowledgement lets the other peer drop its own copy."""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.cluster.harness import cluster
from tests.peer.test_handoff import crawler_at, handoff_for, host_owned
from ubipy.control.monitor import Monitor
from ubipy.errors import StorageError
from ubipy.peer.forwarding import Forwarder
from ubipy.peer.handoff import Handoff
from ubipy.peer.router import Router
from ubipy.peer.syncing import GroupSync
from ubipy.ring import Ring
from ubipy.store import Shard
from ubipy.store.shard import NewURL
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.wire import Handoff as HandoffFrame
from ubipy.wire import HandoffAck, Message, UrlAck, UrlBatch


class _Gate:
    """A sync that waits to be let through, counting how often it ran; ``fails``: it
    then raises what the shard's sync raises when the disk refuses."""

    def __init__(self, fails: bool = False) -> None:
        self.open = trio.Event()
        self.asked = trio.Event()
        self.runs = 0
        self.fails = fails

    async def synced(self) -> None:
        self.runs += 1
        self.asked.set()
        await self.open.wait()
        if self.fails:
            raise StorageError("the shard could not be synced: No space left on device")


def test_a_sync_puts_the_shards_wal_on_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shard = Shard.open(tmp_path)
    shard.add_to_frontier([NewURL(1, "http://a.test/", "a.test", 0)])
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    shard.sync()
    shard.sync()
    # The directory the first time (the WAL's own entry), the WAL each time.
    assert synced == [str(tmp_path), str(shard.path) + "-wal", str(shard.path) + "-wal"]

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(StorageError, match="cannot sync"):
        shard.sync()
    shard.close()


async def test_one_sync_serves_every_acknowledgement_waiting_when_it_starts() -> None:
    started = [trio.Event(), trio.Event(), trio.Event()]
    release = [trio.Event(), trio.Event()]
    runs: list[int] = []
    done: list[str] = []

    def sync() -> None:
        n = len(runs)
        runs.append(n)
        trio.from_thread.run_sync(started[n].set)
        trio.from_thread.run(release[n].wait)

    group = GroupSync(sync)

    async def ack(name: str) -> None:
        await group.synced()
        done.append(name)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ack, "first")
            await started[0].wait()
            # Asked while a sync runs, which may have missed their commits: the next
            # one serves them both.
            nursery.start_soon(ack, "second")
            nursery.start_soon(ack, "third")
            await trio.testing.wait_all_tasks_blocked()
            release[0].set()
            await started[1].wait()
            await trio.testing.wait_all_tasks_blocked()
            assert done == ["first"]
            release[1].set()
    assert sorted(done[1:]) == ["second", "third"]
    assert group.syncs == 2 and not started[2].is_set()


async def test_a_batch_is_acknowledged_once_its_urls_are_on_disk(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Admits:
        def __init__(self) -> None:
            self.admitted: list[str] = []
            self.stopped = trio.Event()

        def admit_routed(self, urls: list[NewURL]) -> int:
            self.admitted += [u.url for u in urls]
            return len(urls)

        def forwarded(self, fps: object) -> None:
            pass

    async def send(address: str, message: Message) -> bool:
        return True

    gate = _Gate()
    crawler = Admits()
    router = Router("b", Ring(["a", "b"]))
    forwarder = Forwarder(router, crawler, send, lambda peer: None, gate.synced)  # type: ignore[arg-type]
    replies: list[Message] = []

    async def reply(message: Message) -> None:
        replies.append(message)

    batch = UrlBatch(7, (("http://x.test/", 1, 0.0, 0),), ())
    async with trio.open_nursery() as nursery:
        nursery.start_soon(forwarder.on_batch, "a", batch, reply)
        await trio.testing.wait_all_tasks_blocked()
        assert crawler.admitted == ["http://x.test/"] and replies == []
        gate.open.set()
    assert replies == [UrlAck((7,))] and gate.runs == 1
    # A peer that stopped (leaving) takes no more: unacknowledged, the batch stays
    # with its sender, which re-routes it once it sees the leave (a review).
    crawler.stopped.set()
    await forwarder.on_batch("a", UrlBatch(8, (("http://y.test/", 1, 0.0, 0),), ()), reply)
    assert crawler.admitted == ["http://x.test/"] and replies == [UrlAck((7,))]


async def test_a_hand_off_is_acknowledged_once_the_host_is_on_disk(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    ring = Ring(["a", "b"])
    host = host_owned(ring, "a")
    gate = _Gate()
    replies: list[Message] = []

    async def reply(message: Message) -> None:
        replies.append(message)

    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = handoff_for(crawler, "a", synced=gate.synced)
        handoff.install(lambda kind, handler: None, stopping=lambda: False, is_member=bool)
        handoff.ring_changed(ring, frozenset(ring.members), frozenset(ring.members))
        frame = HandoffFrame(3, host, ((f"http://{host}/", 0, 0.0),), (), None)
        nursery.start_soon(handoff._on_handoff, "b", frame, reply)
        await trio.testing.wait_all_tasks_blocked()
        assert replies == [] and gate.runs == 1
        gate.open.set()
        await trio.testing.wait_all_tasks_blocked()
        assert replies == [HandoffAck(3)]


async def test_a_host_goes_to_its_new_owner_with_its_pages_done_once_they_are_on_disk(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Its pages' records are in this peer's WARC files, and the new owner, told they
    are done, never fetches them again: this shard is synced before the frame goes (a
    machine's crash after it would lose them for good). A host with no page done
    needs no sync."""
    one, two = Ring(["a"]), Ring(["a", "b"])
    fetched = host_owned(two, "b")
    unfetched = next(h for h in (f"u{i}.test" for i in range(1000)) if two.owner(h) == "b")
    events: list[object] = []

    async def synced() -> None:
        events.append("synced")

    async def send(address: str, message: Message) -> bool:
        if isinstance(message, HandoffFrame):
            events.append((message.host, message.done))
            handoff.acked(message.id)
        return True

    async with crawler_at(tmp_path) as crawler:
        handoff = Handoff("a", crawler, send, lambda peer: f"{peer}:1", synced=synced)
        handoff.ring_changed(one, frozenset(one.members), frozenset())
        urls = [NewURL(fp, f"http://{fetched}/{fp}", fetched, 1) for fp in (11, 12)]
        crawler.take_over(fetched, urls, [11], None)
        crawler.take_over(unfetched, [NewURL(13, f"http://{unfetched}/", unfetched, 1)], [], None)
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        with trio.fail_after(5):
            assert await handoff.sweep()
    assert events.count("synced") == 1 and (unfetched, ()) in events
    assert events[events.index("synced") + 1] == (fetched, (11,))


async def test_no_sync_is_asked_when_nothing_was_written_since_the_last_began(
    tmp_path: Path,
) -> None:
    shard = Shard.open(tmp_path)
    group = GroupSync(shard.sync, inline=True, changes=lambda: shard.changes)
    shard.add_to_frontier([NewURL(1, "http://a.test/", "a.test", 0)])
    await group.synced()
    await group.synced()  # a hand-off of many hosts between two commits
    assert group.syncs == 1
    shard.add_to_frontier([NewURL(2, "http://a.test/2", "a.test", 0)])
    await group.synced()
    assert group.syncs == 2
    shard.close()


@pytest.mark.parametrize("fails", [False, True])
async def test_seeds_are_answered_once_they_are_on_disk(
    fails: bool, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """`ubipy seed` (the peer port) and POST /api/seed (the control centre, through its
    Monitor) are told what was admitted once it is on disk, or that it could not be
    (answered 503): the control centre's route answered before the sync (a review)."""
    web = SyntheticWeb(WebSpec(seed=1, hosts=2, pages_per_host=2))
    async with cluster(tmp_path, web, seed=0) as c:
        running = await c.start(0)
        gate = _Gate(fails)
        running.peer._syncs = gate  # type: ignore[assignment]
        monitor = Monitor(running.peer)
        answers: list[Mapping[str, Any]] = []

        async def post() -> None:
            answers.append(await monitor.seed([web.seed_url()]))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(post)
            with trio.fail_after(5):
                await gate.asked.wait()
            assert answers == []
            gate.open.set()
        if fails:
            assert answers == [{"error": "the shard could not be synced: No space left on device"}]
        else:
            assert answers[0]["admitted"] == 1
