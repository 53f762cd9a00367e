"""Holds on gained hosts (issue 6): a host is not asked by this peer until every
peer that might hold it has swept under this peer's own ring, has died, or the
hold's time is up; without replicas a dead peer's hosts wait out the grace."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from ubipy.config import CrawlConfig, PolitenessConfig, RecrawlConfig
from ubipy.errors import StorageError
from ubipy.fetch.politeness import Job
from ubipy.peer.crawler import Crawler
from ubipy.peer.handoff import Handoff
from ubipy.ring import Ring
from ubipy.store.shard import Shard
from ubipy.wire import Handoff as HandoffFrame
from ubipy.wire import HandoffAck, HandoffDone, Message

GRACE = 30.0
FENCE = 12.0


def _refuse(request: httpx2.Request) -> httpx2.Response:
    raise AssertionError(f"no request is made in these tests: {request.url}")


@asynccontextmanager
async def crawler_at(
    tmp: Path, *, recrawl: bool = False, delay: float = 0.0
) -> AsyncIterator[Crawler]:
    """A crawler that is never run: its scheduler is asked directly. ``recrawl``: a
    continuous crawl's; ``delay``: its --delay."""
    shard = Shard.open(tmp)
    config = CrawlConfig(
        data_dir=tmp,
        politeness=PolitenessConfig(delay=delay),
        recrawl=RecrawlConfig(recrawl=recrawl),
    )
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(_refuse)) as client:
        try:
            yield Crawler(config, shard, client)
        finally:
            shard.close()


def host_owned(ring: Ring, owner: str, *, also: Ring | None = None, by: str = "") -> str:
    """A host ``owner`` owns in ``ring`` (and ``by`` owns in ``also``, if given)."""
    for i in range(10_000):
        host = f"h{i:04d}.synth.test"
        if ring.owner(host) == owner and (also is None or also.owner(host) == by):
            return host
    raise AssertionError("no such host")


def host_copied_on(before: Ring, copies: list[str], after: Ring, owner: str) -> str:
    """A host whose copies were on ``copies`` under ``before`` and that ``owner`` owns
    under ``after``."""
    return next(
        h
        for i in range(10_000)
        if before.successors(h := f"h{i:04d}.synth.test", len(copies)) == copies
        and after.owner(h) == owner
    )


def jobs(crawler: Crawler) -> Iterator[Job]:
    while (job := crawler.scheduler.next_job(trio.current_time())) is not None:
        yield job


def asked(crawler: Crawler) -> set[str]:
    """The hosts the scheduler would send a request to now (their robots.txt first)."""
    return {job.host for job in jobs(crawler)}


def _never_answered(sent: list[object]) -> Callable[[str, Message], Awaitable[bool]]:
    """A link that takes every frame and answers none, noting where each hand-off went."""

    async def send(address: str, message: Message) -> bool:
        if isinstance(message, HandoffFrame):
            sent.append(address)
        return True

    return send


def handoff_for(crawler: Crawler, self_id: str, **kwargs: Any) -> Handoff:
    async def send(address: str, message: Message) -> bool:
        return True

    return Handoff(self_id, crawler, send, lambda peer: f"{peer}:1", **kwargs)


