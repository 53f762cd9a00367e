"""A continuous crawl (--recrawl) over weeks: pages that are removed or moved give their
share of the refresh budget back to the pages that live.

Found by a review: a 404, 410 or 301 was no visit of the page's history, so the page
was asked at its planned interval for ever, and under the history policy a live page's
estimated change rate fell with every unchanged visit while a dead page's stood still:
94% of a later week's refreshes went to dead URLs."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.cluster.harness import wall_clock_on_trio_time
from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig, RecrawlConfig, RefreshPolicy
from ubipy.store import Shard

DAY = 86400.0
WEEK = 7 * DAY
# When the pages below stop answering 200.
DIES_AT = 3600.0
MISSING = ("/p0", "/p1", "/p2")  # 404
GONE = ("/p3", "/p4")  # 410
MOVED = "/p5"  # 301 to /moved5
FAILING = ("/p6", "/p7")  # 503, for good
DEAD = (*MISSING, *GONE, MOVED, *FAILING)
RATE = 0.01  # refreshes a second


class _Site:
    """A home page linking to /p0../p9, each linking to them all; from DIES_AT on the
    pages above answer as said. Every request is logged: (time, path, status)."""

    def __init__(self) -> None:
        self.log: list[tuple[float, str, int]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        now, path = trio.current_time(), request.url.path
        if path == "/robots.txt":
            return httpx2.Response(404)
        status = 200
        if now >= DIES_AT and path in DEAD:
            status = (
                404 if path in MISSING else 410 if path in GONE else 301 if path == MOVED else 503
            )
        self.log.append((now, path, status))
        if status == 301:
            return httpx2.Response(301, headers={"location": "/moved5"})
        if status != 200:
            return httpx2.Response(status)
        links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(10))
        return httpx2.Response(200, html=f"<html><body>{links}</body></html>")


def _config(data: Path, policy: RefreshPolicy, rate: float = RATE) -> CrawlConfig:
    return CrawlConfig(
        data_dir=data,
        politeness=PolitenessConfig(delay=1.0),
        bounds=BoundsConfig(sitemaps=False),
        recrawl=RecrawlConfig(recrawl=True, policy=policy, rate=rate, min_interval=60, replan=60),
    )


@pytest.mark.parametrize(
    "policy", [RefreshPolicy.UNIFORM, RefreshPolicy.HISTORY, RefreshPolicy.CLUSTER]
)
async def test_pages_removed_or_moved_give_the_budget_back_to_the_live_ones(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, policy: RefreshPolicy
) -> None:
    # Before: in the second week 94% of the refreshes went to the dead pages (history,
    # cluster), half of them under uniform: each asked at its interval for ever.
    site = _Site()
    config = _config(tmp_path, policy)
    with wall_clock_on_trio_time():
        async with running_crawler(config, site) as crawler:
            crawler.seed(["http://a.test/"])
            await trio.sleep(DAY + WEEK)
            assert crawler.refresher is not None
            stats = crawler.refresher.stats
    after = Counter(path for t, path, _ in site.log if t >= DIES_AT)
    # Gone or moved for good: asked once, and not again; missing: three times.
    assert {after[p] for p in (*GONE, MOVED)} == {1}
    assert {after[p] for p in MISSING} == {3}
    assert stats.retired == len(MISSING) + len(GONE) + 1
    # Over a later week the live pages (the home page, /p8, /p9, /moved5) have the
    # budget; a page that fails for good is backed off to a few requests a week.
    week = [path for t, path, _ in site.log if t >= DAY]
    live = [p for p in week if p not in DEAD]
    assert len(live) >= 0.9 * RATE * WEEK
    # (A 503 is tried three times a request, a minute at most: one ask.)
    asks = Counter(p for p, t in _asks(site, since=DAY) if p in FAILING)
    assert max(asks.values()) <= 4, asks
    assert len(week) - len(live) <= 0.01 * len(week)
    # The rows of the pages retired are gone from the shard (a restart would ask them).
    shard = Shard.open(tmp_path)
    try:
        kept = sorted(r.url.removeprefix("http://a.test") for r in shard.refresh_rows())
    finally:
        shard.close()
    assert kept == sorted(["/", "/p8", "/p9", "/moved5", *FAILING])


def _asks(site: _Site, *, since: float) -> list[tuple[str, float]]:
    """Each page's requests from ``since`` on, those a minute or less after the one
    before counted as one (the fetcher's tries of one request)."""
    last: dict[str, float] = {}
    asks = []
    for t, path, _ in site.log:
        if t >= since and t - last.get(path, -math.inf) > 60:
            asks.append((path, t))
        last[path] = t
    return asks
