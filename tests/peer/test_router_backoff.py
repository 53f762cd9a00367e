"""An owner that stays a member but answers nothing is probed with one batch a back-off
period, not sent its whole backlog again; and the router's bookkeeping costs what is
due, not what is waiting."""

from __future__ import annotations

import itertools
import random
import sqlite3
from collections.abc import Iterable, Iterator

import pytest
import trio
import trio.testing

from ubipy.peer.forwarding import Forwarder
from ubipy.peer.router import Batch, Router
from ubipy.ring import Ring
from ubipy.store.shard import NewURL
from ubipy.wire import Message, UrlAck, UrlBatch


def _hosts_of(ring: Ring, owner: str, n: int) -> list[str]:
    hosts = [f"h{i}.test" for i in range(5000)]
    return [h for h in hosts if ring.owner(h) == owner][:n]


def _urls(start: int, n: int, hosts: list[str]) -> list[NewURL]:
    return [
        NewURL(fp=i, url=f"http://{hosts[i % len(hosts)]}/{i}", host=hosts[i % len(hosts)], depth=1)
        for i in range(start, start + n)
    ]


class _Disk:
    """The outbox on disk beside the router, as the crawler keeps it: a URL enqueued is
    there until its batch is acknowledged, and is read back when the router asks."""

    def __init__(self, router: Router) -> None:
        self.router = router
        self.rows: dict[int, NewURL] = {}
        self.spilled: set[int] = set()  # rows marked kept on disk alone
        self.most_held = 0

    def enqueue(self, urls: list[NewURL], now: float) -> list[NewURL]:
        for u in urls:
            self.rows.setdefault(u.fp, u)
        local = self.router.enqueue(urls, now)
        self._dropped(local)
        return local

    def acked(self, batch_id: int, now: float) -> Batch | None:
        batch = self.router.acked(batch_id)
        if batch is not None:
            self._dropped(batch.urls)
        self.reload(now)
        return batch

    def ring_changed(self, ring: Ring, now: float) -> list[NewURL]:
        """As the crawler does: what the new ring made ours comes home, then the rows
        kept on disk alone are routed afresh."""
        local, _ = self.router.ring_changed(ring, now)
        self._dropped(local)
        return local + self.reload(now)

    def reload(self, now: float) -> list[NewURL]:
        self.spilled.update(self.router.take_marks())
        local = []
        for owner in self.router.reloads():
            rows = (
                u
                for fp, u in sorted(self.rows.items())
                if fp in self.spilled and self.router.owner(u.host) == owner
            )
            taken = self.router.reload(owner, rows, now, self.router.held_fps())
            self.spilled.difference_update(u.fp for u in taken)
            if owner == self.router.self_id:
                local += taken
        self._dropped(local)
        self.most_held = max(self.most_held, self.router.held())
        return local

    def _dropped(self, urls: Iterable[NewURL]) -> None:
        for u in urls:
            self.rows.pop(u.fp, None)
            self.spilled.discard(u.fp)
        self.most_held = max(self.most_held, self.router.held())


def _silent_hour(disk: _Disk, hosts: list[str]) -> tuple[list[Batch], int]:
    """50 URLs a second for an hour, due() drained every second: what went out."""
    sent: list[Batch] = []
    for second in range(3600):
        disk.enqueue(_urls(second * 50, 50, hosts), float(second))
        sent += disk.router.due(float(second))
    return sent, 3600 * 50


def test_a_silent_owner_is_probed_once_a_back_off_not_sent_its_backlog_again() -> None:
    """The reviewer's case: b is a member whose shard refuses writes, so it answers
    nothing and never leaves the ring. Each batch resent on its own back-off put 6.2
    million URLs on the wire in an hour (34 times those found), and the whole backlog
    every minute after; each held in memory, the hour's URLs cost every other peer its
    share of them (a review)."""
    ring = Ring(["a", "b"])
    router = Router("a", ring, batch_size=50, linger=0.5, retry_after=2.0)
    disk = _Disk(router)
    sent, found = _silent_hour(disk, _hosts_of(ring, "b", 40))
    assert router.backlog() == found == len(disk.rows)  # nothing dropped: all waits for b
    # Once b went unanswered past its retry, what came for it stayed on disk alone.
    assert disk.most_held <= 3 * 50 and router.stats.spilled_urls == found - router.held()
    first = {b.id for b in sent}
    assert len(first) == router.held() // 50  # each batch sent once...
    resends = len(sent) - len(first)
    # ...and one probe at 2, 6, 14, 30, 62 s, then one a minute.
    assert resends <= 5 + 3600 // 60
    # The probes take turns: one batch the owner can never take holds no other back
    # (a review).
    seen: set[int] = set()
    probes = []
    for b in sent:
        if b.id in seen:
            probes.append(b.id)
        seen.add(b.id)
    assert len(probes) == resends and all(a != b for a, b in itertools.pairwise(probes))
    assert set(probes) == first


