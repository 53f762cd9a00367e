"""Under --recrawl a host handed to its new owner takes its pages' revisit state with
it, in the host's HANDOFF frames (each under the frame cap, whatever the pages'
URLs and validators), and the new owner keeps it on disk with the host and refreshes
its pages; the old owner forgets them. Before, the new owner got only the pages'
fingerprints, as "fetched elsewhere", and refreshed none of them."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import cbor2
import httpx2
import pytest
import trio
import trio.testing

from tests.peer.test_handoff import host_owned
from ubipy.config import CrawlConfig, PolitenessConfig, RecrawlConfig
from ubipy.errors import FrameError, WireError
from ubipy.fetch import Resolver, fingerprint
from ubipy.peer.crawler import Crawler
from ubipy.peer.handoff import Handoff
from ubipy.peer.refreshing import Refresher
from ubipy.peer.refreshpages import REVISITS_PER_FRAME, revisits_from_wire, revisits_to_wire
from ubipy.ring import Ring
from ubipy.store import RefreshRow, Shard
from ubipy.wire import (
    DEFAULT_MAX_FRAME,
    MAX_VALIDATOR,
    FrameType,
    FrameWriter,
    HandoffDone,
    Message,
    Revisit,
    decode,
    secret_from,
)
from ubipy.wire import Handoff as HandoffFrame

TWO = Ring(["a", "b"])
HOST = host_owned(TWO, "b")


def _refuse(request: httpx2.Request) -> httpx2.Response:
    raise AssertionError(f"no request is made in these tests: {request.url}")


@asynccontextmanager
async def crawler_at(
    tmp: Path, *, recrawl: bool = True, resolver: Resolver | None = None
) -> AsyncIterator[Crawler]:
    """A crawler that is never run, under --recrawl unless told otherwise (looking
    names up in a stage of their own with ``resolver``)."""
    shard = Shard.open(tmp)
    config = CrawlConfig(
        data_dir=tmp,
        politeness=PolitenessConfig(delay=0.0),
        recrawl=RecrawlConfig(recrawl=recrawl),
    )
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(_refuse)) as client:
        try:
            yield Crawler(config, shard, client, resolver=resolver)
        finally:
            shard.close()


def _row(url: str, *, etag: str | None = '"v"', digest: str = "d") -> RefreshRow:
    now = time.time()
    return RefreshRow(
        fingerprint(url), url, HOST, 1, 3, 1, 900.0, now - 100, now + 500, 0.0, etag, None, digest
    )


def _rows(n: int, *, tail: str = "", etag: str | None = '"v"') -> list[RefreshRow]:
    return [_row(f"http://{HOST}/p{i}.html{tail}", etag=etag, digest=f"d{i}") for i in range(n)]


async def _hand_over(
    a: Crawler, b: Crawler, rows: list[RefreshRow]
) -> tuple[list[HandoffFrame], Handoff]:
    """``a`` refreshes ``rows`` (its done pages) and hands their host to ``b``, each
    frame through the wire's encoding; returns the frames and ``b``'s side."""
    assert a.refresher is not None
    a._shard.take_done(HOST, [r.fp for r in rows])
    a.refresher.adopt(rows)
    return await hand_over(a, b)


async def hand_over(a: Crawler, b: Crawler) -> tuple[list[HandoffFrame], Handoff]:
    """``a`` hands the hosts it holds to ``b`` (its ring grows from a alone to a and b),
    each frame through the wire's encoding; returns the frames and ``b``'s side."""
    frames: list[HandoffFrame] = []
    swept = trio.Event()
    writer = FrameWriter(secret_from("x"), "a")
    receiver = Handoff("b", b, _nothing, lambda peer: f"{peer}:1")
    receiver.ring_changed(TWO, frozenset(TWO.members), frozenset())

    async def send(address: str, message: Message) -> bool:
        if isinstance(message, HandoffFrame):
            data = writer.frame(message.KIND, message.to_wire(), 1.0)
            assert len(data) <= DEFAULT_MAX_FRAME
            again = decode(FrameType.HANDOFF, cbor2.loads(cbor2.dumps(message.to_wire())))
            assert isinstance(again, HandoffFrame) and again == message
            frames.append(again)
            receiver.receive(again)
            sender.acked(message.id)
        elif isinstance(message, HandoffDone):
            swept.set()
        return True

    async with trio.open_nursery() as nursery:
        sender = _sweeping(nursery, a, send)
        with trio.fail_after(60):
            await swept.wait()
        nursery.cancel_scope.cancel()
    return frames, receiver


def _sweeping(
    nursery: trio.Nursery, a: Crawler, send: Callable[[str, Message], Awaitable[bool]]
) -> Handoff:
    """a's hand-off, sending with ``send``, sweeping its hosts to b: the ring grows
    from a alone to a and b."""
    sender = Handoff("a", a, send, lambda peer: f"{peer}:1")
    sender.ring_changed(Ring(["a"]), frozenset({"a"}), frozenset())
    nursery.start_soon(sender.run)
    a.ring_changed(TWO)
    sender.ring_changed(TWO, frozenset(TWO.members), frozenset(TWO.members))
    return sender


async def _nothing(address: str, message: Message) -> bool:
    return True


async def test_a_hosts_pages_move_with_it_and_are_refreshed_by_its_new_owner(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    rows = _rows(2 * REVISITS_PER_FRAME + 500)
    async with crawler_at(tmp_path / "a") as a, crawler_at(tmp_path / "b") as b:
        assert a.refresher is not None and b.refresher is not None
        # Each chunk's pages are handed to the scheduler, not the host's whole heap
        # made again at each (quadratic in a host's pages).
        remade: list[str] = []
        reschedule = b.refresher.reschedule

        def counted(host: str) -> None:
            remade.append(host)
            reschedule(host)

        b.refresher.reschedule = counted  # type: ignore[method-assign]
        frames, _ = await _hand_over(a, b, rows)
        assert remade == []
        # In the host's chunks: a frame's worth of revisits in each.
        assert [len(f.revisits) for f in frames] == [1000, 1000, 500]
        assert [f.host for f in frames] == [HOST] * 3
        # The old owner forgot them, in memory and on disk.
        assert a.refresher.revisits_of(HOST) == []
        assert a._shard.refresh_rows() == []
        # The new owner has every one, with its history, on disk with the host.
        held = {r.fp: r for r in b.refresher.revisits_of(HOST)}
        assert held.keys() == {r.fp for r in rows}
        for r in rows:
            got = held[r.fp]
            assert (got.url, got.visits, got.changes, got.observed, got.etag, got.digest) == (
                r.url,
                r.visits,
                r.changes,
                r.observed,
                r.etag,
                r.digest,
            )
        assert sorted(b._shard.refresh_rows(), key=lambda r: r.fp) == sorted(
            held.values(), key=lambda r: r.fp
        )
        # ...and the scheduler has them due (its slot made afresh by the take-over).
        slot = b.scheduler.slot(HOST)
        assert slot is not None and len(slot.refresh) == len(rows)
        assert len({slot.pop_due().fp for _ in rows}) == len(rows)  # each once
        # A restart keeps them.
        scheduler = b.scheduler
        restarted = Refresher(b.config, b._shard, lambda: scheduler, b.scope.filters)
        restarted.load()
        assert {r.fp for r in restarted.revisits_of(HOST)} == held.keys()


async def test_a_failing_pages_failures_go_with_its_host(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Its new owner goes on backing it off (and retiring it at its third 404) from
    where its old owner was; before, from 0 (two more requests, or three)."""
    failing, fine = _rows(2)
    failing = replace(failing, failures=3, missing=2)
    async with crawler_at(tmp_path / "a") as a, crawler_at(tmp_path / "b") as b:
        assert b.refresher is not None
        await _hand_over(a, b, [failing, fine])
        got = {r.fp: (r.failures, r.missing) for r in b.refresher.revisits_of(HOST)}
        assert got == {failing.fp: (3, 2), fine.fp: (0, 0)}
        assert b.refresher._failing == {failing.fp}


