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

from tests.peer.test_handoff import asked, crawler_at, host_owned, jobs
from ubipy.errors import WireError
from ubipy.fetch.urls import fingerprint
from ubipy.peer.crawler import Crawler
from ubipy.peer.replica import Replicator
from ubipy.peer.replicaframes import Outgoing
from ubipy.ring import Ring
from ubipy.store.shard import HostMark, NewURL, PageRecord
from ubipy.wire import DEFAULT_MAX_FRAME, Message, Replica, ReplicaAck, decode

RING = Ring(["a", "b"])


class Link:
    """Frames from a's replicator to b's, through CBOR as on the wire."""

    def __init__(self) -> None:
        self.to: Replicator | None = None
        self.source: Replicator | None = None  # a's
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
        self.to.receive(received, "a")
        self.entries += sum(len(h.pending) + len(h.done) for h in message.hosts)
        self.arrived.set()
        self.arrived = trio.Event()
        return True


@asynccontextmanager
async def pair(tmp: Path, *, recrawl: bool = False) -> AsyncIterator[tuple[Crawler, Crawler, Link]]:
    link = Link()
    async with (
        crawler_at(tmp / "a", recrawl=recrawl) as a,
        crawler_at(tmp / "b", recrawl=recrawl) as b,
    ):
        ra = Replicator("a", 2, a, a._shard, link.send, lambda peer: f"{peer}:1")
        rb = Replicator("b", 2, b, b._shard, link.send, lambda peer: None)
        link.to, link.source = rb, ra
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
        assert replicator.promote(Ring(["b"])) == ([host], False)
        assert b._shard.pending_count(host) == 3
        assert b.seed(urls).admitted == 0  # nothing a had is new to b
        assert asked(b) == {host}


async def test_a_continuous_crawl_asks_again_the_pages_a_dead_owner_fetched(
    tmp_path: Path,
) -> None:
    """Copies carry no histories: the successor of a dead owner took its fetched pages
    as done, and never asked them again (no link brings them back). They start again
    as never visited, due within a new page's interval; what was pending is not."""
    host = host_owned(RING, "a")
    urls = [f"http://{host}/{i}" for i in range(5)]
    async with pair(tmp_path, recrawl=True) as (a, b, link):
        a.seed(urls)
        a.on_commit([], [page(urls[0]), page(urls[1])], {})
        with trio.fail_after(5):
            while link.entries < 7:
                await link.arrived.wait()
        b.ring_changed(Ring(["b"]))
        replicator = Replicator("b", 2, b, b._shard, link.send, lambda peer: None)
        refresher = b.refresher
        assert refresher is not None
        before, interval = time.time(), refresher._first_interval()
        assert replicator.promote(Ring(["b"])) == ([host], False)
        kept = [refresher.page(fingerprint(u)) for u in urls]
        assert [p is not None for p in kept] == [True, True, False, False, False]
        dues = set()
        for p in kept[:2]:
            assert p is not None and p.visits == 0 and p.digest is None
            assert before <= p.due <= time.time() + interval
            dues.add(p.due)
        assert len(dues) == 2  # spread, not all at once
        # Saved with the host's rows (a restart keeps them), and due in its slot.
        assert {r.fp for r in b._shard.refresh_rows()} == {fingerprint(u) for u in urls[:2]}
        slot = b.scheduler.slot(host)
        assert slot is not None and len(slot.refresh) == 2
        assert b._shard.pending_count(host) == 3


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
            rb.receive(replica, "a")
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
        shard.replica_add([], {"h.test": HostMark(100.0, 1.0, 3)}, source="a")
        shard.replica_add([], {"h.test": HostMark(90.0, 5.0, 2)}, source="a")  # older: ignored
        assert shard.replica_hosts() == ["h.test"]
        shard.replica_add([], {"h.test": HostMark(110.0, 2.0, 4)}, source="a")
        assert shard.replica_of("h.test") == ([], [], HostMark(110.0, 2.0, 4))
        shard.replica_drop("h.test")
        assert shard.replica_hosts() == []
        assert shard.replica_of("h.test") == ([], [], None)


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


