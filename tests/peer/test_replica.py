"""Replication (``--replicas 2``): an owner's admitted URLs and fetched pages reach
its successor as each commit ends, and the successor, promoted when the owner
dies, fetches what was pending and nothing that was done."""

from __future__ import annotations

import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import cbor2
import pytest
import trio

from tests.peer.test_handoff import asked, crawler_at, host_owned
from ubipy.errors import WireError
from ubipy.fetch.urls import fingerprint
from ubipy.peer.crawler import Crawler
from ubipy.peer.replica import Replicator
from ubipy.ring import Ring
from ubipy.store.shard import HostMark, PageRecord
from ubipy.wire import Message, Replica, decode

RING = Ring(["a", "b"])


class Link:
    """Frames from a's replicator to b's, through CBOR as on the wire."""

    def __init__(self) -> None:
        self.to: Replicator | None = None
        self.frames: list[bytes] = []
        self.entries = 0  # URLs and fingerprints delivered
        self.arrived = trio.Event()
        self.breaks = 0  # sends still to fail, as over a broken connection
        self.failed = 0

    async def send(self, address: str, message: Message) -> bool:
        assert isinstance(message, Replica) and address == "b:1" and self.to is not None
        if self.breaks:
            self.breaks -= 1
            self.failed += 1
            return False
        raw = cbor2.dumps(message.to_wire())
        self.frames.append(raw)
        received = decode(message.KIND, cbor2.loads(raw))
        assert isinstance(received, Replica)
        self.to.receive(received)
        self.entries += sum(len(h.pending) + len(h.done) for h in message.hosts)
        self.arrived.set()
        self.arrived = trio.Event()
        return True


@asynccontextmanager
async def pair(tmp: Path) -> AsyncIterator[tuple[Crawler, Crawler, Link]]:
    link = Link()
    async with crawler_at(tmp / "a") as a, crawler_at(tmp / "b") as b:
        ra = Replicator("a", 2, a, a._shard, link.send, lambda peer: f"{peer}:1")
        rb = Replicator("b", 2, b, b._shard, link.send, lambda peer: None)
        link.to = rb
        ra.ring_changed(RING)
        rb.ring_changed(RING)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ra.run)
            yield a, b, link
            nursery.cancel_scope.cancel()


def page(url: str) -> PageRecord:
    host = url.split("/")[2]
    return PageRecord(
        fingerprint(url), url, host, 200, "text/html", 10, False, "t", 0.0, None, None, None,
        depth=0, error=None, body=None,
    )  # fmt: skip


async def test_the_successor_takes_over_pending_and_done(tmp_path: Path) -> None:
    host = host_owned(RING, "a")
    urls = [f"http://{host}/{i}" for i in range(5)]
    async with pair(tmp_path) as (a, b, link):
        a.seed(urls)
        # Two of them fetched and stored by a: the commit's hook copies the marks.
        a.on_commit([], [page(urls[0]), page(urls[1])], {})
        with trio.fail_after(5):
            while link.entries < 7:
                await link.arrived.wait()
        assert asked(b) == set()  # copies are not b's to crawl while a lives
        # a dies: b's ring is b alone and the copies become b's frontier.
        b.ring_changed(Ring(["b"]))
        replicator = Replicator("b", 2, b, b._shard, link.send, lambda peer: None)
        assert replicator.promote(Ring(["b"])) == 1
        assert b._shard.pending_count(host) == 3
        assert b.seed(urls).admitted == 0  # nothing a had is new to b
        assert asked(b) == {host}


async def test_copies_are_grouped_by_host_and_small(tmp_path: Path) -> None:
    hosts = [host_owned(RING, "a")]
    async with pair(tmp_path) as (a, _, link):
        urls = [f"http://{hosts[0]}/s{i}/page.html" for i in range(200)]
        a.seed(urls)
        with trio.fail_after(5):
            while link.entries < len(urls):
                await link.arrived.wait()
    size = sum(len(f) for f in link.frames)
    # The URL, its depth and a little framing: the host is said once, fingerprints
    # are not sent (each would cost 9 bytes more).
    assert size < sum(len(u) + 6 for u in urls), size