@pytest.mark.parametrize("cap", [50_000, 20_000])
def test_an_owner_that_answers_again_gets_everything_it_was_not_sent(cap: int) -> None:
    ring = Ring(["a", "b"])
    router = Router("a", ring, batch_size=50, linger=0.5, retry_after=2.0, hold_cap=cap)
    disk = _Disk(router)
    _, found = _silent_hour(disk, _hosts_of(ring, "b", 40))
    # b answers from now on: every frame it is sent is acknowledged a second later.
    delivered: set[int] = set()
    now = 3600.0
    while router.backlog():
        deadline = router.next_deadline()
        assert deadline is not None and deadline <= now + 60.0
        now = max(now + 1.0, deadline)
        for batch in router.due(now):
            if disk.acked(batch.id, now) is not None:
                delivered.update(u.fp for u in batch.urls)
        assert now < 3600.0 + 120.0  # the next probe, then everything at once
    assert delivered == set(range(found)) and not disk.rows
    assert disk.most_held <= cap  # what memory held of the backlog at any time
    assert router.next_deadline() is None


def test_the_probe_goes_on_when_a_ring_change_takes_it_elsewhere() -> None:
    """b's batches are probed in turn; d joins and takes the host of the one whose turn
    is next. The next is probed in its place, or what waits behind it would never go
    again."""
    ring = Ring(["a", "b", "c"])
    bigger = Ring(["a", "b", "c", "d"])
    b_hosts = _hosts_of(ring, "b", 400)
    moving = next(h for h in b_hosts if bigger.owner(h) == "d")
    staying = [h for h in b_hosts if bigger.owner(h) == "b"][:5]
    router = Router("a", ring, batch_size=1, linger=0.1, retry_after=2.0)
    router.enqueue(_urls(1, 3, staying[:3]), 0.0)
    router.enqueue(_urls(0, 1, [moving]), 0.0)
    router.enqueue(_urls(4, 2, staying[3:]), 0.0)
    batches = router.due(0.0)
    assert len(batches) == 6 and batches[3].urls[0].host == moving
    for now, turn in ((2.0, 0), (6.0, 1), (14.0, 2)):  # b silent: one at a time, in turn
        assert router.due(now) == [batches[turn]]
    local, dropped = router.ring_changed(bigger, 15.0)
    assert local == [] and dropped == [batches[3].id]
    # The next in turn probes b at once (its own back-off long past).
    to_d, probe = sorted(router.due(15.1), key=lambda b: b.owner != "d")
    assert to_d.owner == "d" and to_d.urls == batches[3].urls
    assert probe == batches[4]
    assert router.acked(to_d.id) == to_d
    probes = [b for now in range(16, 200) for b in router.due(float(now))]
    assert probes and {b.owner for b in probes} == {"b"}
    assert len(probes) <= 8  # one a back-off (doubling, then a minute)
    assert all(a != b for a, b in itertools.pairwise(probes))  # in turn
    assert router.backlog() == 5


def test_an_owner_that_leaves_the_ring_has_its_held_batches_routed_afresh() -> None:
    """Held in memory or kept on disk alone (b went silent before it left), b's URLs
    are all routed afresh: this peer's own come home, c's go to c."""
    ring = Ring(["a", "b", "c"])
    router = Router("a", ring, batch_size=50, linger=0.5, retry_after=2.0)
    disk = _Disk(router)
    hosts = _hosts_of(ring, "b", 40)
    for second in range(600):
        disk.enqueue(_urls(second * 50, 50, hosts), float(second))
        router.due(float(second))
    assert router.backlog() == 30_000 and router.held() < 30_000
    local = disk.ring_changed(Ring(["a", "c"]), 600.0)
    for _ in range(100):  # this peer's own, a chunk a read
        if "a" not in router.reloads():
            break
        local += disk.reload(600.0)
    to_c = router.due(601.0)
    assert {b.owner for b in to_c} == {"c"}
    assert sorted([u.fp for u in local] + [u.fp for b in to_c for u in b.urls]) == list(
        range(30_000)
    )
    assert router.backlog() == 30_000 - len(local)
    for batch in to_c:
        disk.acked(batch.id, 601.0)
    assert router.backlog() == 0 and router.next_deadline() is None and not disk.rows


