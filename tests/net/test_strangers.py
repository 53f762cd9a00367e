"""What a stranger on the peer port can cost, on the in-memory network under the
autojump clock: a small buffer for a few seconds, a bounded number of connections,
a few log lines; and members get through all the while."""

from __future__ import annotations

import contextlib
import logging
import struct
import time

import pytest
import trio
import trio.testing

from ubipy.net import Links, MemoryNetwork, Reply, request
from ubipy.net.guard import AUTH_PATIENCE, IDLE_TIMEOUT, MAX_BAD_FRAMES, STRIKE_LIMIT
from ubipy.wire import (
    FIRST_FRAME_CAP,
    Frame,
    FrameWriter,
    Message,
    Seed,
    StatusRequest,
    new_epoch,
    secret_from,
)

KEY = secret_from("strangers test")
PEER = "10.0.0.1:7000"


class Inbox:
    def __init__(self) -> None:
        self.got: list[Message] = []
        self.changed = trio.Event()

    async def handler(self, frame: Frame, message: Message, reply: Reply) -> None:
        self.got.append(message)
        self.changed.set()
        self.changed = trio.Event()

    async def wait_for(self, n: int) -> None:
        while len(self.got) < n:
            await self.changed.wait()

    async def gets_from(self, member: Links, message: Message) -> None:
        """``member`` sends ``message`` to the peer, and it arrives within a second."""
        expected = len(self.got) + 1
        with trio.fail_after(1):
            assert await member.send(PEER, message)
            await self.wait_for(expected)


async def closed_by_peer(stream: trio.abc.Stream) -> None:
    """Read until the far end closes (or breaks) the connection."""
    try:
        while await stream.receive_some(65536):
            pass
    except trio.BrokenResourceError:
        pass


def bad_frames(n: int) -> bytes:
    """``n`` frames of the smallest legal length whose tags are wrong."""
    return (struct.pack(">I", 33) + b"\x01" * 33) * n


@pytest.fixture
def net() -> MemoryNetwork:
    return MemoryNetwork()


async def start_peer(net: MemoryNetwork, nursery: trio.Nursery, inbox: Inbox) -> Links:
    peer = Links(KEY, "peer", inbox.handler, net.node("10.0.0.1"))
    await nursery.start(peer.run, PEER)
    return peer


async def start_member(net: MemoryNetwork, nursery: trio.Nursery) -> Links:
    """A member with the secret, on 10.0.0.2."""
    member = Links(KEY, "member", Inbox().handler, net.node("10.0.0.2"))
    await nursery.start(member.run, "10.0.0.2:7000")
    return member


