"""Frames between two members whose link is cut go through a third (net/relays.py),
answers included; the recipient checks a relayed frame as any of its sender's; a relay
forwards once, and only members' frames."""

from __future__ import annotations

import errno
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import trio
import trio.testing

from ubipy.net import Handler, Links, MemoryNetwork, Reply
from ubipy.net.relays import MAX_FORWARDS, refused_dial
from ubipy.wire import Frame, FrameType, FrameWriter, Message, Relay, Seed, SeedAck, secret_from

KEY = secret_from("relay test")


@dataclass
class _Peer:
    links: Links
    address: str = ""
    got: list[tuple[str, Message]] = field(default_factory=list)
    arrived: trio.Event = field(default_factory=trio.Event)


@asynccontextmanager
async def three(
    net: MemoryNetwork, names: str = "abc", *, stalls: str = ""
) -> AsyncIterator[dict[str, _Peer]]:
    """Peers a, b and c (or ``names``) on 10.0.0.1 on, each knowing the others' ids
    and addresses; each answers a Seed with a SeedAck counting the URLs, but those in
    ``stalls``, which take a first frame and then read nothing more."""
    peers: dict[str, _Peer] = {}

    def handler(name: str) -> Handler:
        async def on_frame(frame: Frame, message: Message, reply: Reply) -> None:
            peer = peers[name]
            peer.got.append((frame.sender, message))
            peer.arrived.set()
            peer.arrived = trio.Event()
            if name in stalls:
                await trio.sleep_forever()
            if isinstance(message, Seed):
                await reply(SeedAck(len(message.urls), 0, 0))

        return on_frame

    async with trio.open_nursery() as nursery:
        for i, name in enumerate(names):
            host = f"10.0.0.{i + 1}"
            peer = peers[name] = _Peer(Links(KEY, name, handler(name), net.node(host)))
            peer.address = await nursery.start(peer.links.run, f"{host}:0")
        by_address = {p.address: n for n, p in peers.items()}

        def address_of(name: str) -> str | None:
            return peers[name].address if name in peers else None

        for peer in peers.values():
            peer.links.recipient_of = lambda address: by_address.get(address, "")
            peer.links.relays.route(address_of, peers.keys)
            for other in peers.values():  # as each one's membership frames say
                peer.links.relays.heard(other.address, (int(FrameType.RELAY),))
        yield peers
        nursery.cancel_scope.cancel()


async def _wait(peer: _Peer, n: int) -> None:
    with trio.fail_after(30):
        while len(peer.got) < n:
            await peer.arrived.wait()


async def test_a_frame_across_a_cut_link_goes_by_a_third_until_the_link_is_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    net = MemoryNetwork()
    async with three(net) as peers:
        a, b, c = peers["a"], peers["b"], peers["c"]
        net.cut_link("10.0.0.1", "10.0.0.2")
        assert await a.links.send(b.address, Seed(("http://x.test/",)))
        await _wait(b, 1)
        await _wait(a, 1)
        assert b.got == [("a", Seed(("http://x.test/",)))]
        assert a.got == [("b", SeedAck(1, 0, 0))]  # the answer, the same way back
        assert c.got == []  # c carried them, and took neither
        assert c.links.relays.stats["forwarded"] == 2
        # The next frame goes by relay at once, not after a dial of its own.
        started = trio.current_time()
        assert await a.links.send(b.address, Seed(("http://y.test/", "http://z.test/")))
        await _wait(a, 2)
        assert trio.current_time() - started < 1
        assert a.links.relays.stats["sent"] == 2
        # The link back: a dials b again, in the background, past REDIAL; meanwhile by c.
        net.heal()
        await trio.sleep(11)
        assert await a.links.send(b.address, Seed(("http://v.test/",)))
        await _wait(a, 3)
        await trio.sleep(1)
        carried = c.links.relays.stats["forwarded"]
        assert await a.links.send(b.address, Seed(("http://w.test/",)))
        await _wait(a, 4)
        assert b.got[-1] == ("a", Seed(("http://w.test/",)))
        assert c.links.relays.stats["forwarded"] == carried == 6  # directly, at last


async def test_a_connection_that_loses_what_is_sent_is_closed_and_its_frames_relayed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A link cut silently keeps a's connection to b open, taking frames into the void
    until TCP gives up on it. Once membership finds b answering only through c
    (``unreached``), that connection is closed and the next frame goes by c at once,
    while b's address is dialled again; once a dial is answered, directly again."""
    net = MemoryNetwork()
    async with three(net) as peers:
        a, b, c = peers["a"], peers["b"], peers["c"]
        assert await a.links.send(b.address, Seed(("http://x.test/",)))
        await _wait(a, 1)
        net.cut_link("10.0.0.1", "10.0.0.2", silently=True)
        assert await a.links.send(b.address, Seed(("http://lost.test/",)))
        a.links.unreached([b.address, c.address])  # c: a member with no connection
        assert a.links.relays.stats["paths_lost"] == 1
        started = trio.current_time()
        assert await a.links.send(b.address, Seed(("http://y.test/",)))
        await _wait(a, 2)
        assert trio.current_time() - started < 1
        assert [m for _, m in b.got] == [Seed(("http://x.test/",)), Seed(("http://y.test/",))]
        assert c.links.relays.stats["forwarded"] == 2
        net.heal()
        await trio.sleep(16)  # the background dial's 5 s, then REDIAL: the next dials
        assert await a.links.send(b.address, Seed(("http://z.test/",)))
        await _wait(a, 3)
        await trio.sleep(1)
        assert await a.links.send(b.address, Seed(("http://w.test/",)))
        await _wait(a, 4)
        assert c.links.relays.stats["forwarded"] == 4  # the last one directly


