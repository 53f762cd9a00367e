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


def _config(tmp_path: Path) -> CrawlConfig:
    return CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.1),
        bounds=BoundsConfig(scope=Scope.HOST, sitemaps=False),
    )


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

    async with running_crawler(_config(tmp_path), site) as crawler:
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


async def test_an_http_site_whose_https_cannot_be_reached_is_crawled_over_http(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A site met first by an https link whose port 443 is shut: the host was given up
    after https's robots.txt attempts, and none of its http pages was asked (a
    stranger's link upgraded to https lost an http-only site for a day). Only its https
    URLs are closed, saying why; its http pages are crawled, and a later https link is
    closed without a request."""
    asked: list[str] = []

    async def site(request: httpx2.Request) -> httpx2.Response:
        asked.append(str(request.url))
        if request.url.scheme == "https":
            raise httpx2.ConnectError("connection refused", request=request)
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        body = b'<a href="/next">n</a> <a href="https://a.test/login">l</a>'
        if request.url.path != "/":
            body = b"leaf"
        return httpx2.Response(200, content=body, headers={"Content-Type": "text/html"})

    async with running_crawler(_config(tmp_path), site) as crawler:
        crawler.seed(["https://a.test/secure", "http://a.test/"])
        with trio.fail_after(3600):
            await crawler.wait_idle()
        skipped = dict(crawler.stats.skipped)
        closed = crawler._shard._conn.execute(
            "SELECT url, reason FROM frontier WHERE reason IS NOT NULL ORDER BY url"
        ).fetchall()
    fetched = [url for url in asked if url.startswith("http:")]
    assert sorted(fetched) == ["http://a.test/", "http://a.test/next", "http://a.test/robots.txt"]
    # https's robots.txt, its attempts with the fetcher's retries; no https page.
    assert {url for url in asked if url.startswith("https:")} == {"https://a.test/robots.txt"}
    assert closed == [
        ("https://a.test/login", "robots.txt unreachable"),
        ("https://a.test/secure", "robots.txt unreachable"),
    ]
    assert skipped == {"robots.txt unreachable": 2}
