"""A crawl in a test: one peer's crawler, its answers from a handler."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import trio

from tests.cluster.harness import wall_clock_on_trio_time
from ubipy.config import (
    BoundsConfig,
    CrawlConfig,
    PolitenessConfig,
    RecrawlConfig,
    RefreshPolicy,
)
from ubipy.fetch import Resolver
from ubipy.peer.crawler import Crawler
from ubipy.store import Shard


@asynccontextmanager
async def running_crawler(
    config: CrawlConfig,
    handler: Callable[[httpx2.Request], Any] | httpx2.AsyncBaseTransport,
    shard: Shard | None = None,
    resolver: Resolver | None = None,
) -> AsyncIterator[Crawler]:
    """A crawler whose client asks ``handler`` (through httpx2's MockTransport), or a
    transport, running for the block; stopped at its end, and its shard (``shard``, or
    one opened in the config's data directory) closed. ``resolver``: hosts are looked
    up in its stage (their addresses are only the per-IP rule's: nothing connects)."""
    shard = Shard.open(config.data_dir) if shard is None else shard
    if not isinstance(handler, httpx2.AsyncBaseTransport):
        handler = httpx2.MockTransport(handler)
    try:
        async with httpx2.AsyncClient(transport=handler) as client:
            crawler = Crawler(config, shard, client, resolver=resolver)
            async with trio.open_nursery() as nursery:
                await nursery.start(crawler.run)
                yield crawler
                crawler.stop()
    finally:
        shard.close()


async def crawl_until_idle(
    config: CrawlConfig,
    shard: Shard,
    handler: Callable[[httpx2.Request], Any],
    seeds: Sequence[str],
    *,
    within: float,
) -> None:
    """Seed a crawler whose client asks ``handler``, wait until it is idle (at most
    ``within`` seconds) and stop it; the shard is closed."""
    async with running_crawler(config, handler, shard) as crawler:
        crawler.seed(list(seeds))
        with trio.fail_after(within):
            await crawler.wait_idle()


async def recrawl_until(
    data: Path,
    handler: Callable[[httpx2.Request], Any],
    seed: str,
    change: Callable[[], None],
    seen: trio.Event,
    *,
    within: float,
) -> None:
    """A continuous crawl of ``seed`` into ``data`` whose pages come due again within
    minutes: ``change()`` (the site's) half a minute in, then on until ``seen`` is set
    (at most ``within`` seconds), the wall clock on trio's time; the shard is closed."""
    config = CrawlConfig(
        data_dir=data,
        politeness=PolitenessConfig(delay=1.0),
        bounds=BoundsConfig(sitemaps=False),
        recrawl=RecrawlConfig(
            recrawl=True, policy=RefreshPolicy.UNIFORM, rate=0.5, min_interval=60, replan=30
        ),
    )
    with wall_clock_on_trio_time():
        async with running_crawler(config, handler, Shard.open(data)) as crawler:
            crawler.seed([seed])
            await trio.sleep(30)
            change()
            with trio.fail_after(within):
                await seen.wait()
