"""Sites whose robots.txt redirects to a host on a shared address (a hosting
provider's common file), judged from the server's side: the address never has two
requests at once, nor two closer than ``--ip-delay``, hops included.

The hop's target had no URLs here, so this peer had never looked it up: the hop went
without waiting for the address (its landing place unknown to the per-IP rule),
beside the pages of the site sharing it. In process, on the autojump clock."""

from __future__ import annotations

import itertools
from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, DnsConfig, PolitenessConfig, Scope
from ubipy.fetch import Resolver

SHARED = "203.0.113.9"
IP_DELAY = 1.0
REDIRECTING = [f"r{i}.test" for i in range(4)]
ADDRESSES = {
    **{host: f"203.0.113.{i + 1}" for i, host in enumerate(REDIRECTING)},
    "files.test": SHARED,  # the common robots.txt's host: no URLs of its own here
    "site.test": SHARED,  # a site beside it, with pages
}


async def test_hops_to_a_host_never_looked_up_wait_for_its_shared_address(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    spans: dict[str, list[tuple[float, float]]] = {}

    async def serve(request: httpx2.Request) -> httpx2.Response:
        host, path = request.url.host, request.url.path
        start = trio.current_time()
        await trio.sleep(0.3)
        spans.setdefault(ADDRESSES[host], []).append((start, trio.current_time()))
        if path == "/robots.txt":
            if host in REDIRECTING:
                return httpx2.Response(301, headers={"location": "http://files.test/robots.txt"})
            return httpx2.Response(200, text="User-agent: *\nAllow: /\n")
        links = "".join(f'<a href="/p{i}">p</a>' for i in range(8)) if path == "/" else ""
        return httpx2.Response(200, headers={"content-type": "text/html"}, text=links)

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.0, ip_delay=IP_DELAY, concurrency=16),
        bounds=BoundsConfig(scope=Scope.ANY, sitemaps=False),
        dns=DnsConfig(
            resolve=tuple(f"{host}:{ip}" for host, ip in ADDRESSES.items()), allow_private=True
        ),
    )
    resolver = Resolver.of(config.dns, system=False)
    async with running_crawler(config, serve, resolver=resolver) as crawler:
        crawler.seed([f"http://{host}/" for host in (*REDIRECTING, "site.test")])
        with trio.fail_after(600):
            await crawler.wait_idle()
        assert crawler.stats.pages == len(REDIRECTING) * 9 + 9
    shared = sorted(spans[SHARED])
    # The site's 9 pages and robots.txt, and every redirecting site's hop.
    assert len(shared) == 10 + len(REDIRECTING)
    gaps = [b[0] - a[1] for a, b in itertools.pairwise(shared)]
    assert min(gaps) >= IP_DELAY - 1e-6, gaps
    assert resolver.lookups["files.test"] == 1


async def test_a_hop_refused_its_address_goes_on_from_the_target_not_the_origin(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The hop's address lease refused three times (busy on another peer): each
    refusal started the redirect chain again from the site's own robots.txt, a request
    more to it each time (found by a review); and refusals counted as requests a pause
    abandoned."""
    asked: list[tuple[str, str]] = []

    def serve(request: httpx2.Request) -> httpx2.Response:
        asked.append((request.url.host, request.url.path))
        if request.url.path == "/robots.txt" and request.url.host == "r0.test":
            return httpx2.Response(301, headers={"location": "http://files.test/robots.txt"})
        if request.url.path == "/robots.txt":
            return httpx2.Response(200, text="User-agent: *\nAllow: /\n")
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=b"<p>x</p>")

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=1.0, ip_delay=IP_DELAY),
        bounds=BoundsConfig(scope=Scope.ANY, sitemaps=False),
        dns=DnsConfig(resolve=tuple(f"{h}:{a}" for h, a in ADDRESSES.items()), allow_private=True),
    )
    resolver = Resolver.of(config.dns, system=False)
    refusals = 0
    async with running_crawler(config, serve, resolver=resolver) as crawler:

        async def clear(host: str) -> bool:
            nonlocal refusals
            slot = crawler.scheduler.slot(host)
            if slot is not None and slot.ip == SHARED and refusals < 3:
                refusals += 1
                return False
            return True

        crawler.clear_to_fetch = clear
        crawler.seed(["http://r0.test/"])
        with trio.fail_after(300):
            while ("r0.test", "/") not in asked:
                await crawler.request_ended.wait()
        assert refusals == 3 and crawler.stats.abandoned == 0
    assert asked.count(("r0.test", "/robots.txt")) == 1
    assert asked.count(("files.test", "/robots.txt")) == 1
