"""One peer against the hostile synthetic web: traps, monsters, stalls and liars.

The peer must finish, fetch everything a correct crawler fetches, stay polite
(Retry-After included), bound its retries and its traps, and record what it cut.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio

from tests.e2e.test_single_peer import World
from ubipy.config import BoundsConfig, CrawlConfig
from ubipy.peer.peer import Peer
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.synthweb.referee import Referee
from ubipy.synthweb.server import serve
from ubipy.synthweb.truth import ground_truth

DELAY = 0.02
BUDGET = 60
RETRIES = 2
SPEC = WebSpec(
    seed=3,
    hostile=True,
    crawl_delay=0.05,
    huge_bytes=3_000_000,
    bomb_bytes=30_000_000,
    slow_interval=0.05,
    slow_bytes=20,
    retry_after=1,
    bigrobots_bytes=700 * 1024,
    many_links=100_000,
)


async def test_the_hostile_web_is_crawled_fully_politely_and_boundedly(tmp_path: Path) -> None:
    web = SyntheticWeb(SPEC)
    seed = web.seed_url()
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        w = World(web, server, nursery)
        config = w.config(
            tmp_path,
            fetch=w.fetch(
                max_body_bytes=1_000_000,
                read_timeout=0.5,
                fetch_deadline=3.0,
                max_retries=RETRIES,
                retry_base=0.1,
            ),
            bounds=BoundsConfig(max_pages_per_host=BUDGET),
        )
        assert isinstance(config, CrawlConfig)
        peer: Peer = await nursery.start(Peer(config).run)
        peer.crawler.seed([seed])
        with trio.fail_after(120):
            await peer.crawler.wait_idle()
        peer.stop()
        with trio.fail_after(30):
            await peer.crawler.stopped.wait()
        with trio.fail_after(10):
            await server.wait_idle()
        nursery.cancel_scope.cancel()

    truth = ground_truth(web, [seed], max_pages_per_host=BUDGET)
    referee = Referee(server.log, web)
    assert referee.missing(truth) == set()
    assert referee.unexpected(truth, ignore_hosts=web.trap_hosts()) == set()
    assert referee.duplicates() == []
    assert referee.robots_violations() == []
    assert referee.overlaps() == []
    assert referee.short_gaps(DELAY) == [], [
        (g.previous.url, g.previous.outcome, g.previous.status, g.next.url, g.gap)
        for g in referee.short_gaps(DELAY)
    ]
    assert referee.retry_after_violations() == []
    assert referee.hammering(RETRIES) == [], [
        (h.url, h.requests) for h in referee.hammering(RETRIES)
    ]
    assert referee.over_budget(BUDGET) == {}
    assert referee.repeated_segments(3) == []
    # Servers that fail a few times and then answer were retried until they did.
    assert web.hostile is not None
    assert referee.unfinished(web.hostile.recovering_urls()) == set()

    conn = sqlite3.connect(tmp_path / "shard.sqlite3")
    truncated = {url for (url,) in conn.execute("SELECT url FROM pages WHERE truncated = 1")}
    errors = dict(conn.execute("SELECT url, error FROM pages WHERE error IS NOT NULL"))
    conn.close()
    for name in ("x-huge", "x-gzip-bomb", "x-deflate-bomb", "x-endless"):
        assert any(name in url for url in truncated), name
    for name in ("x-hang-always", "x-reset-always", "x-slow-always"):
        assert any(name in url for url in errors), name
    stats = peer.crawler.stats
    assert stats.retries > 0 and stats.truncated >= 4