async def test_a_length_over_the_first_frame_cap_is_refused_before_its_body(
    net: MemoryNetwork, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        peer = await start_peer(net, nursery, Inbox())
        stranger = await net.node("10.6.6.6").connect(PEER)
        await stranger.send_all(struct.pack(">I", 4 * 1024 * 1024 - 1) + b"x" * 60_000)
        with trio.fail_after(1):
            await closed_by_peer(stranger)
        assert peer.stats.rejected["TOO_LARGE"] == 1
        nursery.cancel_scope.cancel()


async def test_a_stranger_that_dribbles_is_cut_after_a_few_seconds(
    net: MemoryNetwork, autojump_clock: trio.testing.MockClock
) -> None:
    async with trio.open_nursery() as nursery:
        peer = await start_peer(net, nursery, Inbox())
        stranger = await net.node("10.6.6.6").connect(PEER)
        start = trio.current_time()
        # A first frame just under the cap, one byte a second.
        await stranger.send_all(struct.pack(">I", FIRST_FRAME_CAP))

        async def dribble() -> None:
            try:
                for _ in range(100):
                    await stranger.send_all(b"y")
                    await trio.sleep(1)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

        nursery.start_soon(dribble)
        with trio.fail_after(AUTH_PATIENCE + 1):
            await closed_by_peer(stranger)
        assert trio.current_time() - start >= AUTH_PATIENCE
        assert peer.stats.cut["no_authentic_frame"] == 1
        assert peer.accepted.total == 0
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("length", [FIRST_FRAME_CAP, 4 * 1024 * 1024 - 1])
async def test_an_address_we_dial_that_dribbles_is_cut_after_a_few_seconds(
    net: MemoryNetwork, autojump_clock: trio.testing.MockClock, length: int
) -> None:
    """A --join address now another service's (or an impostor's) answers our frames
    with the start of one it never finishes: it may cost what a stranger's connection
    costs, a small first frame for a few seconds (a larger one is refused on its
    length), and is said to be no peer."""
    ends: list[trio.abc.Stream] = []

    async def impostor(stream: trio.abc.Stream) -> None:
        ends.append(stream)
        await stream.receive_some(65536)  # our frame, then its answer
        await stream.send_all(struct.pack(">I", length))
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            for _ in range(100):  # one byte a second
                await stream.send_all(b"y")
                await trio.sleep(1)

    async with trio.open_nursery() as nursery:
        await nursery.start(net.node("10.6.6.7").serve, "10.6.6.7:7000", impostor)
        peer = await start_peer(net, nursery, Inbox())
        start = trio.current_time()
        assert await peer.send("10.6.6.7:7000", Seed(("x",)))
        with trio.fail_after(AUTH_PATIENCE + 1):
            why = await peer.wait_for_trouble("10.6.6.7:7000")
            await closed_by_peer(ends[0])
        if length > FIRST_FRAME_CAP:
            assert peer.stats.rejected["TOO_LARGE"] == 1 and trio.current_time() - start < 1
        else:
            assert "nothing authentic within" in why and peer.stats.bytes_in < 200
            assert peer.stats.cut["no_authentic_frame"] == 1
            assert trio.current_time() - start >= AUTH_PATIENCE
        nursery.cancel_scope.cancel()


async def test_a_peer_that_answers_nothing_on_a_connection_we_dialled_keeps_it(
    net: MemoryNetwork, autojump_clock: trio.testing.MockClock
) -> None:
    """Silence is no reason to cut: a member may send nothing back on it for hours."""
    inbox = Inbox()
    async with trio.open_nursery() as nursery:
        await start_peer(net, nursery, inbox)
        member = await start_member(net, nursery)
        await inbox.gets_from(member, Seed(("x",)))
        conn = member._out[PEER]
        await trio.sleep(10 * AUTH_PATIENCE)
        assert member.stats.cut["no_authentic_frame"] == 0
        await inbox.gets_from(member, Seed(("y",)))
        assert member._out[PEER] is conn and not conn.closed
        nursery.cancel_scope.cancel()


async def test_a_flood_of_idle_strangers_is_bounded_and_a_member_gets_through(
    net: MemoryNetwork, autojump_clock: trio.testing.MockClock
) -> None:
    inbox = Inbox()
    async with trio.open_nursery() as nursery:
        peer = await start_peer(net, nursery, inbox)
        cap = peer.accepted.max_unauthenticated
        strangers = [await net.node(f"10.6.{i // 250}.{i % 250}").connect(PEER) for i in range(500)]
        for s in strangers:
            # The oldest are pushed out as the newest arrive.
            with contextlib.suppress(trio.BrokenResourceError):
                await s.send_all(struct.pack(">I", FIRST_FRAME_CAP) + b"z" * 1000)
        await trio.testing.wait_all_tasks_blocked()
        assert peer.accepted.unauthenticated <= cap
        assert peer.stats.cut["pushed_out"] >= 500 - cap
        # A member dials in the middle of it all, and its frame arrives.
        member = await start_member(net, nursery)
        await inbox.gets_from(member, Seed(("http://a.test/",)))
        assert inbox.got == [Seed(("http://a.test/",))]
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("reason", ["BAD_TAG", "BAD_PAYLOAD"])
async def test_bad_frames_cut_the_connection_after_a_few_and_log_a_few_lines(
    net: MemoryNetwork,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    reason: str,
) -> None:
    """Frames with bad tags, or authentic ones of no sense (a SEED whose payload is a
    number: each reset the run, and each was a line of its own, 5,000 in 0.02 s, QA)."""
    inbox = Inbox()
    async with trio.open_nursery() as nursery:
        peer = await start_peer(net, nursery, inbox)
        # Someone with the secret (a buggy member, or a stolen key) proves it once,
        # then sends a flood of bad frames.
        conn = await net.node("10.6.6.6").connect(PEER)
        writer = FrameWriter(KEY, "buggy", new_epoch())
        # The replay guard judges sent_at against the wall clock.
        good = writer.frame(Seed.KIND, Seed(("http://a.test/",)).to_wire(), time.time())
        if reason == "BAD_TAG":
            bad = bad_frames(200_000)
        else:
            bad = b"".join(writer.frame(Seed.KIND, 5, time.time()) for _ in range(1_000))
        with caplog.at_level(logging.WARNING, logger="ubipy.net"):
            with contextlib.suppress(trio.BrokenResourceError):
                await conn.send_all(good + bad)
            with trio.fail_after(1):
                await closed_by_peer(conn)
        assert inbox.got == [Seed(("http://a.test/",))]
        assert peer.stats.rejected[reason] == MAX_BAD_FRAMES
        assert peer.stats.cut["bad_frames"] == 1
        assert len(caplog.records) <= 2
        assert "10.6.6.6" in caplog.text
        nursery.cancel_scope.cancel()


async def test_a_stranger_reconnecting_with_bad_frames_is_turned_away_and_logged_rarely(
    net: MemoryNetwork,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    inbox = Inbox()
    async with trio.open_nursery() as nursery:
        peer = await start_peer(net, nursery, inbox)
        node = net.node("10.6.6.6")
        start = trio.current_time()
        with caplog.at_level(logging.WARNING, logger="ubipy.net"):
            for _ in range(1000):
                conn = await node.connect(PEER)
                with contextlib.suppress(trio.BrokenResourceError):
                    await conn.send_all(bad_frames(1))
                with trio.fail_after(1):
                    await closed_by_peer(conn)
                await trio.sleep(0.01)
        seconds = trio.current_time() - start
        # The first few are read and refused; then the source is turned away at
        # accept, for a while, over and over.
        assert peer.stats.rejected["BAD_TAG"] < 100
        assert peer.stats.cut["barred"] > 900
        assert len(caplog.records) <= seconds + 1
        assert "connections are refused for 30 s" in caplog.text
        # A client with the secret on that address (the operator's `ubipy status`, on
        # the machine of a peer with another secret) is told why it may be turned away.
        with pytest.raises(OSError, match="turns away for 30 s an address whose connections"):
            await request(PEER, KEY, StatusRequest(), network=node)
        # A member on another address is not affected.
        member = await start_member(net, nursery)
        await inbox.gets_from(member, Seed(("http://a.test/",)))
        nursery.cancel_scope.cancel()


async def test_a_stranger_on_a_members_address_does_not_get_the_member_turned_away(
    net: MemoryNetwork, autojump_clock: trio.testing.MockClock
) -> None:
    """A cluster on one machine, or behind one NAT: a stranger reconnecting with bad
    frames from a member's address is read and refused each time, and the member's
    next connection (here a restarted member's) is not refused at accept."""
    inbox = Inbox()
    async with trio.open_nursery() as nursery:
        peer = await start_peer(net, nursery, inbox)
        member = await start_member(net, nursery)
        await inbox.gets_from(member, Seed(("http://a.test/",)))
        stranger = net.node("10.0.0.2")
        for _ in range(10 * STRIKE_LIMIT):
            conn = await stranger.connect(PEER)
            with contextlib.suppress(trio.BrokenResourceError):
                await conn.send_all(bad_frames(1))
            with trio.fail_after(1):
                await closed_by_peer(conn)
        assert peer.stats.rejected["BAD_TAG"] == 10 * STRIKE_LIMIT
        assert peer.stats.cut["barred"] == 0
        restarted = Links(KEY, "member", Inbox().handler, net.node("10.0.0.2"))
        await nursery.start(restarted.run, "10.0.0.2:7001")
        await inbox.gets_from(restarted, Seed(("http://b.test/",)))
        nursery.cancel_scope.cancel()


async def test_strangers_with_many_addresses_get_few_lines_for_being_barred(
    net: MemoryNetwork,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each source barred said so in a line of its own, past the limit on lines over
    all sources: 300 addresses (a /48 of IPv6 holds 65,536 sources) gave 300 lines at
    once (found by a review). The bars are counted, and the next line says how many
    went unsaid."""
    async with trio.open_nursery() as nursery:
        peer = await start_peer(net, nursery, Inbox())
        start = trio.current_time()
        with caplog.at_level(logging.WARNING, logger="ubipy.net"):
            for source in range(100):
                node = net.node(f"10.6.0.{source + 1}")
                for _ in range(STRIKE_LIMIT):
                    conn = await node.connect(PEER)
                    with contextlib.suppress(trio.BrokenResourceError):
                        await conn.send_all(bad_frames(1))
                    with trio.fail_after(1):
                        await closed_by_peer(conn)
        seconds = trio.current_time() - start
        barred = [r for r in caplog.records if "connections are refused for" in r.getMessage()]
        assert barred != [] and len(caplog.records) <= 10 + seconds + 1
        assert all(peer.strikes.barred(f"10.6.0.{i + 1}", trio.current_time()) for i in range(100))
        nursery.cancel_scope.cancel()


async def test_a_member_s_large_first_frame_goes_after_a_hello(
    net: MemoryNetwork, autojump_clock: trio.testing.MockClock
) -> None:
    inbox = Inbox()
    async with trio.open_nursery() as nursery:
        await start_peer(net, nursery, inbox)
        member = await start_member(net, nursery)
        big = Seed(tuple(f"http://a.test/{i:06d}/" + "p" * 100 for i in range(2000)))
        await inbox.gets_from(member, big)
        assert inbox.got == [big]
        nursery.cancel_scope.cancel()


async def test_an_idle_member_connection_is_closed_and_the_next_send_dials_again(
    net: MemoryNetwork, autojump_clock: trio.testing.MockClock
) -> None:
    inbox = Inbox()
    async with trio.open_nursery() as nursery:
        peer = await start_peer(net, nursery, inbox)
        member = await start_member(net, nursery)
        assert await member.send(PEER, Seed(("http://a.test/1",)))
        await trio.sleep(IDLE_TIMEOUT + 1)
        assert peer.stats.cut["idle"] == 1
        assert peer.accepted.total == 0
        await inbox.gets_from(member, Seed(("http://a.test/2",)))
        assert inbox.got == [Seed(("http://a.test/1",)), Seed(("http://a.test/2",))]
        nursery.cancel_scope.cancel()


async def test_an_address_that_takes_the_connection_and_says_nothing_is_named_so(
    net: MemoryNetwork, autojump_clock: trio.testing.MockClock
) -> None:
    """A join address where something listens but is no ubipy peer (it reads and
    answers nothing, or hangs up): the reason given for the failed join says so."""

    async def silent(stream: trio.abc.Stream) -> None:
        await closed_by_peer(stream)

    async def hangs_up(stream: trio.abc.Stream) -> None:
        await stream.aclose()

    async with trio.open_nursery() as nursery:
        await nursery.start(net.node("10.0.0.8").serve, "10.0.0.8:80", silent)
        await nursery.start(net.node("10.0.0.9").serve, "10.0.0.9:80", hangs_up)
        member = await start_member(net, nursery)
        assert member.why("10.0.0.8:80") is None
        assert await member.send("10.0.0.8:80", Seed(()))
        assert "answers nothing (not a ubipy peer, or a busy one?)" in (
            member.why("10.0.0.8:80") or ""
        )
        await member.send("10.0.0.9:80", Seed(()))  # may already find it hung up
        with trio.fail_after(1):
            why = await member.wait_for_trouble("10.0.0.9:80")
        assert why.startswith("it closed the connection without answering (not a ubipy peer? ")
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("copies", [1, MAX_BAD_FRAMES])
async def test_a_frame_captured_on_its_way_to_one_peer_is_refused_by_another(
    net: MemoryNetwork, autojump_clock: trio.testing.MockClock, copies: int
) -> None:
    """Each frame names the peer it is for: an eavesdropper (who has no secret) that
    replays a member's frame to another peer gains nothing, not even a connection
    that counts as a member's. Replayed again and again, it used to be checked whole
    each time until the connection's patience ran out: a run of them is cut at once,
    as bad frames are (but with no strike against the source: a member whose view of
    who is at an address is stale sends them too)."""
    captured = bytearray()

    async def tap(stream: trio.abc.Stream) -> None:  # where the frame was going
        while data := await stream.receive_some(65536):
            captured.extend(data)

    inbox = Inbox()
    async with trio.open_nursery() as nursery:
        await nursery.start(net.node("10.0.0.3").serve, "10.0.0.3:7000", tap)
        peer = await start_peer(net, nursery, inbox)
        member = await start_member(net, nursery)
        ids = {"10.0.0.3:7000": "other", PEER: "peer"}
        member.recipient_of = lambda address: ids.get(address, "")
        assert await member.send("10.0.0.3:7000", Seed(("http://a.test/",)))
        await trio.testing.wait_all_tasks_blocked()
        assert captured
        stranger = await net.node("10.6.6.6").connect(PEER)
        start = trio.current_time()
        await stranger.send_all(bytes(captured) * copies)
        with trio.fail_after(AUTH_PATIENCE + 1):
            await closed_by_peer(stranger)
        took = trio.current_time() - start
        if copies < MAX_BAD_FRAMES:
            assert took >= AUTH_PATIENCE  # never authenticated
        else:
            assert took < 1 and peer.stats.cut["bad_frames"] == 1
        assert "10.6.6.6" not in peer.strikes._strikes  # no strike against the source
        assert inbox.got == []
        assert peer.stats.rejected["MISDIRECTED"] == copies
        # The member's own frames, named for this peer, arrive.
        await inbox.gets_from(member, Seed(("http://a.test/2",)))
        nursery.cancel_scope.cancel()


async def test_a_member_connection_is_idle_until_a_frame_ends_not_a_byte_arrives(
    net: MemoryNetwork, autojump_clock: trio.testing.MockClock
) -> None:
    """Once a connection has proved the secret, a frame that never ends (a byte now
    and then) does not hold it open: idleness is counted in frames."""
    async with trio.open_nursery() as nursery:
        peer = await start_peer(net, nursery, Inbox())
        writer = FrameWriter(KEY, "member", new_epoch())
        conn = await net.node("10.0.0.2").connect(PEER)
        seed = Seed(("http://a.test/",))
        await conn.send_all(writer.frame(seed.KIND, seed.to_wire(), time.time(), to="peer"))
        await conn.send_all(struct.pack(">I", 1024 * 1024))  # a large frame begins...
        start = trio.current_time()

        async def dribble() -> None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                for _ in range(100):  # ...and goes on a byte every 100 s
                    await conn.send_all(b"y")
                    await trio.sleep(IDLE_TIMEOUT * 0.8)

        nursery.start_soon(dribble)
        with trio.fail_after(IDLE_TIMEOUT + 1):
            await closed_by_peer(conn)
        assert trio.current_time() - start <= IDLE_TIMEOUT
        assert peer.stats.cut["idle"] == 1
        nursery.cancel_scope.cancel()


async def test_a_member_s_large_frame_on_a_slow_link_is_not_idle(
    net: MemoryNetwork, autojump_clock: trio.testing.MockClock
) -> None:
    """A frame coming steadily (64 KiB every 100 s) keeps its connection, however long
    the whole frame takes."""
    inbox = Inbox()
    async with trio.open_nursery() as nursery:
        peer = await start_peer(net, nursery, inbox)
        writer = FrameWriter(KEY, "member", new_epoch())
        conn = await net.node("10.0.0.2").connect(PEER)
        seed = Seed(("http://a.test/",))
        await conn.send_all(writer.frame(seed.KIND, seed.to_wire(), time.time(), to="peer"))
        big = Seed(tuple(f"http://a.test/{i:06d}/{'x' * 80}" for i in range(10_000)))
        data = writer.frame(big.KIND, big.to_wire(), time.time(), to="peer")
        assert len(data) > 15 * 65_536  # over 25 minutes at this pace
        for start in range(0, len(data), 65_536):
            await conn.send_all(data[start : start + 65_536])
            await trio.sleep(IDLE_TIMEOUT * 0.8)
        with trio.fail_after(1):
            await inbox.wait_for(2)
        assert inbox.got == [seed, big]
        assert peer.stats.cut["idle"] == 0
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize(
    ("sent", "logged"),
    [
        (b"\x00\x00\x00\x00", "four zero bytes before a frame (a refusal notice, of nothing sent)"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "(the bytes of an HTTP request)"),
    ],
)
async def test_what_a_stranger_sent_is_logged_as_what_it_was(
    net: MemoryNetwork,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    sent: bytes,
    logged: str,
) -> None:
    # Four zero bytes were logged as "the far end could not authenticate our frames",
    # and "GET " as a frame of 1195725856 bytes (QA).
    async with trio.open_nursery() as nursery:
        await start_peer(net, nursery, Inbox())
        conn = await net.node("10.6.6.6").connect(PEER)
        with caplog.at_level(logging.WARNING, logger="ubipy.net"):
            await conn.send_all(sent)
            with trio.fail_after(1):
                await closed_by_peer(conn)
        assert logged in caplog.text and "10.6.6.6" in caplog.text
        nursery.cancel_scope.cancel()