async def test_long_urls_and_validators_go_in_more_frames_each_under_the_cap(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A frame's revisits are at most a mebibyte of strings, so pages with URLs of
    2,000 characters and validators of 1,000 go in more frames, each far under the
    4 MiB cap (asserted in _hand_over); a validator longer than a receiver takes is
    not sent (the page is asked once in full), the page is."""
    rows = _rows(600, tail="?q=" + "x" * 2000, etag="e" * MAX_VALIDATOR)
    rows[0] = _rows(1, tail="?q=" + "x" * 2000, etag="e" * (MAX_VALIDATOR + 1))[0]
    async with crawler_at(tmp_path / "a") as a, crawler_at(tmp_path / "b") as b:
        assert b.refresher is not None
        frames, _ = await _hand_over(a, b, rows)
        assert len(frames) >= 2 and sum(len(f.revisits) for f in frames) == 600
        held = {r.fp: r for r in b.refresher.revisits_of(HOST)}
        assert len(held) == 600 and held[rows[0].fp].etag is None
        assert held[rows[1].fp].etag == "e" * MAX_VALIDATOR


async def test_a_host_of_long_urls_pending_and_revisits_goes_in_frames_under_the_cap(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """2,000 pending URLs of 2 KB were one frame, and a run of revisits on top made it
    larger than the cap: the writer refused it and the peer died of it, at each
    start (a review). Cut by bytes, every frame is under the cap and all arrive."""
    rows = _rows(600, tail="?q=" + "x" * 2000)
    long = [f"http://{HOST}/n{i:04d}?q=" + "y" * 2000 for i in range(2000)]
    async with crawler_at(tmp_path / "a") as a, crawler_at(tmp_path / "b") as b:
        assert b.refresher is not None
        a.seed(long)
        frames, _ = await _hand_over(a, b, rows)
        assert len(frames) >= 2 and sum(len(f.pending) for f in frames) == 2000
        assert sum(len(f.revisits) for f in frames) == 600
        assert b._shard.pending_count(HOST) == 2000
        assert len(b.refresher.revisits_of(HOST)) == 600


async def test_a_hand_off_frame_the_writer_refuses_keeps_the_host_and_the_peer(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Should a frame still be over the cap (a bug), the writer's FrameError went up
    and ended the peer; the host stays with its sender, and the sweep goes on."""
    refused = trio.Event()

    async def refusing(address: str, message: Message) -> bool:
        if isinstance(message, HandoffFrame):
            refused.set()
            raise FrameError("frame of 5000000 bytes exceeds the cap of 4194304")
        return True

    async with crawler_at(tmp_path / "a") as a, trio.open_nursery() as nursery:
        a.seed([f"http://{HOST}/"])
        _sweeping(nursery, a, refusing)
        with trio.fail_after(60):
            await refused.wait()
        await trio.sleep(30)  # virtual: the sweep goes on, the task alive
        assert a._shard.pending_count(HOST) == 1
        nursery.cancel_scope.cancel()


async def test_a_peer_that_does_not_recrawl_takes_the_host_and_leaves_the_revisits(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    rows = _rows(3)
    async with (
        crawler_at(tmp_path / "a") as a,
        crawler_at(tmp_path / "b", recrawl=False) as b,
    ):
        frames, _ = await _hand_over(a, b, rows)
        assert len(frames[0].revisits) == 3
        assert b.held_hosts() == [HOST] and b._shard.refresh_rows() == []


def test_a_revisit_of_another_host_is_a_wire_error_and_one_that_does_not_normalise_is_dropped() -> (
    None
):
    (run,) = revisits_to_wire(_rows_at_rest(2))
    assert [r.host for r in revisits_from_wire(run, HOST)] == [HOST, HOST]
    other = Revisit("http://elsewhere.test/", 0, 1, 0, 0.0, 1.0, 2.0)
    with pytest.raises(WireError, match=r"elsewhere\.test"):
        revisits_from_wire((*run, other), HOST)
    bad = Revisit("nope://", 0, 1, 0, 0.0, 1.0, 2.0)
    assert len(revisits_from_wire((*run, bad), HOST)) == 2


def _rows_at_rest(n: int) -> list[RefreshRow]:
    return [_row(f"http://{HOST}/p{i}", etag=None) for i in range(n)]