@pytest.mark.parametrize(
    "payload",
    [
        {"hosts": "x"},
        {"hosts": [["h.test", [["http://h.test/", 0]]]]},
        {"hosts": [[1, [], []]]},
        {"hosts": [["h.test", [], ["1"]]]},
        {"hosts": [["h.test", [["http://other.test/", 0]], []]]},
        # Politeness marks that would hold a host for ever, or are not marks at all.
        {"hosts": [["h.test", [], [], [math.inf, 1.0, 0]]]},
        {"hosts": [["h.test", [], [], [1.0, -1.0, 0]]]},
        {"hosts": [["h.test", [], [], [1.0, 1e9, 0]]]},
        {"hosts": [["h.test", [], [], [1.0, 1.0]]]},
        {"hosts": [["h.test", [], [], [1.0, 1.0, True]]]},
        {"hosts": [["h.test", [], [], "soon"]]},
    ],
)
async def test_a_malformed_copy_is_refused_whole(tmp_path: Path, payload: dict[str, Any]) -> None:
    async with crawler_at(tmp_path) as b:
        rb = Replicator("b", 2, b, b._shard, Link().send, lambda peer: None)
        with pytest.raises(WireError):
            replica = decode(Replica.KIND, payload)
            assert isinstance(replica, Replica)
            rb.receive(replica)
        assert b._shard.replica_hosts() == []


async def test_the_successor_waits_out_the_dead_owners_delay(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    host = host_owned(RING, "a")
    async with pair(tmp_path) as (a, b, link):
        a.seed([f"http://{host}/next"])
        # a's last request to the host ended just now, under a Crawl-delay of 30 s
        # (longer than failure detection takes): the commit's hook copies the mark.
        a.on_commit([], [], {host: HostMark(time.time(), 30.0, 4)})
        with trio.fail_after(5):
            while b._shard.replica_hosts() != [host]:
                await link.arrived.wait()
        assert len(link.frames) >= 1
        b.ring_changed(Ring(["b"]))
        Replicator("b", 2, b, b._shard, link.send, lambda peer: None).promote(Ring(["b"]))
        assert asked(b) == set()
        await trio.sleep(29)
        assert asked(b) == set()
        await trio.sleep(1.5)
        assert asked(b) == {host}
        # And the pages a spent of the host's budget are b's to count on.
        slot = b.scheduler.slot(host)
        assert slot is not None and slot.pages == 4


async def test_copies_keep_the_latest_mark(tmp_path: Path) -> None:
    async with crawler_at(tmp_path) as b:
        shard = b._shard
        shard.replica_add([], {"h.test": HostMark(100.0, 1.0, 3)})
        shard.replica_add([], {"h.test": HostMark(90.0, 5.0, 2)})  # older: ignored
        assert shard.replica_hosts() == ["h.test"]
        shard.replica_add([], {"h.test": HostMark(110.0, 2.0, 4)})
        assert shard.replica_take("h.test") == ([], [], HostMark(110.0, 2.0, 4))
        assert shard.replica_hosts() == []
        assert shard.replica_take("h.test") == ([], [], None)


async def test_a_mark_from_the_future_holds_a_host_no_longer_than_its_delay(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    host = "h.synth.test"
    async with crawler_at(tmp_path) as b:
        # An owner whose clock ran a year ahead, with a delay of 2 s.
        b.take_over(host, [], [], HostMark(time.time() + 3e7, 2.0, 0))
        b.seed([f"http://{host}/"])
        assert asked(b) == set()
        await trio.sleep(2.1)
        assert asked(b) == {host}


async def test_copies_that_could_not_be_sent_go_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    host = host_owned(RING, "a")
    urls = [f"http://{host}/{i}" for i in range(3)]
    async with pair(tmp_path) as (a, b, link):
        link.breaks = 1
        a.seed(urls)
        a.on_commit([], [page(urls[0])], {host: HostMark(time.time(), 1.0, 1)})
        # Nothing new is committed after the failure: the retry comes on its own.
        with trio.fail_after(5):
            while link.entries < 4:
                await link.arrived.wait()
        assert link.failed == 1
        b.ring_changed(Ring(["b"]))
        Replicator("b", 2, b, b._shard, link.send, lambda peer: None).promote(Ring(["b"]))
        assert b._shard.pending_count(host) == 2
        slot = b.scheduler.slot(host)
        assert slot is not None and slot.pages == 1
