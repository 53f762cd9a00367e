"""One crawler, run on a shard and a client until it has nothing left to do: what the
tests of one mechanism (TLS, filters, pacing) share when they crawl a small web."""

from __future__ import annotations

from collections.abc import Sequence

import httpx2
import trio

from tests.cluster.harness import wall_clock_on_trio_time
from ubipy.config import CrawlConfig
from ubipy.peer.crawler import Crawler
from ubipy.store import Shard
from ubipy.synthweb import SynthTransport
from ubipy.synthweb.server import SynthServer


async def crawl_until_idle(
    config: CrawlConfig,
    shard: Shard,
    client: httpx2.AsyncClient,
    seeds: Sequence[str],
    *,
    patience: float = 20.0,
) -> Crawler:
    """Seed a crawler, wait (at most ``patience`` seconds) until it is idle, stop it;
    the stopped crawler is returned for its figures."""
    crawler = Crawler(config, shard, client)
    async with trio.open_nursery() as nursery:
        await nursery.start(crawler.run)
        crawler.seed(seeds)
        with trio.fail_after(patience):
            await crawler.wait_idle()
        crawler.stop()
    return crawler


async def recrawl_for(
    config: CrawlConfig,
    shard: Shard,
    server: SynthServer | httpx2.AsyncBaseTransport,
    seeds: Sequence[str],
    seconds: float,
) -> Crawler:
    """A crawl of the in-process web (or through a transport) for ``seconds`` (run it
    on the autojump clock), continuous under ``--recrawl``, then stopped; the stopped
    crawler is returned. Visits and due times are stamped with the wall clock, kept in
    step with trio's here."""
    if isinstance(server, SynthServer):
        server = SynthTransport(server)
    with wall_clock_on_trio_time():
        async with httpx2.AsyncClient(transport=server) as client:
            crawler = Crawler(config, shard, client)
            async with trio.open_nursery() as nursery:
                await nursery.start(crawler.run)
                crawler.seed(seeds)
                await trio.sleep(seconds)
                crawler.stop()
    return crawler
