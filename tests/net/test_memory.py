"""The in-memory network: its streams behave as trio streams should, and two Links over
it see the latency, loss, partitions and kills the test sets, on the autojump clock."""

from __future__ import annotations

import errno
import random
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

from ubipy.net import Links, MemoryNetwork, MemoryStream, Reply
from ubipy.wire import Frame, Message, Seed, secret_from

KEY = secret_from("memory test")


# -- the streams -------------------------------------------------------------------------
async def test_memory_streams_pass_trio_s_generic_stream_checks() -> None:
    async def pair() -> tuple[MemoryStream, MemoryStream]:
        return MemoryNetwork().stream_pair("a", "b")

    async def clogged() -> tuple[MemoryStream, MemoryStream]:
        # One byte of buffer, already used: the next send waits for a read.
        a, b = MemoryNetwork(buffer=1).stream_pair("a", "b")
        await a.send_all(b"x")
        await b.send_all(b"y")
        return a, b

    await trio.testing.check_two_way_stream(pair, clogged)


async def test_bytes_arrive_after_the_latency_and_in_order_despite_jitter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    net = MemoryNetwork(rng=random.Random(1), latency=0.1, jitter=0.5)
    a, b = net.stream_pair("a", "b")
    start = trio.current_time()
    for i in range(50):
        await a.send_all(bytes([i]))
    await a.aclose()
    got = b""
    first_at = None
    while chunk := await b.receive_some():
        first_at = first_at if first_at is not None else trio.current_time()
        got += chunk
    assert got == bytes(range(50))
    assert first_at is not None and 0.1 <= first_at - start < 0.6
    assert trio.current_time() - start < 0.6 + 1e-9  # the end of stream follows the last


async def test_a_reader_that_reads_nothing_stalls_its_writer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    net = MemoryNetwork(buffer=1000)
    a, b = net.stream_pair("a", "b")
    await a.send_all(b"x" * 1000)
    with trio.move_on_after(60) as waited:
        await a.send_all(b"more")
    assert waited.cancelled_caught  # blocked on a full buffer
    assert await b.receive_some() == b"x" * 1000
    with trio.fail_after(1):
        await a.send_all(b"more")  # room again
    assert await b.receive_some() == b"more"


async def test_a_send_cancelled_for_want_of_room_has_sent_what_fitted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """As on a socket: a writer's time-out can leave part of its chunk on the wire."""
    net = MemoryNetwork(buffer=1000)
    a, b = net.stream_pair("a", "b")
    with trio.move_on_after(1) as waited:
        await a.send_all(b"x" * 2500)
    assert waited.cancelled_caught
    assert await b.receive_some() == b"x" * 1000
    with trio.move_on_after(60) as nothing_more:
        await b.receive_some()
    assert nothing_more.cancelled_caught


# -- two Links over it ---------------------------------------------------------------------
class Inbox:
    def __init__(self) -> None:
        self.frames: list[tuple[float, Seed]] = []
        self._grew = trio.Event()

    async def handler(self, frame: Frame, message: Message, reply: Reply) -> None:
        assert isinstance(message, Seed)
        self.frames.append((trio.current_time(), message))
        self._grew.set()
        self._grew = trio.Event()

    async def wait_for(self, n: int) -> None:
        while len(self.frames) < n:
            await self._grew.wait()


def numbered(n: int) -> Seed:
    """A frame told apart from the others by its number."""
    return Seed((str(n),))


async def ignore(frame: Frame, message: Message, reply: Reply) -> None:
    pass


async def two_links(nursery: trio.Nursery, net: MemoryNetwork) -> tuple[Links, Links, str, Inbox]:
    inbox = Inbox()
    a = Links(KEY, "a", ignore, net.node("10.0.0.1"))
    b = Links(KEY, "b", inbox.handler, net.node("10.0.0.2"))
    await nursery.start(a.run, "10.0.0.1:0")
    there: str = await nursery.start(b.run, "10.0.0.2:0")
    return a, b, there, inbox


