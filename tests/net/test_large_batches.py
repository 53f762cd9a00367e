"""A batch of URLs too large for one frame (long URLs under a large --batch-size): the
links refuse to write it (FrameError, nothing sent, the connection unharmed), and the
forwarder sends it in parts, counting it off once its owner has acknowledged each, and
sends again only the parts not acknowledged."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import trio
import trio.testing

from ubipy.errors import FrameError
from ubipy.net import Links, MemoryNetwork, Reply
from ubipy.peer.crawler import Crawler
from ubipy.peer.forwarding import Forwarder
from ubipy.peer.router import Router
from ubipy.ring import Ring
from ubipy.store import NewURL
from ubipy.wire import Frame, Message, UrlAck, UrlBatch, secret_from

KEY = secret_from("large batches test")


class Crawled:
    def __init__(self) -> None:
        self.forwarded_fps: list[int] = []

    def forwarded(self, fps: Iterable[int]) -> None:
        self.forwarded_fps.extend(fps)


async def test_a_batch_over_the_frame_cap_goes_in_parts(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ring = Ring(["a", "b"])
    host = next(h for h in (f"h{i}.test" for i in range(100)) if ring.owner(h) == "b")
    long = "x" * 1_900  # a URL is at most 2,048 characters
    urls = [NewURL(fp=i, url=f"http://{host}/{long}{i}", host=host, depth=1) for i in range(3000)]
    router = Router("a", ring, batch_size=len(urls))  # some 5.8 MB: over the 4 MiB cap
    crawled = Crawled()
    got: list[UrlBatch] = []
    forwarder: Forwarder

    async def on_a(frame: Frame, message: Message, reply: Reply) -> None:
        assert isinstance(message, UrlAck)
        await forwarder.on_url_ack(frame.sender, message, reply)

    async def on_b(frame: Frame, message: Message, reply: Reply) -> None:
        assert isinstance(message, UrlBatch)
        got.append(message)
        if len(got) > 1:  # the first is lost, say: only that part goes again
            await reply(UrlAck((message.id,)))

    net = MemoryNetwork()
    a = Links(KEY, "a", on_a, net.node("10.0.0.1"))
    b = Links(KEY, "b", on_b, net.node("10.0.0.2"))
    async with trio.open_nursery() as nursery:
        await nursery.start(a.run, "10.0.0.1:0")
        there = await nursery.start(b.run, "10.0.0.2:0")
        forwarder = Forwarder(
            router, cast(Crawler, crawled), a.send, lambda peer: there, trio.lowlevel.checkpoint
        )
        drained = forwarder.drained
        nursery.start_soon(forwarder.run)
        router.enqueue(urls, 0.0)
        forwarder.kick()
        with trio.fail_after(10):
            await drained.wait()
        first, second, again = got
        assert again == first and second.id != first.id
        assert sorted(url for batch in (first, second) for url, _, _, _ in batch.urls) == sorted(
            u.url for u in urls
        )
        assert sorted(crawled.forwarded_fps) == list(range(len(urls)))
        assert router.backlog() == 0 and not b.stats.rejected
        nursery.cancel_scope.cancel()


async def test_a_part_acknowledged_while_the_next_is_written_is_not_the_whole_batch(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The first part's acknowledgement came while the second part was being written,
    and was taken for the whole batch's: the second part's send then failed, and its
    URLs were never sent again (found by a review)."""
    ring = Ring(["a", "b"])
    host = next(h for h in (f"h{i}.test" for i in range(100)) if ring.owner(h) == "b")
    urls = [NewURL(fp=i, url=f"http://{host}/{i}", host=host, depth=1) for i in range(10)]
    router = Router("a", ring, batch_size=len(urls))
    crawled = Crawled()
    sent: list[UrlBatch] = []
    forwarder: Forwarder

    async def send(address: str, message: Message) -> bool:
        assert isinstance(message, UrlBatch)
        if len(message.urls) > 5:
            raise FrameError("over the cap")  # as the links refuse a frame too large
        sent.append(message)
        if len(sent) == 2:
            # The second part takes a while to write, and the first is acknowledged.
            await forwarder.on_url_ack("b", UrlAck((sent[0].id,)), None)  # type: ignore[arg-type]
            await trio.sleep(1)
            return False  # and the second part's connection breaks
        return True

    async with trio.open_nursery() as nursery:
        forwarder = Forwarder(
            router, cast(Crawler, crawled), send, lambda peer: "b:1", trio.lowlevel.checkpoint
        )
        nursery.start_soon(forwarder.run)
        router.enqueue(urls, 0.0)
        forwarder.kick()
        await trio.sleep(10)
        assert router.backlog() == len(urls) and crawled.forwarded_fps == []
        again = [b for b in sent[2:] if b.id == sent[1].id]
        assert again and again[0].urls == sent[1].urls  # the second part, sent again
        await forwarder.on_url_ack("b", UrlAck((sent[1].id,)), None)  # type: ignore[arg-type]
        assert router.backlog() == 0 and sorted(crawled.forwarded_fps) == list(range(10))
        nursery.cancel_scope.cancel()


async def test_parts_of_a_batch_re_routed_are_let_go_at_the_next_acknowledgement(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """b's batch went in parts and b then left the ring: its URLs went to c in a batch
    of their own. The old parts were let go only once nothing at all was waiting, which
    URLs kept on disk for a silent owner can put off for hours."""
    ring = Ring(["a", "b", "c"])
    host = next(h for h in (f"h{i}.test" for i in range(100)) if ring.owner(h) == "b")
    urls = [NewURL(fp=i, url=f"http://{host}/{i}", host=host, depth=1) for i in range(10)]
    router = Router("a", ring, batch_size=len(urls))
    sent: list[tuple[str, UrlBatch]] = []
    forwarder: Forwarder

    async def send(address: str, message: Message) -> bool:
        assert isinstance(message, UrlBatch)
        if len(message.urls) > 5:
            raise FrameError("over the cap")
        sent.append((address, message))
        return True

    async with trio.open_nursery() as nursery:
        forwarder = Forwarder(
            router, cast(Crawler, Crawled()), send, lambda peer: peer, trio.lowlevel.checkpoint
        )
        nursery.start_soon(forwarder.run)
        router.enqueue(urls, 0.0)
        forwarder.kick()
        await trio.sleep(0.1)
        assert [to for to, _ in sent] == ["b", "b"]  # two parts, never answered
        router.ring_changed(Ring(["a", "c"]), trio.current_time())
        forwarder.kick()
        await trio.sleep(1.0)
        to_c = [m for to, m in sent if to == "c"]
        assert len(to_c) == 2 and len(forwarder._parts) == 2
        await forwarder.on_url_ack("c", UrlAck((to_c[0].id,)), None)  # type: ignore[arg-type]
        assert router.backlog() == 10  # c has not all of its batch yet
        assert len(forwarder._parts) == 1  # b's are let go, c's stays
        nursery.cancel_scope.cancel()
