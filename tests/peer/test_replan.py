"""A continuous crawl keeps to the times it plans: a page's links are asked at their
host's delay though the host waits for that page to be due again, and a new plan that
brings the page's due time forward is kept to while the crawler sleeps."""

from __future__ import annotations

from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.cluster.harness import wall_clock_on_trio_time
from tests.peer.crawling import running_crawler
from ubipy.config import (
    BoundsConfig,
    CrawlConfig,
    PolitenessConfig,
    RecrawlConfig,
    RefreshPolicy,
)

GONE = 40


class Site:
    """A home page linking to pages that are gone (404), with when each path is asked."""

    def __init__(self) -> None:
        self.asked: dict[str, list[float]] = {}

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        self.asked.setdefault(path, []).append(trio.current_time())
        if path != "/":
            return httpx2.Response(404)
        links = "".join(f'<a href="/gone/{i}">{i}</a>' for i in range(GONE))
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=links.encode())


async def test_a_page_the_plan_makes_due_sooner_is_asked_then(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The home page comes first, when the refresh budget (half the answers of the last
    # 300 s: one) gives it 600 s. The gone pages answered after it raise the budget
    # (every answer counts; only the home page is kept), so the plan at 30 s gives it
    # the floor, 60 s: due at about 60, while the crawler sleeps.
    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.25, concurrency=2),
        bounds=BoundsConfig(sitemaps=False),
        recrawl=RecrawlConfig(
            recrawl=True, policy=RefreshPolicy.UNIFORM, share=0.5, min_interval=60, replan=30
        ),
    )
    site = Site()
    with wall_clock_on_trio_time():
        async with running_crawler(config, site) as crawler:
            crawler.seed(["http://site.test/"])
            await trio.sleep(120)
    assert len(site.asked) == GONE + 2  # robots.txt, the home page, the gone pages
    assert max(max(times) for path, times in site.asked.items() if path != "/") < 30
    first, *again = site.asked["/"]
    assert first < 1
    assert len(again) == 1 and 60 <= again[0] - first < 61
