"""Sites on one address (shared hosting) and one site's failing robots.txt: the other
sites wait for what the server said, not for that site's retries.

A vhost's robots.txt answering 500 is that site's fault: its retries (10 s, then 20 s)
held the address, and the other sites' pages waited with it. A 503 is the server's
(it is overloaded): heard as a page's 503 is, it holds the address for the back-off
of the server's pace, whichever site it came through."""

from __future__ import annotations

from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, DnsConfig, PolitenessConfig, Scope
from ubipy.fetch import Resolver


async def _after_the_broken_robots_txt(tmp: Path, robots_status: int) -> float:
    """Seconds from broken.test's first robots.txt answer, ``robots_status``, to the
    next request to its address, for ok.test beside it (--delay 0, --ip-delay 1 s)."""
    asked: list[tuple[float, str]] = []

    def serve(request: httpx2.Request) -> httpx2.Response:
        asked.append((trio.current_time(), request.url.host))
        if request.url.host == "broken.test":
            return httpx2.Response(robots_status)
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        links = "".join(f'<a href="/p{i}">p</a>' for i in range(20))
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=links.encode())

    config = CrawlConfig(
        data_dir=tmp,
        politeness=PolitenessConfig(delay=0.0, ip_delay=1.0, robots_retry_base=10.0),
        bounds=BoundsConfig(scope=Scope.ANY, sitemaps=False),
        dns=DnsConfig(
            resolve=("broken.test:203.0.113.9", "ok.test:203.0.113.9"), allow_private=True
        ),
    )
    resolver = Resolver.of(config.dns, system=False)
    async with running_crawler(config, serve, resolver=resolver) as crawler:
        crawler.seed(["http://broken.test/", "http://ok.test/"])
        with trio.fail_after(300):
            while not any(host == "broken.test" for _, host in asked[:-1]):
                await crawler.request_ended.wait()
    broken = next(i for i, (_, host) in enumerate(asked) if host == "broken.test")
    return asked[broken + 1][0] - asked[broken][0]


async def test_one_site_s_robots_txt_500_does_not_hold_the_others_on_its_address(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The address's 1 s; before, broken.test's retry back-off, 10 s.
    assert await _after_the_broken_robots_txt(tmp_path, 500) == 1.0


async def test_a_robots_txt_503_holds_the_address_as_the_server_s_back_off(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The server's first back-off: a strike on the address's pace.
    assert await _after_the_broken_robots_txt(tmp_path, 503) == PolitenessConfig().backoff_base


async def test_a_robots_txt_answered_after_its_503s_ends_their_back_off(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Two 503s, then the rules: the server has recovered, and the host's first page
    goes at its delay (0), not after the two strikes' back-off (4 s)."""
    asked: list[tuple[float, str]] = []

    def serve(request: httpx2.Request) -> httpx2.Response:
        asked.append((trio.current_time(), request.url.path))
        if request.url.path == "/robots.txt" and len(asked) <= 2:
            return httpx2.Response(503)
        return httpx2.Response(404 if request.url.path == "/robots.txt" else 200)

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.0, robots_retry_base=1.0),
        bounds=BoundsConfig(sitemaps=False),
    )
    async with running_crawler(config, serve) as crawler:
        crawler.seed(["http://a.test/"])
        with trio.fail_after(60):
            await crawler.wait_idle()
    assert [path for _, path in asked] == ["/robots.txt"] * 3 + ["/"]
    assert asked[3][0] == asked[2][0]