async def test_frames_arrive_with_the_link_s_latency(
    autojump_clock: trio.testing.MockClock,
) -> None:
    net = MemoryNetwork(latency=0.05)
    net.set_link("10.0.0.1", "10.0.0.2", latency=0.2)
    async with trio.open_nursery() as nursery:
        a, _, there, inbox = await two_links(nursery, net)
        assert there == "10.0.0.2:10000"
        start = trio.current_time()
        # A dial is a round trip, then the frame's own trip.
        assert await a.send(there, numbered(1))
        with trio.fail_after(5):
            await inbox.wait_for(1)
        at, payload = inbox.frames[0]
        assert at == pytest.approx(start + 3 * 0.2) and payload == numbered(1)
        start = trio.current_time()
        assert await a.send(there, numbered(2))  # the connection is up
        with trio.fail_after(5):
            await inbox.wait_for(2)
        at, payload = inbox.frames[1]
        assert at == pytest.approx(start + 0.2) and payload == numbered(2)
        nursery.cancel_scope.cancel()


async def test_lost_frames_go_missing_whole(autojump_clock: trio.testing.MockClock) -> None:
    net = MemoryNetwork(rng=random.Random(7), latency=0.01, loss=0.5)
    async with trio.open_nursery() as nursery:
        a, b, there, inbox = await two_links(nursery, net)
        for i in range(200):
            assert await a.send(there, numbered(i))  # delivery is not confirmed
        await trio.sleep(1)  # long past every frame's arrival (nothing else to wait on)
        got = [int(payload.urls[0]) for _, payload in inbox.frames]
        # Roughly half arrive, in order, every one authentic: no frame was cut up.
        assert 60 < len(got) < 140
        assert got == sorted(got)
        assert net.stats.chunks_dropped == 200 - len(got)
        assert sum(b.stats.rejected.values()) == 0
        nursery.cancel_scope.cancel()


async def test_one_way_loss_drops_only_what_goes_that_way(
    autojump_clock: trio.testing.MockClock,
) -> None:
    net = MemoryNetwork(rng=random.Random(3), latency=0.01)
    net.set_link("10.0.0.2", "10.0.0.1", loss=1.0, one_way=True)
    assert net.link("10.0.0.2", "10.0.0.1").loss == 1.0
    assert net.link("10.0.0.1", "10.0.0.2").loss == 0.0
    async with trio.open_nursery() as nursery:
        a, _, there, inbox = await two_links(nursery, net)
        back = Inbox()
        b_to_a = Links(KEY, "b2", ignore, net.node("10.0.0.2"))
        a_here = Links(KEY, "a2", back.handler, net.node("10.0.0.1"))
        await nursery.start(b_to_a.run, "10.0.0.2:0")
        here = await nursery.start(a_here.run, "10.0.0.1:0")
        for i in range(5):
            assert await a.send(there, numbered(i))
            # The dial's round trip itself is not a byte of data: it goes through.
            assert await b_to_a.send(here, numbered(i))
        with trio.fail_after(5):
            await inbox.wait_for(5)
        await trio.sleep(1)  # long past every frame's arrival (nothing else to wait on)
        assert back.frames == []
        net.set_link("10.0.0.2", "10.0.0.1", loss=0.0)  # both ways again
        assert await b_to_a.send(here, numbered(9))
        with trio.fail_after(5):
            await back.wait_for(1)
        nursery.cancel_scope.cancel()


async def test_a_partition_breaks_connections_and_blocks_dials_until_healed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    net = MemoryNetwork(latency=0.01, syn_timeout=20.0)
    async with trio.open_nursery() as nursery:
        a, _, there, inbox = await two_links(nursery, net)
        assert await a.send(there, numbered(1))
        with trio.fail_after(1):
            await inbox.wait_for(1)
        assert net.reachable("10.0.0.1", "10.0.0.2")
        net.partition(["10.0.0.1"], ["10.0.0.2"])
        assert not net.reachable("10.0.0.1", "10.0.0.2")
        # The connection is broken: this send fails, and the next dial goes unanswered
        # until the links give up on it (after 5 s, before the network's SYN timer).
        assert not await a.send(there, numbered(2))
        start = trio.current_time()
        assert not await a.send(there, numbered(3))
        assert trio.current_time() - start == pytest.approx(5.0)
        assert there in a.unreachable and net.stats.timed_out == 1
        net.heal()
        assert await a.send(there, numbered(4))
        with trio.fail_after(1):
            await inbox.wait_for(2)
        assert [int(p.urls[0]) for _, p in inbox.frames] == [1, 4]
        assert there not in a.unreachable
        nursery.cancel_scope.cancel()


