"""A name whose first address is dead, in a running crawler over real sockets on
loopback: its host is filed under its next address at once, not after its answer
expired (an hour), and the per-IP rule holds it there with the others."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
import trio

from tests.fetch.test_dns_addresses import Site, Table, _recording
from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig
from ubipy.fetch import Resolver
from ubipy.fetch.transport import PooledTransport


async def test_hosts_whose_first_address_is_dead_are_crawled_at_the_next_one_in_turn(
    tmp_path: Path, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Three names, each answering [a dead address of its own, one live server's].
    site = Site(latency=0.05)
    await site.serve(["127.0.0.1"], nursery)
    dead = {f"127.0.0.{i + 2}" for i in range(3)}
    tried = _recording(monkeypatch, refuse=dead)
    names = Table({f"n{i}.test": [f"127.0.0.{i + 2}", "127.0.0.1"] for i in range(3)})
    resolver = Resolver(ttl=3600.0, lookup=names, allow_private=True)
    politeness = PolitenessConfig(delay=0.1, concurrency=4, robots_retry_base=0.2)
    config = CrawlConfig(
        data_dir=tmp_path, politeness=politeness, bounds=BoundsConfig(sitemaps=False)
    )
    async with running_crawler(config, PooledTransport(resolver=resolver), resolver=resolver) as c:
        c.seed([f"http://n{i}.test:{site.port}/" for i in range(3)])
        with trio.fail_after(30):  # an hour before: the answers' time to live
            await c.wait_idle()
        assert c.stats.robots_given_up == 0 and c.stats.pages == 3
    # Each name's robots.txt and page, from the live server; each dead address tried
    # once, each name looked up once (filed again from the cache).
    assert site.served == ["127.0.0.1"] * 6
    assert sorted(a for a in tried if a in dead) == sorted(dead)
    assert resolver.total_lookups == 3
    # Filed under the live address, the three hosts took turns there.
    spans = sorted(site.spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
