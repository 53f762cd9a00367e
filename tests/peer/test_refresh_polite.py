"""A continuous crawl (--recrawl) of a site whose pages never change, with the budget
a share of what its host could take (the default): every page was asked each
--min-interval for ever, a request every two seconds to a site of 30 pages, day and
night (QA). A page is asked at most ten times as often as it is seen to change, so
the requests fall as the pages stay the same; one that changes is asked more often."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.cluster.harness import wall_clock_on_trio_time
from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig, RecrawlConfig

HOUR = 3600.0
PAGES = 30


class _Site:
    """A home page linking to /p0../p29; /p0 changes every hour, the rest never."""

    def __init__(self) -> None:
        self.asked: list[tuple[float, str]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        now, path = trio.current_time(), request.url.path
        self.asked.append((now, path))
        links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(PAGES))
        news = int(now // HOUR) if path == "/p0" else 0
        return httpx2.Response(200, html=f"<html><body>{links}<p>{news}</body></html>")


async def test_pages_that_never_change_are_asked_less_and_less(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=1.0),
        bounds=BoundsConfig(sitemaps=False),
        recrawl=RecrawlConfig(recrawl=True, min_interval=60, replan=60),
    )
    site = _Site()
    with wall_clock_on_trio_time():
        async with running_crawler(config, site) as crawler:
            crawler.seed(["http://a.test/"])
            await trio.sleep(24 * HOUR)
    first_hour = Counter(p for t, p in site.asked if t < HOUR)
    last_hours = Counter(p for t, p in site.asked if t >= 18 * HOUR)
    static = [f"/p{i}" for i in range(1, PAGES)]
    # Each --min-interval, the last six hours would be 360 asks a page.
    assert max(last_hours[p] for p in static) <= 10, last_hours
    assert max(last_hours[p] for p in static) < min(first_hour[p] for p in static)
    assert last_hours["/p0"] >= 3 * max(last_hours[p] for p in static)