async def test_a_relayed_frame_is_checked_as_its_senders_own(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """c cannot turn a relay into a way around the recipient's checks: a frame relayed
    twice is a replay, one for another peer is refused, one of another secret too, and
    a frame relayed a second time (hops 1) is not forwarded."""
    net = MemoryNetwork()
    async with three(net) as peers:
        a, b, c = peers["a"], peers["b"], peers["c"]
        inner = FrameWriter(KEY, "a").frame(Seed.KIND, Seed(("u",)).to_wire(), time.time(), to="b")
        stranger = FrameWriter(secret_from("another"), "a").frame(
            Seed.KIND, Seed(("v",)).to_wire(), time.time(), to="b"
        )
        to_c = FrameWriter(KEY, "a").frame(Seed.KIND, Seed(("w",)).to_wire(), time.time(), to="c")
        for frame in (inner, inner, stranger, to_c):
            assert await c.links.send(b.address, Relay("b", frame, 1))
        assert await c.links.send(a.address, Relay("b", inner, 1))  # not forwarded
        await _wait(b, 1)
        await trio.testing.wait_all_tasks_blocked()
        assert b.got == [("a", Seed(("u",)))]
        assert b.links.relays.stats["refused"] == 3
        assert a.links.relays.stats["not_forwarded"] == 1


async def test_a_member_of_an_earlier_version_is_neither_relay_nor_sent_relayed_frames(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A peer that does not say it takes RELAY frames would refuse them as of an unknown
    kind (and a run of those cut the connection that carried its other frames). The
    relay judges the target by what it hears from it: the sender may never have."""
    net = MemoryNetwork()
    async with three(net) as peers:
        a, b, c = peers["a"], peers["b"], peers["c"]
        net.cut_link("10.0.0.1", "10.0.0.2")
        a.links.relays.heard(c.address, ())  # c: an earlier version
        assert not await a.links.send(b.address, Seed(("http://x.test/",)))
        assert c.links.stats.frames_in["RELAY"] == 0
        a.links.relays.heard(c.address, (int(FrameType.RELAY),))
        c.links.relays.heard(b.address, ())  # b: an earlier version, as c hears it
        assert await a.links.send(b.address, Seed(("http://x.test/",)))  # c took it
        await trio.testing.wait_all_tasks_blocked()
        assert c.links.relays.stats["not_forwarded"] == 1
        assert b.links.stats.frames_in["RELAY"] == 0 and b.got == []
        a.links.relays.heard(b.address, ())  # a hears it too: it sends b none
        assert not await a.links.send(b.address, Seed(("http://y.test/",)))
        # A member the relay does not know is not forwarded to either.
        c.links.relays.heard(b.address, (int(FrameType.RELAY),))
        c.links.relays.route(lambda n: None if n == "b" else peers[n].address, lambda: "ab")
        a.links.relays.heard(b.address, (int(FrameType.RELAY),))
        assert await a.links.send(b.address, Seed(("http://z.test/",)))
        await trio.testing.wait_all_tasks_blocked()
        assert c.links.relays.stats["not_forwarded"] == 2 and b.got == []


async def test_a_member_whose_machine_refuses_the_dial_is_not_relayed_to(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A refused dial says nothing listens there: the peer is down, and a relayed frame
    would be lost at the relay with its sender told it went (a lease asked of a dead
    owner waited out its patience, where a refusal lets it go on at once)."""
    net = MemoryNetwork()
    async with three(net) as peers:
        a, b, c = peers["a"], peers["b"], peers["c"]
        net.kill("10.0.0.2")
        assert not await a.links.send(b.address, Seed(("http://x.test/",)))
        assert c.links.relays.stats["forwarded"] == 0 and a.links.relays.stats["sent"] == 0


async def test_a_connection_with_a_frame_being_written_is_not_closed_for_a_late_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A ping behind a large frame is late on a healthy link: b reads slowly here (it
    takes a first frame, then nothing), and a's large frame waits for room. The
    connection stays (a write has its own time-out)."""
    net = MemoryNetwork(buffer=4096)
    async with three(net, stalls="b") as peers:
        a, b = peers["a"], peers["b"]
        assert await a.links.send(b.address, Seed(("http://x.test/",)))
        await _wait(b, 1)
        large = Seed(tuple(f"http://x.test/{i}" for i in range(1000)))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(a.links.send, b.address, large)
            await trio.sleep(1)
            a.links.unreached([b.address])
            assert a.links.relays.stats["paths_lost"] == 0
            nursery.cancel_scope.cancel()


async def test_a_member_behind_a_firewall_that_refuses_dials_is_relayed_to_once_seen_alive(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A firewall's REJECT looks like a peer that is down: a's dials to b are refused.
    Once membership finds b answering a's probes through others (``unreached``), b is
    alive, its frames go by c, and go on doing so when a's dials there are refused
    again; once b is declared dead and forgotten, a refusal is a peer that is down."""
    net = MemoryNetwork()
    async with three(net) as peers:
        a, b, c = peers["a"], peers["b"], peers["c"]
        net.cut_link("10.0.0.1", "10.0.0.2", reject=True)
        assert not await a.links.send(b.address, Seed(("http://x.test/",)))
        assert c.links.relays.stats["forwarded"] == 0
        a.links.unreached([b.address])
        assert await a.links.send(b.address, Seed(("http://y.test/",)))
        await _wait(a, 1)
        assert b.got == [("a", Seed(("http://y.test/",)))]
        await trio.sleep(11)  # past REDIAL: dialled again, refused again
        assert await a.links.send(b.address, Seed(("http://z.test/",)))
        await _wait(a, 2)
        await trio.sleep(1)
        assert await a.links.send(b.address, Seed(("http://w.test/",)))
        await _wait(a, 3)
        assert net.stats.refused == 2 and c.links.relays.stats["forwarded"] == 6
        # Past INDIRECT_MEMORY with no probe of b answered through others since: its
        # answers by relay say it is alive, and its frames keep going that way.
        for n in range(8):
            await trio.sleep(11)
            assert await a.links.send(b.address, Seed(("http://z.test/",)))
            await _wait(a, 4 + n)
        assert net.stats.refused > 2 and c.links.relays.stats["forwarded"] == 6 + 2 * 8
        a.links.forget(b.address)
        assert not await a.links.send(b.address, Seed(("http://v.test/",)))
        assert c.links.relays.stats["forwarded"] == 6 + 2 * 8


async def test_a_refusal_over_tcp_is_told_from_a_dial_nobody_answers() -> None:
    with trio.socket.socket() as sock:  # bound, never listening: refuses on loopback
        await sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        try:
            await trio.open_tcp_stream("127.0.0.1", port)
        except OSError as exc:
            refused = exc
    assert refused_dial(refused)
    assert not refused_dial(OSError(errno.ETIMEDOUT, "no answer"))
    assert not refused_dial(trio.TooSlowError())


async def test_a_relay_that_cannot_reach_the_target_does_not_take_all_its_frames(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """a and b are cut, and so are b and one of the two peers a could relay through:
    frames go by one relay or the other, frame by frame, and those by the one that
    reaches b arrive (a relay chosen once per target lost every one: a review)."""
    net = MemoryNetwork()
    async with three(net, "abcd") as peers:
        a, b = peers["a"], peers["b"]
        net.cut_link("10.0.0.1", "10.0.0.2")
        net.cut_link("10.0.0.4", "10.0.0.2")  # d cannot reach b either
        for i in range(10):
            assert await a.links.send(b.address, Seed((f"http://x{i}.test/",)))
        await trio.sleep(10)  # past the dials from d to b, unanswered (5 s)
        assert 0 < len(b.got) < 10
        assert peers["d"].links.relays.stats["lost"] == 10 - len(b.got)


async def test_what_a_relay_holds_for_a_target_that_reads_nothing_is_bounded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """b takes one frame and reads nothing more: c forwards at most MAX_FORWARDS frames
    to it at once and drops the rest (the senders send again what must arrive), where
    each frame was a task of its own holding its bytes, for as long as b stalled."""
    net = MemoryNetwork()
    big = tuple(f"http://h.test/{'x' * 1000}{i}" for i in range(200))  # ~200 KB a frame
    async with three(net, stalls="b") as peers:
        a, b, c = peers["a"], peers["b"], peers["c"]
        net.cut_link("10.0.0.1", "10.0.0.2")
        for _ in range(100):
            with trio.move_on_after(30):
                await a.links.send(b.address, Seed(big))
        await trio.sleep(30)  # past any dial or write in progress
        assert c.links.relays.stats["dropped"] > 0
        forwarding = 100 - c.links.relays.stats["dropped"] - c.links.relays.stats["forwarded"]
        assert forwarding <= MAX_FORWARDS


async def test_a_member_forgotten_and_back_is_dialled_at_once_not_relayed_to(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """b left (or died) and is back at its address within REDIAL: its frames go to it
    directly from the first, not by relay until the next dial."""
    net = MemoryNetwork()
    async with three(net) as peers:
        a, b = peers["a"], peers["b"]
        net.cut_link("10.0.0.1", "10.0.0.2")
        assert await a.links.send(b.address, Seed(("http://x.test/",)))
        failures = a.links.stats.dial_failures
        a.links.forget(b.address)
        net.heal()
        assert await a.links.send(b.address, Seed(("http://y.test/",)))
        assert a.links.stats.dial_failures == failures and a.links.relays.stats["sent"] == 1