class AckingLink:
    """Frames to the successor, stored there; acknowledged when the test says."""

    def __init__(self, successor: Replicator) -> None:
        self.successor = successor
        self.owner: Replicator | None = None
        self.seqs: list[int] = []
        self.sent = trio.Event()
        self.reachable = True

    async def send(self, address: str, message: Message) -> bool:
        assert isinstance(message, Replica)
        if not self.reachable:
            await trio.sleep(5)  # a dial that nobody answers
            return False
        self.successor.receive(message, "a")
        self.seqs.append(message.seq)
        self.sent.set()
        self.sent = trio.Event()
        return True

    def ack_all(self) -> None:
        assert self.owner is not None
        for seq in self.seqs:
            self.owner.acked(ReplicaAck(seq))
        self.seqs.clear()


def acking_pair(a: Crawler, b: Crawler) -> tuple[Replicator, AckingLink]:
    """a's replicator, whose frames b's stores; acknowledged when the test says."""
    rb = Replicator("b", 2, b, b._shard, lambda address, m: _unused(), lambda p: None)
    link = AckingLink(rb)
    ra = link.owner = Replicator("a", 2, a, a._shard, link.send, lambda peer: f"{peer}:1")
    ra.ring_changed(RING)
    rb.ring_changed(RING)
    return ra, link


async def test_a_host_gets_no_new_request_until_its_successor_stored_the_last(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Cut off from its successor, an owner stops at what it has in flight: a host's
    next request waits until the outcome of its last one is stored by the successor,
    so whoever takes the host over knows every page fetched but the one in flight."""
    host = host_owned(RING, "a")
    async with crawler_at(tmp_path / "a") as a, crawler_at(tmp_path / "b") as b:
        ra, link = acking_pair(a, b)
        a.seed([f"http://{host}/{i}" for i in range(3)])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ra.run)
            a.on_request_end(host)  # a request to the host ended
            assert [j.host for j in jobs(a)] == [] and ra.holding == 1
            # Its commit is copied; until the copy is acknowledged the host waits.
            with trio.fail_after(1):
                a.on_commit([], [], {host: HostMark(time.time(), 0.0, 1)})
                await link.sent.wait()
            await trio.sleep(1)
            assert [j.host for j in jobs(a)] == []
            # Not acknowledged in 2 s: sent again.
            with trio.fail_after(3):
                await link.sent.wait()
            link.ack_all()
            assert ra.holding == 0
            assert [j.host for j in jobs(a)] == [host]
            nursery.cancel_scope.cancel()


async def test_an_unreachable_successor_does_not_hold_up_the_others(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    ring = Ring(["a", "b", "c"])
    to_b, to_c = (
        next(f"x{i}.test" for i in range(10_000) if ring.successors(f"x{i}.test", 2) == pair)
        for pair in (["a", "b"], ["a", "c"])
    )
    async with (
        crawler_at(tmp_path / "a") as a,
        crawler_at(tmp_path / "c") as c,
    ):
        rc = Replicator("c", 2, c, c._shard, lambda address, m: _unused(), lambda p: None)
        at_c = trio.Event()

        async def send(address: str, message: Message) -> bool:
            assert isinstance(message, Replica)
            if address == "b:1":
                await trio.sleep_forever()  # b cannot be reached
            rc.receive(message, "a")
            if to_c in {h.host for h in message.hosts}:
                at_c.set()
            return True

        ra = Replicator("a", 2, a, a._shard, send, lambda peer: f"{peer}:1")
        ra.ring_changed(ring)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ra.run)
            a.on_commit([], [], {to_b: HostMark(time.time(), 0.0, 1)})
            await trio.sleep(0.1)
            a.on_commit([], [], {to_c: HostMark(time.time(), 0.0, 1)})
            with trio.fail_after(1):
                await at_c.wait()
            nursery.cancel_scope.cancel()


async def _unused() -> bool:
    raise AssertionError("the successor sends nothing here")


async def test_a_request_starts_only_once_its_successor_answers_a_barrier(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Before each request the owner checks that its successor can still be reached:
    a request never starts after a cut between them (it would be fetched again by the
    successor taking the host over). Requests waiting together share one barrier."""
    host = host_owned(RING, "a")
    async with crawler_at(tmp_path / "a") as a, crawler_at(tmp_path / "b") as b:
        ra, link = acking_pair(a, b)
        answers: list[bool] = []

        async def ask() -> None:
            answers.append(await a.clear_to_fetch(host))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ra.run)
            await trio.sleep(0.1)
            async with trio.open_nursery() as asking:
                for _ in range(5):
                    asking.start_soon(ask)
                await link.sent.wait()
                assert answers == []  # not before the answer
                assert len(link.seqs) == 1
                link.ack_all()
            assert answers == [True] * 5 and len(link.seqs) == 0

            # The successor cut off: no answer within a second, no request.
            link.reachable = False
            start = trio.current_time()
            assert not await a.clear_to_fetch(host)
            assert trio.current_time() - start <= 1.0 + 1e-9
            nursery.cancel_scope.cancel()


