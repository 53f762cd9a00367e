"""A page's links past MAX_LINKS are not followed: said once in the log, then at debug
level, and counted in the status (QA: a broad crawl's hub page of 10,010 links lost a
host linked only from its end, and nothing said so)."""

from __future__ import annotations

import logging
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig
from ubipy.fetch import MAX_LINKS
from ubipy.store import Shard

HTML = {"Content-Type": "text/html"}


async def test_links_past_a_page_s_cap_are_counted_and_said_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    asked: list[str] = []  # the pages' own links are cut and counted by the parse's tests

    async def serve(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path == "/robots.txt":
            return httpx2.Response(404)
        asked.append(path)
        if path in ("/", "/second"):
            many = "".join(f'<a href="{path.strip("/")}/p{i}">x</a>' for i in range(MAX_LINKS + 5))
            return httpx2.Response(200, headers=HTML, content=f"<title>hub</title>{many}".encode())
        return httpx2.Response(200, headers=HTML, content=b"<title>x</title>")

    # The seeds alone (--max-depth 0): what is cut is counted as the page is read.
    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.0),
        bounds=BoundsConfig(max_depth=0),
    )
    shard = Shard.open(tmp_path)
    caplog.set_level(logging.DEBUG, logger="ubipy.peer.crawler")
    seeds = ["http://hub.test/", "http://hub.test/second"]
    try:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(serve)) as client:
            crawler = await crawl_until_idle(config, shard, client, seeds, patience=3600)
    finally:
        shard.close()
    assert crawler.stats.links_cut == 10
    said = [r for r in caplog.records if "hrefs past its first" in r.getMessage()]
    assert [r.levelno for r in said] == [logging.WARNING, logging.DEBUG]
    assert sorted(asked) == ["/", "/second"]
