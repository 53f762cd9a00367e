"""A batch of URLs too large for one frame (long URLs under a large --batch-size): the
links refuse to write it (FrameError, nothing sent, the connection unharmed), and the
forwarder sends it in parts, counting it off once its owner has acknowledged each, and
sends again only the parts not acknowledged."""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import trio
import trio.testing

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
        assert sorted(url for batch in (first, second) for url, _, _ in batch.urls) == sorted(
            u.url for u in urls
        )
        assert sorted(crawled.forwarded_fps) == list(range(len(urls)))
        assert router.backlog() == 0 and not b.stats.rejected
        nursery.cancel_scope.cancel()