async def test_once_the_replicator_has_stopped_no_request_is_cleared(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A peer being killed or stopping cancels its replicator while requests are still
    being dispatched: they are not made (and nothing raises)."""
    host = host_owned(RING, "a")
    async with crawler_at(tmp_path / "a") as a, crawler_at(tmp_path / "b") as b:
        ra, _ = acking_pair(a, b)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ra.run)
            await trio.sleep(0.1)
            nursery.cancel_scope.cancel()
        assert not await a.clear_to_fetch(host)


async def test_hosts_taken_over_late_are_copied_whole_to_their_successor(
    tmp_path: Path,
) -> None:
    """A take-over the shard refused at a ring change is made at a later tick; the ring
    change's whole copies had gone without its hosts, and their successor was never
    given their history (found by a review). They are copied whole then."""
    host = host_owned(RING, "a")
    async with pair(tmp_path) as (a, b, link):
        a.seed([f"http://{host}/{i}" for i in range(5)])
        assert b._shard.replica_hosts() == [] and link.source is not None
        link.source.copy_whole([host])
        with trio.fail_after(5):
            while link.entries < 5:
                await link.arrived.wait()
        assert b._shard.replica_hosts() == [host]
        assert len(b._shard.replica_of(host)[0]) == 5


async def test_a_dead_peers_copies_are_taken_over_a_few_hundred_at_a_time(
    tmp_path: Path,
) -> None:
    # 15,000 hosts taken over in one go held the event loop 5 s (0.35 ms a host), its
    # pings unanswered for as long: a peer taking over could be declared dead next.
    async with crawler_at(tmp_path) as b:
        hosts = [f"h{i}.test" for i in range(450)]
        items = [(h, f"http://{h}/", 1, fingerprint(f"http://{h}/"), False) for h in hosts]
        b._shard.replica_add(items, {h: HostMark(time.time(), 1.0, 1) for h in hosts}, source="a")
        b.ring_changed(Ring(["b"]))
        replicator = Replicator("b", 2, b, b._shard, Link().send, lambda peer: None)
        ring = Ring(["b"])
        calls = []
        again = False
        while True:
            before = b.pending
            again = replicator.take_copies(ring, again=again)
            calls.append(b.pending - before)
            if not again:
                break
        assert calls == [200, 200, 50]
        assert b._shard.replica_hosts() == [] and b.pending == len(hosts)


@pytest.mark.parametrize("what", ["marks", "long URLs"])
def test_copies_go_in_frames_their_receiver_takes(what: str) -> None:
    # 10,001 hosts with a politeness mark alone weighed nothing and went in one frame,
    # over the 10,000 items a receiver takes, which the sender now refuses to write
    # (the peer died of it: found by a review); 2,000 URLs of 2,048 characters are
    # over the 4 MiB frame cap.
    out = Outgoing()
    if what == "marks":
        for i in range(10_001):
            out.add(f"h{i}.test", mark=HostMark(1.0, 1.0, 0))
    else:
        long = [f"http://a.test/{i:06d}/" + "x" * 2020 for i in range(2_000)]
        out.add("a.test", [NewURL(fingerprint(u), u, "a.test", 1) for u in long])
    frames = [Replica(tuple(hosts), 1) for hosts, _, _ in out.frames(1.0)]
    assert len(frames) > 1
    for frame in frames:
        # Written (to_wire checks what a receiver's from_wire takes), under the cap.
        assert len(cbor2.dumps(frame.to_wire())) < DEFAULT_MAX_FRAME
    assert sum(len(f.hosts) for f in frames) >= (10_001 if what == "marks" else 2)