def test_a_read_back_that_fails_leaves_the_urls_on_disk_to_be_read_again() -> None:
    """Reading the outbox failed part-way: the owner was no longer marked as having URLs
    on disk, and they stayed there for good (a review)."""
    ring = Ring(["a", "b"])
    router = Router("a", ring, batch_size=5, linger=0.5, retry_after=2.0, hold_cap=10)
    disk = _Disk(router)
    disk.enqueue(_urls(0, 30, _hosts_of(ring, "b", 5)), 0.0)
    assert router.held() == 10 and router.backlog() == 30  # 20 on disk alone
    for batch in router.due(0.0):
        router.acked(batch.id)
        disk._dropped(batch.urls)
    disk.spilled.update(router.take_marks())
    assert router.reloads() == ["b"]

    def failing() -> Iterator[NewURL]:
        yield from [disk.rows[fp] for fp in sorted(disk.spilled)][:3]
        raise sqlite3.OperationalError("disk I/O error")

    with pytest.raises(sqlite3.OperationalError):
        router.reload("b", failing(), 1.0, router.held_fps())
    assert router.reloads() == ["b"] and router.backlog() == 20 and router.held() == 0
    now = 1.0
    while router.backlog():  # read again, and every URL goes
        assert now < 60.0
        disk.reload(now)
        for batch in router.due(now):
            disk.acked(batch.id, now)
        now += 1.0
    assert not disk.rows


