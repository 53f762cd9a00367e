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
