"""A failing URL's tries are counted across a restart: kept in memory only, each
restart gave it its retries afresh (QA: a page that always answered 500 was asked 14
times across 8 restarts, where --retries 2 allows 3)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, FetchConfig, PolitenessConfig
from ubipy.store import Shard


async def test_a_failing_pages_tries_go_on_counting_after_a_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    asked: Counter[str] = Counter()
    failed_once = trio.Event()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path == "/robots.txt":
            return httpx2.Response(404)
        asked[path] += 1
        if path == "/bad":
            failed_once.set()
            return httpx2.Response(500)
        links = '<a href="/bad">bad</a><a href="/ok">ok</a>'
        return httpx2.Response(200, headers={"Content-Type": "text/html"}, text=links)

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.0),
        bounds=BoundsConfig(sitemaps=False),
        fetch=FetchConfig(max_retries=2),
    )
    async with running_crawler(config, handler, Shard.open(tmp_path)) as crawler:
        crawler.seed(["http://a.test/"])
        with trio.fail_after(600):
            await failed_once.wait()
            # Its answer read and its retry put off: the crawler waits on the back-off.
            await trio.testing.wait_all_tasks_blocked()
    assert asked["/bad"] == 1
    async with running_crawler(config, handler, Shard.open(tmp_path)) as crawler:
        with trio.fail_after(600):
            await crawler.wait_idle()
    # One try before the stop, its two retries after: not three more.
    assert asked["/bad"] == 3
    assert asked["/ok"] == 1 and asked["/"] == 1


async def test_a_failing_robots_txts_tries_go_on_counting_after_a_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """(QA: a robots.txt that always answered 500 was asked 6 times across restarts,
    where 3 attempts are made before its URLs are closed.)"""
    asked: Counter[str] = Counter()
    failed_once = trio.Event()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        asked[request.url.path] += 1
        if request.url.path == "/robots.txt":
            failed_once.set()
            return httpx2.Response(500)
        return httpx2.Response(200, headers={"Content-Type": "text/html"}, text="<p>x</p>")

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.0, robots_max_attempts=3, robots_retry_base=5.0),
        bounds=BoundsConfig(sitemaps=False),
    )
    async with running_crawler(config, handler, Shard.open(tmp_path)) as crawler:
        crawler.seed(["http://a.test/p"])
        with trio.fail_after(600):
            await failed_once.wait()
            await trio.testing.wait_all_tasks_blocked()  # its answer read, its retry put off
    assert asked["/robots.txt"] == 1
    async with running_crawler(config, handler, Shard.open(tmp_path)) as crawler:
        with trio.fail_after(600):
            await crawler.wait_idle()
    assert asked["/robots.txt"] == 3  # one before the stop, two after: not three more
    assert asked["/p"] == 0  # closed, robots.txt unreachable
