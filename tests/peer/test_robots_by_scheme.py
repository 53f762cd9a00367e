"""A crawl obeys each scheme's robots.txt of a host (RFC 9309 §2.3), judged by what the
site was asked: a crawl that met the host over http used to fetch what its https
robots.txt disallows."""

from __future__ import annotations

from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig, Scope

ROBOTS = {"http": b"User-agent: *\nDisallow:\n", "https": b"User-agent: *\nDisallow: /private/\n"}
HOME = b"""<html><body>
<a href="https://a.test/private/secret">s</a> <a href="https://a.test/open">o</a>
<a href="http://a.test/private/plain">p</a>
</body></html>"""


async def test_https_urls_of_a_host_met_over_http_obey_the_https_robots_txt(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    asked: list[str] = []

    async def site(request: httpx2.Request) -> httpx2.Response:
        asked.append(str(request.url))
        if request.url.path == "/robots.txt":
            return httpx2.Response(200, content=ROBOTS[request.url.scheme])
        body = HOME if request.url.path == "/" else b"<html><body>leaf</body></html>"
        return httpx2.Response(200, content=body, headers={"Content-Type": "text/html"})

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.1),
        bounds=BoundsConfig(scope=Scope.HOST, sitemaps=False),
    )
    async with running_crawler(config, site) as crawler:
        crawler.seed(["http://a.test/"])
        with trio.fail_after(300):
            await crawler.wait_idle()
        disallowed = crawler.stats.robots_disallowed
    assert sorted(asked) == [
        "http://a.test/",
        "http://a.test/private/plain",  # http's robots.txt allows it
        "http://a.test/robots.txt",
        "https://a.test/open",
        "https://a.test/robots.txt",
    ]
    assert disallowed == 1  # https://a.test/private/secret
