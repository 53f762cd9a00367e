"""A crawl in a test: one peer's crawler, its answers from a handler, run until idle."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import httpx2
import trio

from ubipy.config import CrawlConfig
from ubipy.peer.crawler import Crawler
from ubipy.store import Shard


async def crawl_until_idle(
    config: CrawlConfig,
    shard: Shard,
    handler: Callable[[httpx2.Request], Any],
    seeds: Sequence[str],
    *,
    within: float,
) -> None:
    """Seed a crawler whose client asks ``handler`` (httpx2's MockTransport), wait
    until it is idle (at most ``within`` seconds) and stop it; the shard is closed."""
    try:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
            crawler = Crawler(config, shard, client)
            async with trio.open_nursery() as nursery:
                await nursery.start(crawler.run)
                crawler.seed(list(seeds))
                with trio.fail_after(within):
                    await crawler.wait_idle()
                crawler.stop()
    finally:
        shard.close()