async def test_sends_queued_behind_a_dial_that_fails_fail_with_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Ten sends to an address that answers nothing: they used to dial in turn, one
    after the other's 5 s, the last failing after 50 s (a control peer pushed to once
    a second piled them up without end). They fail with the one dial they waited for."""
    net = MemoryNetwork(latency=0.01, syn_timeout=20.0)
    async with trio.open_nursery() as nursery:
        a, _, there, _ = await two_links(nursery, net)
        net.partition(["10.0.0.1"], ["10.0.0.2"])
        start, failed = trio.current_time(), list[float]()

        async def send(n: int) -> None:
            assert not await a.send(there, numbered(n))
            failed.append(trio.current_time() - start)

        async with trio.open_nursery() as sends:
            for n in range(10):
                sends.start_soon(send, n)
        assert failed == [pytest.approx(5.0)] * 10
        assert a.stats.dial_failures == 1
        # The next send, on its own, dials again.
        assert not await a.send(there, numbered(10))
        assert a.stats.dial_failures == 2
        nursery.cancel_scope.cancel()


async def test_the_reader_across_a_cut_sees_the_end_of_its_stream(
    autojump_clock: trio.testing.MockClock,
) -> None:
    net = MemoryNetwork(latency=0.01)
    a, b = net.stream_pair("10.0.0.1", "10.0.0.2")
    await a.send_all(b"in flight")
    net.partition(["10.0.0.1"])
    with trio.fail_after(1):
        assert await b.receive_some() == b""  # what was in flight is lost with it
    with pytest.raises(trio.BrokenResourceError):
        await b.send_all(b"x")
    with pytest.raises(trio.BrokenResourceError):
        await a.send_all(b"x")


async def test_a_link_cut_silently_loses_what_is_sent_until_tcp_gives_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """As behind a firewall that drops: sends succeed and nothing arrives, neither
    the bytes nor a close; a minute after the cut (TCP_USER_TIMEOUT) both ends break.
    New dials go unanswered, as with any cut."""
    net = MemoryNetwork(latency=0.01)
    a, b = net.stream_pair("10.0.0.1", "10.0.0.2")
    await a.send_all(b"in flight")
    cut_at = trio.current_time()
    net.cut_link("10.0.0.1", "10.0.0.2", silently=True)
    assert not net.reachable("10.0.0.1", "10.0.0.2")
    await a.send_all(b"lost")
    await b.send_all(b"lost too")
    await a.aclose()
    with trio.fail_after(120):
        assert await b.receive_some() == b""
    assert trio.current_time() - cut_at == pytest.approx(60.0)
    with pytest.raises(trio.BrokenResourceError):
        await b.send_all(b"x")
    assert net.stats.bytes_delivered == 0


async def test_a_send_waiting_for_room_at_a_silent_cut_goes_on_into_the_void(
    autojump_clock: trio.testing.MockClock,
) -> None:
    net = MemoryNetwork(buffer=1000)
    a, _ = net.stream_pair("10.0.0.1", "10.0.0.2")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(a.send_all, b"x" * 5000)  # 1000 go, the rest waits for room
        await trio.sleep(1)
        net.cut_link("10.0.0.1", "10.0.0.2", silently=True)
        with trio.fail_after(1):
            await trio.sleep(0.5)  # the nursery waits for the send: it ends
    await trio.sleep(60)
    with pytest.raises(trio.BrokenResourceError):
        await a.send_all(b"x")


async def test_a_killed_host_refuses_dials_until_revived(
    autojump_clock: trio.testing.MockClock,
) -> None:
    net = MemoryNetwork(latency=0.01)
    async with trio.open_nursery() as nursery:
        a, _, there, inbox = await two_links(nursery, net)
        assert await a.send(there, numbered(1))
        with trio.fail_after(1):
            await inbox.wait_for(1)
        net.kill("10.0.0.2")
        assert not await a.send(there, numbered(2))  # the connection broke
        start = trio.current_time()
        assert not await a.send(there, numbered(3))
        assert trio.current_time() - start == pytest.approx(0.02)  # refused: a round trip
        assert net.stats.refused == 1
        with pytest.raises(OSError) as dead:
            await net.node("10.0.0.2").connect("10.0.0.1:10000")
        assert dead.value.errno == errno.ENETUNREACH  # a dead host sends nothing
        net.revive("10.0.0.2")
        assert await a.send(there, numbered(4))
        with trio.fail_after(1):
            await inbox.wait_for(2)
        assert [int(p.urls[0]) for _, p in inbox.frames] == [1, 4]
        nursery.cancel_scope.cancel()


async def test_nobody_listening_is_refused_and_ports_are_per_host() -> None:
    net = MemoryNetwork()
    with pytest.raises(ConnectionRefusedError):
        await net.node("10.0.0.1").connect("10.0.0.2:10000")
    async with trio.open_nursery() as nursery:
        one = await nursery.start(net.node("10.0.0.1").serve, "10.0.0.1:0", ignore_stream)
        two = await nursery.start(net.node("10.0.0.1").serve, "10.0.0.1:0", ignore_stream)
        other = await nursery.start(net.node("10.0.0.2").serve, "10.0.0.2:0", ignore_stream)
        assert (one, two, other) == ("10.0.0.1:10000", "10.0.0.1:10001", "10.0.0.2:10000")
        with pytest.raises(OSError):
            await nursery.start(net.node("10.0.0.1").serve, one, ignore_stream)
        with pytest.raises(OSError):
            await nursery.start(net.node("10.0.0.1").serve, "10.0.0.2:0", ignore_stream)
        nursery.cancel_scope.cancel()
    with pytest.raises(ConnectionRefusedError):  # closed with its server
        await net.node("10.0.0.2").connect(one)


async def ignore_stream(stream: trio.abc.Stream) -> None:
    await stream.aclose()


async def test_a_send_stuck_on_a_peer_that_reads_nothing_ends_once_it_is_forgotten(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The loopback test of the same name (test_links.py), in memory."""
    net = MemoryNetwork(buffer=1_000_000)
    a = Links(KEY, "a", ignore, net.node("10.0.0.1"))
    ended = trio.Event()

    async def deaf(stream: trio.abc.Stream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        await nursery.start(a.run, "10.0.0.1:0")
        there = await nursery.start(net.node("10.0.0.2").serve, "10.0.0.2:0", deaf)

        async def flood() -> None:
            for _ in range(100):
                if not await a.send(there, Seed(("x" * 100_000,))):
                    break
            ended.set()

        nursery.start_soon(flood)
        await trio.testing.wait_all_tasks_blocked()
        assert not ended.is_set()  # stuck writing
        a.forget(there)
        with trio.fail_after(5):
            await ended.wait()
        nursery.cancel_scope.cancel()


async def test_a_frame_cut_short_by_its_caller_s_time_out_spoils_no_later_frame(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A send given up by its caller (as the IP leases give up after 2 s) while its frame
    was partly written: the frames after it go on a new connection. On the old one they
    were read as the rest of the cut frame, and lost with the connection."""
    net = MemoryNetwork(latency=0.01, buffer=50_000)
    stalled, release, all_there = trio.Event(), trio.Event(), trio.Event()
    got: list[str] = []

    async def slow(frame: Frame, message: Message, reply: Reply) -> None:
        assert isinstance(message, Seed)
        if message.urls == ("stall",):
            stalled.set()
            await release.wait()  # b reads nothing more on this connection meanwhile
        got.append(message.urls[0][:10])
        if len(got) == 4:
            all_there.set()

    a = Links(KEY, "a", ignore, net.node("10.0.0.1"))
    b = Links(KEY, "b", slow, net.node("10.0.0.2"))
    async with trio.open_nursery() as nursery:
        await nursery.start(a.run, "10.0.0.1:0")
        there = await nursery.start(b.run, "10.0.0.2:0")
        assert await a.send(there, Seed(("stall",)))
        await stalled.wait()
        with trio.move_on_after(1) as cut:
            await a.send(there, Seed(("x" * 200_000,)))
        assert cut.cancelled_caught  # 50,000 bytes of it went
        release.set()
        for i in range(3):
            assert await a.send(there, numbered(i))
        with trio.fail_after(5):
            await all_there.wait()
        assert got == ["stall", "0", "1", "2"]
        assert b.stats.rejected == {"TRUNCATED": 1}  # the cut frame, and nothing else
        nursery.cancel_scope.cancel()


async def test_a_first_frame_cut_short_is_not_taken_for_another_secret(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The same on a new connection: the next frame completed the cut one, whose tag
    then failed, and the receiver's refusal made the sender report that the secrets
    differ."""
    net = MemoryNetwork(latency=0.1, buffer=20_000)
    async with trio.open_nursery() as nursery:
        a, _, there, inbox = await two_links(nursery, net)
        # The dial takes 0.2 s; then 20,000 bytes leave and the rest waits for room.
        with trio.move_on_after(0.25) as cut:
            await a.send(there, Seed(("x" * 60_000,)))
        assert cut.cancelled_caught
        assert await a.send(there, Seed(("y" * 45_000,)))
        with trio.fail_after(5):
            await inbox.wait_for(1)
        assert inbox.frames[0][1] == Seed(("y" * 45_000,))
        assert there not in a.trouble  # no "the secrets differ"
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def deaf_peer() -> AsyncIterator[tuple[MemoryNetwork, Links, str]]:
    """Links at 10.0.0.1 (100 kB of buffer a connection), and the address of a peer at
    10.0.0.2 that takes its connections and reads nothing."""
    net = MemoryNetwork(buffer=100_000)
    a = Links(KEY, "a", ignore, net.node("10.0.0.1"))

    async def deaf(stream: trio.abc.Stream) -> None:
        await trio.sleep_forever()

    async with trio.open_nursery() as nursery:
        await nursery.start(a.run, "10.0.0.1:0")
        yield net, a, await nursery.start(net.node("10.0.0.2").serve, "10.0.0.2:0", deaf)
        nursery.cancel_scope.cancel()


async def test_a_failed_send_on_a_forgotten_connection_leaves_its_successor_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A send stuck on a connection when its peer is forgotten fails once that
    connection is closed; meanwhile a new one was dialled for the next sends. The
    failure used to drop whatever was cached for the address: the new connection."""
    async with deaf_peer() as (net, a, there):
        stuck: list[bool] = []

        async def flood() -> None:
            while not stuck:
                if not await a.send(there, Seed(("x" * 60_000,))):
                    stuck.append(False)

        async with trio.open_nursery() as sends:
            sends.start_soon(flood)
            await trio.testing.wait_all_tasks_blocked()
            assert net.stats.connections == 1 and not stuck  # writing, the buffer full
            a.forget(there)  # its stuck send is cut within a second
            assert await a.send(there, Seed(("y",)))  # on a new connection
            assert net.stats.connections == 2
        assert stuck == [False]
        assert await a.send(there, Seed(("z",)))  # still on the new one
        assert net.stats.connections == 2


async def test_a_write_failing_on_a_refused_connection_still_reads_the_refusal(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A peer with another secret answers the refusal and hangs up; a send that finds
    the connection broken before the refusal has arrived must leave the connection's
    reader to read it, so that the sender still says why."""
    net = MemoryNetwork(latency=0.01)
    net.set_link("10.0.0.2", "10.0.0.1", latency=1.0, one_way=True)  # the answer is slow
    a = Links(KEY, "a", ignore, net.node("10.0.0.1"))
    b = Links(secret_from("another secret"), "b", ignore, net.node("10.0.0.2"))
    async with trio.open_nursery() as nursery:
        await nursery.start(a.run, "10.0.0.1:0")
        there = await nursery.start(b.run, "10.0.0.2:0")
        assert await a.send(there, numbered(1))
        await trio.sleep(0.5)  # b has refused it and hung up; its refusal is on its way
        assert not await a.send(there, numbered(2))
        with trio.fail_after(5):
            assert "the secrets differ" in await a.wait_for_trouble(there)
        nursery.cancel_scope.cancel()


async def test_a_send_to_a_peer_that_reads_nothing_gives_up_in_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A peer that takes its connection and reads nothing (stuck, or behind a dead
    path the kernel has not noticed): the send that filled the buffer held the send
    lock, and every other send to that peer behind it, for as long as that lasted.
    It gives up within the write deadline; the next send dials afresh."""
    async with deaf_peer() as (net, a, there):
        start = trio.current_time()
        sent = 0
        with trio.fail_after(120):
            while await a.send(there, Seed(("x" * 60_000,))):
                sent += 1
        assert sent == 1  # the second filled the buffer and waited
        assert 20 <= trio.current_time() - start <= 25
        assert await a.send(there, Seed(("y",)))
        assert net.stats.connections == 2
