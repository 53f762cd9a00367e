"""Frames and the replay window across connections: a frame is numbered as it is
written, so one queued behind a large frame is not overtaken by more than the window
on another connection; and a replay on a connection that proved the secret is dropped
without cutting the connection."""

from __future__ import annotations

import time

import trio
import trio.testing

from ubipy.net import Links, MemoryNetwork, Reply
from ubipy.wire import Frame, FrameWriter, Message, Seed, secret_from

KEY = secret_from("frame order test")


async def ignore(frame: Frame, message: Message, reply: Reply) -> None:
    pass


async def test_a_frame_queued_behind_a_large_one_is_numbered_when_it_is_written() -> None:
    net = MemoryNetwork(buffer=100_000)
    stalled, release, replied, queued = trio.Event(), trio.Event(), trio.Event(), trio.Event()
    replies = 1_100  # more than the replay window (1,024)
    got: list[str] = []

    async def on_b(frame: Frame, message: Message, reply: Reply) -> None:
        assert isinstance(message, Seed)
        if message.urls == ("stall",):
            stalled.set()
            await release.wait()  # b reads nothing more on a's connection meanwhile
        got.append(message.urls[0][:10])
        if len(got) == replies:
            replied.set()
        if message.urls == ("queued",):
            queued.set()

    async def on_a(frame: Frame, message: Message, reply: Reply) -> None:
        for i in range(replies):  # on the connection b dialled
            await reply(Seed((f"r{i}",)))

    a = Links(KEY, "a", on_a, net.node("10.0.0.1"))
    b = Links(KEY, "b", on_b, net.node("10.0.0.2"))
    async with trio.open_nursery() as nursery:
        here = await nursery.start(a.run, "10.0.0.1:0")
        there = await nursery.start(b.run, "10.0.0.2:0")
        assert await a.send(there, Seed(("stall",)))
        await stalled.wait()
        # A large frame fills the buffer and waits for room; a small one waits for it.
        nursery.start_soon(a.send, there, Seed(("x" * 300_000,)))
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(a.send, there, Seed(("queued",)))
        await trio.testing.wait_all_tasks_blocked()
        assert await b.send(here, Seed(("ping",)))
        with trio.fail_after(5):
            await replied.wait()
        release.set()
        with trio.fail_after(5):
            await queued.wait()
        # The large frame took its number before the replies went: that one is lost.
        assert b.stats.rejected == {"REPLAY": 1}
        nursery.cancel_scope.cancel()


async def test_replays_on_an_authenticated_connection_do_not_cut_it() -> None:
    net = MemoryNetwork()
    got: list[Message] = []
    both = trio.Event()

    async def collect(frame: Frame, message: Message, reply: Reply) -> None:
        got.append(message)
        if len(got) == 2:
            both.set()

    b = Links(KEY, "b", collect, net.node("10.0.0.2"))
    writer = FrameWriter(KEY, "a")
    async with trio.open_nursery() as nursery:
        there = await nursery.start(b.run, "10.0.0.2:0")
        stream = await net.node("10.0.0.1").connect(there)
        first = writer.frame(Seed.KIND, Seed(("1",)).to_wire(), time.time(), to="b")
        second = writer.frame(Seed.KIND, Seed(("2",)).to_wire(), time.time(), to="b")
        await stream.send_all(first + first * 6 + second)
        with trio.fail_after(5):
            await both.wait()
        assert got == [Seed(("1",)), Seed(("2",))]
        assert b.stats.rejected == {"REPLAY": 6} and not b.stats.cut
        nursery.cancel_scope.cancel()