@pytest.mark.parametrize("seed", range(8))
def test_the_backlog_stays_right_through_enqueue_ack_and_ring_changes(seed: int) -> None:
    """The backlog is counted as URLs come and go (it is asked at every
    acknowledgement): it is always the URLs enqueued and neither acknowledged nor
    handed back as local by a ring change, whether held in memory or kept on disk alone
    (an owner silent a while, or more waiting than the cap); memory holds at most the
    cap an owner; and once every owner answers, every URL reaches one."""
    rng = random.Random(seed)
    rings = [Ring(["a", "b", "c"]), Ring(["a", "b", "c", "d"]), Ring(["a", "c"]), Ring(["a"])]
    router = Router("a", rings[0], batch_size=7, linger=0.5, retry_after=2.0, hold_cap=40)
    disk = _Disk(router)
    hosts = [f"h{i}.test" for i in range(300)]
    unacked: dict[int, Batch] = {}
    fp = 0
    now = 0.0
    silent = ""
    for _ in range(600):
        now += rng.random()
        step = rng.random()
        if step < 0.4:
            urls = [
                NewURL(fp + i, f"http://{h}/{fp + i}", h, 1)
                for i, h in enumerate(rng.sample(hosts, 10))
            ]
            fp += 10
            _, foreign = router.split(urls)
            disk.enqueue(foreign, now)
        elif step < 0.9:
            for batch in router.due(now):
                unacked[batch.id] = batch
            for batch_id in rng.sample(sorted(unacked), len(unacked) // 2):
                if unacked[batch_id].owner != silent:
                    disk.acked(unacked.pop(batch_id).id, now)
        elif step < 0.95:
            silent = rng.choice(["", "b", "c"])
        else:
            disk.ring_changed(rng.choice(rings), now)
        assert router.backlog() == len(disk.rows)
        assert router.held() <= 40 * 3
    disk.ring_changed(rings[0], now)
    for _ in range(10_000):  # every owner answers
        if not router.backlog():
            break
        now += 1.0
        for batch in router.due(now):
            disk.acked(batch.id, now)
    assert router.backlog() == 0 and not disk.rows and router.stats.spilled_urls > 0


def test_a_wake_costs_what_is_due_not_every_batch_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each wake of the forwarder looked at every unacknowledged batch (due() and
    next_deadline()): 10 ms a wake with 10,000 of them, on the loop that also answers
    membership pings."""
    ring = Ring(["a", "b"])
    router = Router("a", ring, batch_size=1, linger=0.5, retry_after=2.0)
    host = _hosts_of(ring, "b", 1)[0]
    router.enqueue(_urls(0, 5000, [host]), 0.0)
    assert len(router.due(0.0)) == 5000
    now = 0.0
    for _ in range(10):  # b silent: backed off
        deadline = router.next_deadline()
        assert deadline is not None
        now = deadline
        router.due(now)
    looked = 0
    resend_at = Router._resend_at

    def counted(self: Router, pending: object) -> float:
        nonlocal looked
        looked += 1
        return resend_at(self, pending)  # type: ignore[arg-type]

    monkeypatch.setattr(Router, "_resend_at", counted)
    for i in range(100):  # woken by new URLs for another owner, or the clock
        router.next_deadline()
        router.due(now + i * 0.001)
        router.backlog()
    assert looked < 100


async def test_a_forwarder_sends_a_silent_owner_one_batch_a_back_off_then_everything(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Through the forwarder: b silent for an hour gets each batch sent before it fell
    silent once, and a probe a minute; once it answers, what waited (on disk alone, most
    of it) goes at once and every URL is delivered."""
    forwarded: set[int] = set()
    ring = Ring(["a", "b"])
    hosts = _hosts_of(ring, "b", 40)
    router = Router("a", ring, batch_size=50, linger=0.5, retry_after=2.0)
    disk = _Disk(router)

    class Crawled:
        def forwarded(self, fps: Iterable[int]) -> None:
            fps = list(fps)
            forwarded.update(fps)
            disk._dropped(disk.rows[fp] for fp in fps)

        def reload_outbox(self) -> None:
            disk.reload(trio.current_time())

    frames: list[int] = []
    answering = False
    answers: trio.MemorySendChannel[int]
    answers, to_answer = trio.open_memory_channel[int](10**6)

    async def send(address: str, message: Message) -> bool:
        assert isinstance(message, UrlBatch)
        frames.append(message.id)
        if answering:
            answers.send_nowait(message.id)
        return True

    forwarder = Forwarder(router, Crawled(), send, lambda peer: peer, trio.lowlevel.checkpoint)  # type: ignore[arg-type]

    async def answer() -> None:
        """What b was sent, acknowledged within 0.2 s (in one frame, as b would)."""
        async for batch_id in to_answer:
            await trio.sleep(0.2)
            ids = [batch_id]
            while True:
                try:
                    ids.append(to_answer.receive_nowait())
                except trio.WouldBlock:
                    break
            await forwarder.on_url_ack("b", UrlAck(tuple(ids)), None)  # type: ignore[arg-type]

    async with trio.open_nursery() as nursery:
        nursery.start_soon(forwarder.run)
        nursery.start_soon(answer)
        for second in range(3600):
            disk.enqueue(_urls(second * 50, 50, hosts), trio.current_time())
            forwarder.kick()
            await trio.sleep(1.0)
        assert len(set(frames)) == router.held() // 50 <= 3
        assert len(frames) - len(set(frames)) <= 5 + 3600 // 60
        answering = True
        with trio.fail_after(120.0):  # the next probe, then the rest at once
            await forwarder.drained.wait()
        nursery.cancel_scope.cancel()
    assert forwarded == set(range(3600 * 50)) and router.backlog() == 0 and not disk.rows


def test_a_batch_the_owner_never_takes_holds_no_other_back() -> None:
    """b was down a while, and once back fails on one batch (it never answers it) and
    takes the others. The oldest always the probe, that batch went again and again and
    the others waited for a newer batch's answer: for ever once no new URLs came for b
    (a review). The probes take turns."""
    ring = Ring(["a", "b"])
    router = Router("a", ring, batch_size=1, linger=0.1, retry_after=2.0)
    router.enqueue(_urls(0, 6, _hosts_of(ring, "b", 6)), 0.0)
    batches = router.due(0.0)
    poison = batches[0].id
    for now in range(1, 100):  # b down: nothing answered
        router.due(float(now))
    delivered: set[int] = set()
    for now in range(100, 400):  # b back, but never answering the one batch
        for batch in router.due(float(now)):
            if batch.id != poison and router.acked(batch.id) is not None:
                delivered.add(batch.id)
    assert delivered == {b.id for b in batches[1:]}
    assert router.backlog() == 1


def test_urls_a_ring_change_made_ours_come_back_a_chunk_at_a_time() -> None:
    """b was silent, its URLs kept on disk; it dies and its hosts are ours: they come
    back at most the cap a read (read whole, millions were admitted in one turn of the
    loop, all in memory at once), and this peer stays in reloads() until all have."""
    two = Ring(["a", "b"])
    router = Router("a", two, batch_size=5, linger=0.5, retry_after=2.0, hold_cap=10)
    disk = _Disk(router)
    hosts = [h for h in _hosts_of(two, "b", 50) if Ring(["a"]).owner(h) == "a"]
    disk.enqueue(_urls(0, 95, hosts), 0.0)
    assert router.backlog() == 95 and router.held() == 10  # 85 on disk alone
    home = router.ring_changed(Ring(["a"]), 1.0)[0]
    disk._dropped(home)
    chunks = [len(home)]
    for _ in range(20):
        if "a" not in router.reloads():
            break
        chunks.append(len(disk.reload(2.0)))
    assert max(chunks) <= 10 and sum(chunks) == 95 and not disk.rows
