"""A seeded host handed to its new owner takes its first lookup with it: looked up
afresh there, a seeded name of public address rebound to 127.0.0.1 meanwhile was taken
for the seed's own address, and allowed (a review)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import cbor2
import httpx2
import trio
import trio.testing

from tests.fetch.test_dns import FakeDns
from tests.peer.test_handoff_revisits import HOST, TWO, _nothing, _refuse, _sweeping
from ubipy.config import CrawlConfig, PolitenessConfig
from ubipy.fetch import DnsFailure, Resolver
from ubipy.peer.crawler import Crawler
from ubipy.peer.handoff import Handoff
from ubipy.store import Shard
from ubipy.wire import FrameType, HandoffDone, Message, decode
from ubipy.wire import Handoff as HandoffFrame


@asynccontextmanager
async def crawler_on(tmp: Path, dns: FakeDns) -> AsyncIterator[Crawler]:
    """A crawler that is never run, looking names up in ``dns``."""
    shard = Shard.open(tmp)
    config = CrawlConfig(data_dir=tmp, politeness=PolitenessConfig(delay=0.0))
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(_refuse)) as client:
        try:
            yield Crawler(config, shard, client, resolver=Resolver(lookup=dns))
        finally:
            shard.close()


async def test_a_seeded_hosts_first_lookup_goes_with_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    name = HOST.partition(":")[0]
    async with (
        crawler_on(tmp_path / "a", FakeDns({name: ["93.184.216.34"]})) as a,
        crawler_on(tmp_path / "b", FakeDns({name: ["127.0.0.1"]})) as b,  # rebound since
    ):
        assert a.dns is not None and b.dns is not None
        first = await a.dns.resolver.resolve(HOST)  # a seed's host, public: nothing allowed
        assert not a.dns.resolver.exempt(HOST, first) and a.seed_lookup_of(HOST) == frozenset()
        a._shard.take_done(HOST, [1, 2])
        receiver = Handoff("b", b, _nothing, lambda peer: f"{peer}:1")
        receiver.ring_changed(TWO, frozenset(TWO.members), frozenset())
        frames: list[HandoffFrame] = []
        swept = trio.Event()

        async def send(address: str, message: Message) -> bool:
            if isinstance(message, HandoffFrame):
                again = decode(FrameType.HANDOFF, cbor2.loads(cbor2.dumps(message.to_wire())))
                assert isinstance(again, HandoffFrame)
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
        assert frames and all(f.seed_lookup == () for f in frames)
        # b's first lookup of it is not the first: 127.0.0.1 stays refused.
        answer = await b.dns.resolver.resolve(HOST)
        assert answer.error is DnsFailure.REFUSED and not b.dns.resolver.exempt(HOST, answer)
        assert b._shard.seed_lookups() == {HOST: frozenset()}  # across a restart too