async def test_a_dead_peers_hosts_wait_out_the_grace(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    three, two = Ring(["a", "b", "c"]), Ring(["a", "c"])
    # A host b owned that falls to a when b dies, and one a owned all along.
    gained = host_owned(three, "b", also=two, by="a")
    kept = host_owned(three, "a")
    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = handoff_for(crawler, "a", grace=GRACE)
        nursery.start_soon(handoff.run)
        handoff.ring_changed(three, frozenset(three.members), frozenset())
        crawler.seed([f"http://{kept}/"])
        assert asked(crawler) == {kept}

        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        handoff.peer_gone("b")
        handoff.release_from("c", two.key)  # c has swept: only the grace is left
        crawler.seed([f"http://{gained}/"])
        assert asked(crawler) == set()
        await trio.sleep(GRACE - 1)
        assert asked(crawler) == set()
        # The grace ends on its own timer, with nothing else happening.
        await trio.sleep(2)
        assert gained in asked(crawler)
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("comes_back", [False, True])
async def test_hosts_are_lost_with_a_dead_peer_only_once_its_grace_is_over(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, comes_back: bool
) -> None:
    """With one replica a dead peer's hosts are lost (its URLs with it) once it has not
    come back within the grace: then, not at its death (a partition's false deaths and
    a quick restart made every peer ask every page in full for nothing: a review)."""
    three, two = Ring(["a", "b", "c"]), Ring(["a", "c"])
    lost: list[float] = []
    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = handoff_for(crawler, "a", grace=GRACE)
        handoff.on_hosts_lost = lambda: lost.append(trio.current_time())
        nursery.start_soon(handoff.run)
        handoff.ring_changed(three, frozenset(three.members), frozenset())
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        died = trio.current_time()
        handoff.peer_gone("b")
        await trio.sleep(GRACE / 2)
        assert lost == []
        if comes_back:
            crawler.ring_changed(three)
            handoff.ring_changed(three, frozenset(three.members), frozenset(two.members))
            handoff.release_from("b", three.key)
        await trio.sleep(GRACE)
        nursery.cancel_scope.cancel()
    assert lost == ([] if comes_back else [pytest.approx(died + GRACE)])


async def test_with_replicas_a_host_whose_every_copy_died_waits_for_one(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Two replicas, four peers, and b and c cut off together: a host b owned whose
    copy was on c has no history on this side. It waits for one of them (as long as
    they are dialled) instead of being crawled afresh; a host whose copy lives on is
    taken over at once."""
    four, two = Ring(["a", "b", "c", "d"]), Ring(["a", "d"])
    orphan = host_copied_on(four, ["b", "c"], two, "a")
    copied = host_copied_on(four, ["b", "a"], two, "a")
    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = handoff_for(crawler, "a", copies=2, orphan_grace=600.0)
        nursery.start_soon(handoff.run)
        handoff.ring_changed(four, frozenset(four.members), frozenset())
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        for peer in ("b", "c"):
            handoff.peer_gone(peer)
        handoff.release_from("d", two.key)
        crawler.seed([f"http://{orphan}/", f"http://{copied}/"])
        assert asked(crawler) == {copied}
        await trio.sleep(599)
        assert orphan not in asked(crawler)
        await trio.sleep(2)
        assert orphan in asked(crawler)
        nursery.cancel_scope.cancel()


async def test_without_grace_a_dead_peers_hosts_are_crawled_at_once(tmp_path: Path) -> None:
    three, two = Ring(["a", "b", "c"]), Ring(["a", "c"])
    gained = host_owned(three, "b", also=two, by="a")
    async with crawler_at(tmp_path) as crawler:
        handoff = handoff_for(crawler, "a")
        handoff.ring_changed(three, frozenset(three.members), frozenset())
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        handoff.peer_gone("b")
        handoff.release_from("c", two.key)
        crawler.seed([f"http://{gained}/"])
        assert asked(crawler) == {gained}


async def test_a_sweep_under_another_ring_does_not_release_until_this_ring_is_the_same(
    tmp_path: Path,
) -> None:
    """Back from a stop, a is alone for a moment and holds what the last ring gave
    b. b sweeps under {a, b} before a has heard of b: that sweep says nothing of a
    crawling b's host under a's ring of one (the two would ask it at once), so the
    host stays held; once a's ring is {a, b} too, the earlier sweep counts."""
    last = Ring(["a", "b", "c"])
    two = Ring(["a", "b"])
    host = host_owned(last, "c", also=two, by="a")
    async with crawler_at(tmp_path) as crawler:
        handoff = handoff_for(crawler, "a", last_members=["a", "b", "c"])
        crawler.seed([f"http://{host}/"])
        handoff.release_from("b", two.key)
        handoff.release_from("c", two.key)  # a stray, say: c is not in that ring
        assert asked(crawler) == set()
        handoff.peer_gone("c")
        assert asked(crawler) == set()
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        assert asked(crawler) == {host}


async def test_a_sweep_under_this_ring_releases_the_hosts_gained(tmp_path: Path) -> None:
    two = Ring(["a", "b"])
    host = host_owned(two, "a")
    async with crawler_at(tmp_path) as crawler:
        handoff = handoff_for(crawler, "a")
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        crawler.seed([f"http://{host}/"])
        assert asked(crawler) == set()
        handoff.release_from("b", two.key)
        assert asked(crawler) == {host}


async def test_back_from_a_stop_the_last_rings_other_hosts_wait_for_their_owners(
    tmp_path: Path,
) -> None:
    """Restarted, a holds what the last ring gave to others until each is back and
    has swept under a's ring, or is dead; what a owned in the last ring it crawls
    at once, alone or not."""
    last, now = Ring(["a", "b", "c"]), Ring(["a", "c"])
    bs = host_owned(last, "b", also=now, by="a")
    mine = host_owned(last, "a", also=now, by="a")
    async with crawler_at(tmp_path) as crawler:
        handoff = handoff_for(crawler, "a", last_members=["a", "b", "c"])
        crawler.seed([f"http://{bs}/", f"http://{mine}/"])
        assert asked(crawler) == {mine}
        # c is back and has swept; b, which may hold bs, is not back.
        crawler.ring_changed(now)
        handoff.ring_changed(now, frozenset(now.members), frozenset(now.members))
        handoff.release_from("c", now.key)
        assert asked(crawler) == set()
        handoff.peer_gone("b")
        assert asked(crawler) == {bs}


async def test_back_from_a_leave_that_handed_hosts_on_its_own_wait_for_their_holders(
    tmp_path: Path,
) -> None:
    """a left, handing its hosts to b and c, which stopped later and kept them (each
    refusing the other's hand-offs as it left too). Restarted first, a asks for none
    of the hosts its last ring gave it until b and c are back and have swept, and its
    shard forgets the leave's hand-offs only then (CI: a's pages fetched twice)."""
    last = Ring(["a", "b", "c"])
    mine = host_owned(last, "a")
    kept: list[bool] = []
    async with crawler_at(tmp_path) as crawler:
        handoff = handoff_for(crawler, "a", last_members=["a", "b", "c"], handed_on=True)
        handoff.remember_handed = kept.append
        crawler.seed([f"http://{mine}/"])
        assert asked(crawler) == set()
        crawler.ring_changed(last)
        handoff.ring_changed(last, frozenset(last.members), frozenset(last.members))
        handoff.release_from("b", last.key)
        assert asked(crawler) == set()
        assert kept == []
        handoff.release_from("c", last.key)
        assert asked(crawler) == {mine}
        assert kept == [False]


async def test_a_leave_that_hands_a_host_on_keeps_that_it_did_before_the_first_goes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    two, without = Ring(["a", "b"]), Ring(["b"])
    host = host_owned(two, "a")
    said: list[object] = []
    async with crawler_at(tmp_path) as crawler:
        crawler.seed([f"http://{host}/"])
        handoff = Handoff("a", crawler, _never_answered(said), lambda peer: f"{peer}:1")
        handoff.remember_handed = said.append
        handoff.ring_changed(two, frozenset(two.members), frozenset(), sweep=False)
        assert await handoff.sweep()  # its own host stays
        assert said == []
        crawler.ring_changed(without)  # its leave's ring, as leaving.leave makes it
        handoff.ring_changed(without, frozenset({"b"}), frozenset(), sweep=False)
        assert not await handoff.sweep()
        assert not await handoff.sweep()
        assert said == [True] + ["b:1"] * 6


async def test_hosts_held_for_the_last_rings_peers_are_said_to_be_after_a_while(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Restarted alone, a peer fetched nothing of what its last ring gave others, for
    up to two minutes, and neither status nor the progress line said why (QA)."""
    last = Ring(["a", "b", "c"])
    bs = host_owned(last, "b")
    async with crawler_at(tmp_path) as crawler:
        handoff = handoff_for(crawler, "a", last_members=["a", "b", "c"])
        crawler.seed([f"http://{bs}/"])
        assert asked(crawler) == set()
        start = trio.current_time()
        assert handoff.holding(start) is None  # a moment's hold, as any ring change's
        said = handoff.holding(start + 5)
        assert said == (
            "hosts held for 2 peers of the last run (b, c), not seen since this start: "
            f"start them, or their hosts are crawled afresh in {handoff._hold_limit - 5:.0f} s"
        )
        handoff.peer_gone("b")
        handoff.peer_gone("c")
        assert asked(crawler) == {bs}
        assert handoff.holding(start + 10) is None


async def test_nothing_more_is_handed_to_a_peer_that_left(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A leaving peer sweeps under the ring it had when it began; a peer of that ring
    that leaves too gets no more hand-offs, rather than each host waiting out the
    patience for an answer that will not come."""
    two = Ring(["a", "b"])
    host = host_owned(two, "b")
    sent: list[object] = []
    async with crawler_at(tmp_path) as crawler:
        crawler.seed([f"http://{host}/"])
        handoff = Handoff("a", crawler, _never_answered(sent), lambda peer: f"{peer}:1")
        handoff.ring_changed(two, frozenset(two.members), frozenset(), sweep=False)
        handoff.abandon("b:1")
        start = trio.current_time()
        assert not await handoff.sweep()
        assert sent == [] and trio.current_time() == start
        # Back again: hand-offs go to it (here unanswered: three tries, then kept).
        handoff.back("b:1")
        assert not await handoff.sweep()
        assert sent == ["b:1"] * 3


async def test_a_sweeps_dones_do_not_wait_for_a_peer_across_a_cut(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Sent one after another, a DONE to a peer the network cut off waited out its
    dials (48 s in a 2|2 cut), and the sweeper with it: the next ring change went
    unswept (found by a review). Each goes on its own; the others arrive at once."""
    three = Ring(["a", "b", "c"])
    done: list[str] = []

    async def send(address: str, message: Message) -> bool:
        if address == "b:1":
            await trio.sleep(60)  # across the cut: every dial times out
            return False
        done.append(address)
        return True

    async with crawler_at(tmp_path) as crawler:
        handoff = Handoff("a", crawler, send, lambda peer: f"{peer}:1")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(handoff.run)
            await trio.testing.wait_all_tasks_blocked()
            start = trio.current_time()
            handoff.ring_changed(three, frozenset(three.members), frozenset())  # swept
            await trio.testing.wait_all_tasks_blocked()
            assert done == ["c:1"] and trio.current_time() == start
            # The sweeper is free for the next ring change at once.
            two = Ring(["a", "c"])
            handoff.ring_changed(two, frozenset(two.members), frozenset())
            await trio.testing.wait_all_tasks_blocked()
            assert done == ["c:1", "c:1"] and trio.current_time() == start
            nursery.cancel_scope.cancel()


async def test_a_peer_declared_dead_before_it_swept_is_waited_for_until_the_fence(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Back from a cut, a holds its hosts until every peer that may have been given
    them meanwhile has swept. b, declared dead before it did, used to be let go of at
    once; but b may be cut off rather than dead, fetching a's hosts until its lease
    runs out. They wait out the fence (or b's sweep, if it is back before)."""
    three, two = Ring(["a", "b", "c"]), Ring(["a", "c"])
    mine = host_owned(three, "a", also=two, by="a")
    asks: list[HandoffDone] = []

    async def send(address: str, message: Message) -> bool:
        if isinstance(message, HandoffDone) and message.ask:
            asks.append(message)
        return True

    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = Handoff("a", crawler, send, lambda peer: f"{peer}:1", fence=FENCE)
        nursery.start_soon(handoff.run)
        await trio.testing.wait_all_tasks_blocked()
        handoff.ring_changed(three, frozenset(three.members), frozenset())
        crawler.seed([f"http://{mine}/"])
        handoff.resumed(frozenset({"b", "c"}))
        await trio.testing.wait_all_tasks_blocked()
        token = asks[0].token
        handoff.release_from("c", three.key, token)
        assert asked(crawler) == set()  # b has not swept
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        handoff.release_from("c", two.key)
        handoff.peer_gone("b")
        assert asked(crawler) == set()
        await trio.sleep(FENCE - 1)
        assert asked(crawler) == set()
        await trio.sleep(2)  # the fence ends on its own timer
        assert asked(crawler) == {mine}
        nursery.cancel_scope.cancel()


async def test_a_host_handed_over_that_the_shard_cannot_drop_is_handed_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The new owner took the host, and this shard refused to drop it (a full disk):
    the sweeper died of it, and the peer with it (found by a review). It tries again
    once the shard takes writes; the owner takes the host again as it is."""
    one, two = Ring(["a"]), Ring(["a", "b"])
    leaving = host_owned(two, "b")
    sent: list[str] = []

    async def send(address: str, message: Message) -> bool:
        if isinstance(message, HandoffFrame):
            sent.append(message.host)
            handoff.acked(message.id)
        return True

    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = Handoff("a", crawler, send, lambda peer: f"{peer}:1")
        handoff.ring_changed(one, frozenset(one.members), frozenset())
        crawler.seed([f"http://{leaving}/"])
        drop, refused, dropped = crawler._shard.drop_host, list[str](), trio.Event()

        def refusing_once(host: str) -> list[int]:
            if not refused:
                refused.append(host)
                raise StorageError("database or disk is full")
            fps = drop(host)
            dropped.set()
            return fps

        crawler._shard.drop_host = refusing_once  # type: ignore[method-assign]
        nursery.start_soon(handoff.run)
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        with trio.fail_after(30):
            await dropped.wait()
        assert leaving not in crawler.held_hosts()
        assert refused == [leaving] and sent == [leaving, leaving]
        nursery.cancel_scope.cancel()


async def test_a_sweep_that_met_a_shard_refusing_writes_goes_on_once_it_takes_them(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A host's outcomes are written before it is read for its new owner. The shard
    refused them once (a full disk), and the sweep waited for a request to end, which
    none did (none starts while the shard refuses writes): it hung for good, the disk
    back, and no later ring change was swept (found by a review). It tries again after
    the storage retry."""
    one, two = Ring(["a"]), Ring(["a", "b"])
    leaving = host_owned(two, "b")
    sent: list[str] = []
    done = trio.Event()

    async def send(address: str, message: Message) -> bool:
        if isinstance(message, HandoffFrame):
            sent.append(message.host)
            handoff.acked(message.id)
        elif isinstance(message, HandoffDone):
            done.set()
        return True

    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = Handoff("a", crawler, send, lambda peer: f"{peer}:1")
        handoff.ring_changed(one, frozenset(one.members), frozenset())
        crawler.seed([f"http://{leaving}/"])
        flush, tries = crawler._flush, list[float]()

        def refusing_once() -> bool:
            tries.append(trio.current_time())
            return False if len(tries) == 1 else flush()

        crawler._flush = refusing_once  # type: ignore[method-assign]
        nursery.start_soon(handoff.run)
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        retry = crawler.config.store.storage_retry
        with trio.fail_after(retry + 1):
            await done.wait()
        assert leaving not in crawler.held_hosts() and sent == [leaving]
        assert len(tries) == 2 and tries[1] - tries[0] >= retry
        nursery.cancel_scope.cancel()


async def test_a_gained_host_is_held_past_the_longest_request_of_its_old_owner(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The old owner hands a host over once its request to it has ended, which may
    take the whole fetch deadline (a slow server): the new owner waits that long,
    and the sweep's own time besides, or two requests would go to the host at once."""
    one, two = Ring(["a"]), Ring(["a", "b"])
    host = host_owned(two, "b")
    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = handoff_for(crawler, "b", request_limit=120.0)
        nursery.start_soon(handoff.run)
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        assert one.owner(host) == "a"
        crawler.seed([f"http://{host}/"])
        await trio.sleep(121.0)
        assert asked(crawler) == set()  # a's request may still be on its way
        await trio.sleep(60.0)
        assert asked(crawler) == {host}  # a stuck sweep does not stall it for ever
        nursery.cancel_scope.cancel()


class Pair:
    """Two peers' hand-offs joined by a fake link; ``drop`` decides which frames it
    loses (their sender is told they went)."""

    def __init__(self, nursery: trio.Nursery, crawlers: dict[str, Crawler]) -> None:
        self.nursery = nursery
        self.crawlers = crawlers
        self.frames: list[tuple[str, str, Message]] = []
        self.drop: Callable[[str, str, Message], bool] = lambda sender, to, message: False
        self.peers = {
            me: Handoff(me, c, self._sender(me), lambda p: p) for me, c in crawlers.items()
        }
        for peer in self.peers.values():
            peer.install(lambda kind, handler: None, stopping=lambda: False, is_member=bool)
            nursery.start_soon(peer.run)

    def _sender(self, me: str) -> Callable[[str, Message], Awaitable[bool]]:
        async def send(address: str, message: Message) -> bool:
            self.frames.append((me, address, message))
            other = self.peers.get(address)
            if other is None:
                return False  # no such peer here
            if self.drop(me, address, message):
                return True

            async def reply(answer: Message) -> None:
                if isinstance(answer, HandoffAck):
                    self.peers[me].acked(answer.id, refused=answer.refused)

            if isinstance(message, HandoffFrame):
                self.nursery.start_soon(other._on_handoff, me, message, reply)
            elif isinstance(message, HandoffDone):
                self.nursery.start_soon(other._on_handoff_done, me, message, reply)
            return True

        return send

    def ring(self, me: str, ring: Ring, handing: frozenset[str] | None = None) -> None:
        self.crawlers[me].ring_changed(ring)
        members = frozenset(ring.members)
        self.peers[me].ring_changed(ring, members, members if handing is None else handing)


@asynccontextmanager
async def pair(tmp: Path) -> AsyncIterator[Pair]:
    (tmp / "a").mkdir()
    (tmp / "b").mkdir()
    async with (
        crawler_at(tmp / "a") as ca,
        crawler_at(tmp / "b") as cb,
        trio.open_nursery() as nursery,
    ):
        yield Pair(nursery, {"a": ca, "b": cb})
        nursery.cancel_scope.cancel()


async def test_a_hand_off_refused_is_tried_again_once_the_receiver_catches_up(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """b's ring lags (x has just died, and a saw it first): b refuses the host a hands
    it. The hand-off is tried again, not only at a's next ring change: once b's ring
    is a's, b takes the host with its pending URL."""
    ab, abx = Ring(["a", "b"]), Ring(["a", "b", "x"])
    host = host_owned(ab, "b", also=abx, by="x")
    async with pair(tmp_path) as p:
        ca, cb = p.crawlers["a"], p.crawlers["b"]
        ca.seed([f"http://{host}/", f"http://{host}/page"])
        p.ring("b", abx, frozenset({"a", "b"}))
        p.ring("a", ab)
        await trio.sleep(1.0)
        assert host in ca.held_hosts() and host not in cb.held_hosts()  # refused
        p.ring("b", ab)
        p.peers["b"].peer_gone("x")
        await trio.sleep(35.0)
        assert host not in ca.held_hosts() and host in cb.held_hosts()
        assert cb._shard.pending_count(host) == 2


async def test_a_resumed_peers_ask_lost_on_the_way_is_asked_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Back from a cut, b holds its hosts until a has swept when asked. The first ask
    is lost (the connection broke right after the heal): b asks again, and does not
    wait out the hold's limit."""
    ab = Ring(["a", "b"])
    host = host_owned(ab, "b")
    async with pair(tmp_path) as p:
        cb = p.crawlers["b"]
        p.ring("a", ab)
        p.ring("b", ab)
        await trio.sleep(1.0)  # a's sweep said so: b holds nothing
        lost: list[Message] = []

        def first_ask(sender: str, to: str, message: Message) -> bool:
            if isinstance(message, HandoffDone) and message.ask and not lost:
                lost.append(message)
                return True
            return False

        p.drop = first_ask
        p.peers["b"].resumed(frozenset({"a", "b"}))
        cb.seed([f"http://{host}/"])
        await trio.sleep(0.5)
        assert lost and asked(cb) == set()
        await trio.sleep(5.0)
        assert asked(cb) == {host}


async def test_a_peer_that_left_and_swept_is_not_waited_for_at_a_later_ring_change(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """l1 leaves (its sweep done), then l2 leaves 20 s later, while l1 is still a
    LEFT member (its record lives 2 minutes): the hosts l2 hands over waited for a
    DONE from l1, which can send none under the new ring, for the hold's limit."""
    r4, r3, r2 = Ring(["a", "b", "l1", "l2"]), Ring(["a", "b", "l2"]), Ring(["a", "b"])
    host = host_owned(r3, "l2", also=r2, by="a")
    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = handoff_for(crawler, "a")
        nursery.start_soon(handoff.run)
        handoff.ring_changed(r4, frozenset(r4.members), frozenset())
        handoff.release_from("l1", r3.key)
        crawler.ring_changed(r3)
        handoff.ring_changed(r3, frozenset(r3.members), frozenset({"a", "b", "l2", "l1"}))
        handoff.release_from("b", r3.key)
        handoff.release_from("l2", r3.key)
        await trio.sleep(20.0)
        handoff.release_from("l2", r2.key)
        crawler.ring_changed(r2)
        handoff.ring_changed(r2, frozenset(r2.members), frozenset({"a", "b", "l1", "l2"}))
        handoff.release_from("b", r2.key)
        crawler.seed([f"http://{host}/"])  # what l2 handed over
        assert asked(crawler) == {host}
        nursery.cancel_scope.cancel()


async def test_two_deaths_hours_apart_hold_no_host_for_want_of_a_copy(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """b dies, its hosts are taken over and copied again; hours later c dies. A host
    whose two copies were on b and c before either died has a copy here since: it
    is not held for the orphan grace (a day), as if both had died in one cut."""
    four, three, two = Ring(["a", "b", "c", "d"]), Ring(["a", "c", "d"]), Ring(["a", "d"])
    host = host_copied_on(four, ["b", "c"], two, "a")
    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = handoff_for(crawler, "a", copies=2, orphan_grace=86_400.0)
        nursery.start_soon(handoff.run)
        handoff.ring_changed(four, frozenset(four.members), frozenset())
        crawler.ring_changed(three)
        handoff.ring_changed(three, frozenset(three.members), frozenset(three.members))
        handoff.peer_gone("b")
        for peer in ("c", "d"):
            handoff.release_from(peer, three.key)
        await trio.sleep(5 * 3600.0)
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        handoff.peer_gone("c")
        handoff.release_from("d", two.key)
        crawler.seed([f"http://{host}/"])
        assert asked(crawler) == {host}
        nursery.cancel_scope.cancel()


async def test_a_later_death_does_not_end_the_wait_for_an_earlier_cuts_copies(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    five = Ring(["a", "b", "c", "d", "e"])
    four, three = Ring(["a", "c", "d", "e"]), Ring(["a", "d", "e"])
    two = Ring(["a", "e"])
    host = host_copied_on(five, ["b", "c"], two, "a")
    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = handoff_for(crawler, "a", copies=2, orphan_grace=86_400.0)
        nursery.start_soon(handoff.run)
        handoff.ring_changed(five, frozenset(five.members), frozenset())
        for ring, dead in ((four, "b"), (three, "c")):  # one cut: b and c together
            crawler.ring_changed(ring)
            handoff.ring_changed(ring, frozenset(ring.members), frozenset(ring.members))
            handoff.peer_gone(dead)
        for peer in ("d", "e"):
            handoff.release_from(peer, three.key)
        await trio.sleep(3600.0)
        crawler.ring_changed(two)  # an hour later, d dies too
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        handoff.peer_gone("d")
        handoff.release_from("e", two.key)
        crawler.seed([f"http://{host}/"])
        assert asked(crawler) == set()  # b's and c's copies are still waited for
        nursery.cancel_scope.cancel()


async def test_a_leaving_peer_is_waited_for_until_its_leaves_sweep(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Every peer has swept under some ring before it leaves: what it held is waited
    for until it sweeps under a ring without it (its leave is seen before its sweep)."""
    r3, r2 = Ring(["a", "b", "l"]), Ring(["a", "b"])
    host = host_owned(r3, "l", also=r2, by="a")
    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = handoff_for(crawler, "a")
        nursery.start_soon(handoff.run)
        crawler.ring_changed(r3)
        handoff.ring_changed(r3, frozenset(r3.members), frozenset(r3.members))
        handoff.release_from("l", r3.key)
        handoff.release_from("b", r3.key)
        await trio.sleep(600.0)
        crawler.ring_changed(r2)  # l leaves
        handoff.ring_changed(r2, frozenset(r2.members), frozenset({"a", "b", "l"}))
        handoff.release_from("b", r2.key)
        crawler.seed([f"http://{host}/"])
        assert asked(crawler) == set()  # l may still be asking it
        handoff.release_from("l", r2.key)  # its leave's sweep is done
        assert asked(crawler) == {host}
        nursery.cancel_scope.cancel()


async def test_a_peer_back_after_leaving_is_waited_for_when_it_leaves_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """l leaves (its sweep done), comes back and takes hosts, then leaves again before
    its next DONE: the record of its first leave's sweep says nothing of the hosts it
    held since."""
    abl, ab, abc = Ring(["a", "b", "l"]), Ring(["a", "b"]), Ring(["a", "b", "c"])
    host = host_owned(abl, "l", also=abc, by="a")
    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = handoff_for(crawler, "a")
        nursery.start_soon(handoff.run)

        def ring(r: Ring, handing: str) -> None:
            crawler.ring_changed(r)
            handoff.ring_changed(r, frozenset(r.members), frozenset(handing))

        ring(abl, "abl")
        handoff.release_from("l", abl.key)
        handoff.release_from("b", abl.key)
        ring(ab, "abl")  # l leaves
        handoff.release_from("b", ab.key)
        handoff.release_from("l", ab.key)
        await trio.sleep(600.0)
        ring(abl, "abl")  # l is back, and takes its hosts
        handoff.release_from("b", abl.key)
        ring(abc, "abcl")  # l leaves again, c joins
        handoff.release_from("b", abc.key)
        handoff.release_from("c", abc.key)
        crawler.seed([f"http://{host}/"])
        assert asked(crawler) == set()
        handoff.release_from("l", abc.key)
        assert asked(crawler) == {host}
        nursery.cancel_scope.cancel()


async def test_a_leave_swept_is_told_on_and_kept_so_nobody_waits_for_the_one_that_left(
    tmp_path: Path,
) -> None:
    """c left for good, its leave's sweep done (its DONE under {a, b}). a, started
    after (restarted, or new), never had that DONE and held the hosts it gained for the
    whole limit, waiting for it (QA). b's DONE tells a of it; so does a's own shard,
    for a leave a saw before it stopped. Told by a stranger, or of a peer alive in a's
    view (back since), it counts for nothing."""
    last, two = Ring(["a", "b", "c"]), Ring(["a", "b"])
    cs = host_owned(last, "c", also=two, by="a")
    kept: list[dict[str, str]] = []

    async def reply(message: Message) -> None:
        raise AssertionError("a DONE is not answered")

    async with crawler_at(tmp_path) as crawler:
        handoff = handoff_for(crawler, "a", last_members=["a", "b", "c"])
        handoff.remember_leaves = kept.append
        members = {"a", "b"}
        handoff.install(
            lambda kind, handler: None, stopping=lambda: False, is_member=members.__contains__
        )
        crawler.seed([f"http://{cs}/"])
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(last.members))
        handoff.release_from("b", two.key)
        assert asked(crawler) == set()  # c may still hold cs
        stranger = HandoffDone("a,b,x", left=(("c", two.key),))
        await handoff._on_handoff_done("x", stranger, reply)
        assert asked(crawler) == set()  # a stranger's word
        told = HandoffDone(two.key, left=(("c", two.key), ("a", two.key), ("b", "a")))
        await handoff._on_handoff_done("b", told, reply)
        assert asked(crawler) == {cs}
        assert kept == [{"c": ""}]  # neither a itself nor b, alive here

    async with crawler_at(tmp_path) as crawler:
        again = handoff_for(crawler, "a", last_members=["a", "b", "c"], leaves=kept[-1])
        bs = host_owned(two, "b")
        crawler.seed([f"http://{cs}/", f"http://{bs}/"])
        assert asked(crawler) == {cs}  # only b is waited for
        assert again.leaves() == {"c": ""}
        crawler.ring_changed(last)
        again.ring_changed(last, frozenset(last.members), frozenset(last.members))
        assert again.leaves() == {}  # c is back: its leave says nothing now


async def test_hosts_held_for_a_dead_peers_return_are_said_to_be_so(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Status showed the peer dead, and under it "held until it hands them over or is
    found dead" (QA)."""
    three, two = Ring(["a", "b", "c"]), Ring(["a", "c"])
    async with crawler_at(tmp_path) as crawler:
        handoff = handoff_for(crawler, "a", grace=GRACE)
        handoff.ring_changed(three, frozenset(three.members), frozenset())
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        handoff.peer_gone("b")
        handoff.release_from("c", two.key)
        said = handoff.holding(trio.current_time() + 10)
        assert said == f"hosts held for 1 dead peer (b) to come back, {GRACE - 10:.0f} s at most"


async def test_a_dead_peers_return_is_said_as_its_death_was(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    three, two = Ring(["a", "b", "c"]), Ring(["a", "c"])
    async with crawler_at(tmp_path) as crawler:
        handoff = handoff_for(crawler, "a", grace=GRACE)
        handoff.ring_changed(three, frozenset(three.members), frozenset())
        handoff.ring_changed(two, frozenset(two.members), frozenset(two.members))
        handoff.peer_gone("b")
        handoff.ring_changed(three, frozenset(three.members), frozenset(three.members))
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said == [
        f"member b is dead: its hosts held {GRACE:.1f} s for its return",
        "member b is back",
    ]


async def test_a_leave_during_a_dead_peers_grace_holds_only_what_the_dead_peer_owned(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """c dies (its hosts held for its return), then d leaves and hands its hosts on.
    The grace's hold was on all that a did not own with c back in the ring, d's hosts
    among them: d's went unasked to the grace's end (QA: 86 s). Only c's wait now."""
    four, three, two = Ring(["a", "b", "c", "d"]), Ring(["a", "b", "d"]), Ring(["a", "b"])
    cs = host_owned(four, "c", also=two, by="a")
    ds = host_owned(four, "d", also=two, by="a")
    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = handoff_for(crawler, "a", grace=GRACE)
        nursery.start_soon(handoff.run)
        handoff.ring_changed(four, frozenset(four.members), frozenset())
        crawler.ring_changed(three)
        handoff.ring_changed(three, frozenset(three.members), frozenset(three.members))
        handoff.peer_gone("c")
        handoff.release_from("b", three.key)
        handoff.release_from("d", three.key)
        crawler.ring_changed(two)
        handoff.ring_changed(two, frozenset(two.members), frozenset(["a", "b", "d"]))
        handoff.release_from("b", two.key)
        handoff.release_from("d", two.key)  # d's leave's sweep: every host handed on
        crawler.seed([f"http://{cs}/", f"http://{ds}/"])
        assert asked(crawler) == {ds}
        await trio.sleep(GRACE + 1)
        assert asked(crawler) == {cs}
        nursery.cancel_scope.cancel()


async def test_a_newcomer_holds_the_hosts_of_a_peer_dead_in_its_grace(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A newcomer hears of c only as dead (membership's tombstone): c may be back
    within its grace with its history, and the newcomer fetched c's hosts at once,
    pages c had fetched (QA: 12 fetched twice). It waits the grace out too."""
    # What c owned when it died, as a can tell: among the members before a came.
    two, before = Ring(["a", "b"]), Ring(["b", "c"])
    cs = host_owned(before, "c", also=two, by="a")
    bs = host_owned(before, "b", also=two, by="a")
    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = handoff_for(crawler, "a", grace=GRACE)
        nursery.start_soon(handoff.run)
        crawler.ring_changed(two)
        handoff.ring_changed(
            two, frozenset(two.members), frozenset(two.members), dead=frozenset("c")
        )
        handoff.release_from("b", two.key)
        crawler.seed([f"http://{cs}/", f"http://{bs}/"])
        assert asked(crawler) == {bs}
        await trio.sleep(GRACE + 1)
        assert asked(crawler) == {cs}
        nursery.cancel_scope.cancel()


async def test_a_leave_told_of_a_peer_dead_here_counts_for_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """c left once, with its sweep done, and d kept that; c came back, took hosts, and
    died. d, restarted, still tells of c's old leave: taken, it ended the grace and the
    fence a held c's hosts under, a cut-off c still fetching them (a review). A leave
    is taken only of a peer that membership here says left."""
    three, two = Ring(["a", "b", "c"]), Ring(["a", "b"])
    cs = host_owned(three, "c", also=two, by="a")

    async def reply(message: Message) -> None:
        raise AssertionError("a DONE is not answered")

    async with crawler_at(tmp_path) as crawler:
        handoff = handoff_for(crawler, "a", grace=GRACE, fence=FENCE)
        handoff.install(lambda kind, handler: None, stopping=lambda: False, is_member=bool)
        handoff.ring_changed(three, frozenset(three.members), frozenset(three.members))
        crawler.ring_changed(two)
        handoff.ring_changed(
            two, frozenset(two.members), frozenset(two.members), dead=frozenset("c")
        )
        handoff.peer_gone("c")
        handoff.release_from("b", two.key)
        crawler.seed([f"http://{cs}/"])
        assert asked(crawler) == set()
        await handoff._on_handoff_done("d", HandoffDone("a,b,d", left=(("c", ""),)), reply)
        assert asked(crawler) == set()
        assert handoff.leaves() == {}
