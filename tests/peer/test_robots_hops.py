"""A crawl of hosts whose robots.txt redirects to one host's (subdomains to www, a
hosting provider's shared file), judged from the server's side: that host never has
two requests in flight at once and gets them the politeness delay apart, however many
hosts redirect to it, and every host's pages are still crawled. In process, on the
autojump clock."""

from __future__ import annotations

import itertools
from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.peer.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, FetchConfig, PolitenessConfig
from ubipy.store import Shard

DELAY = 5.0
CENTRAL = "central.test"
REDIRECTING = [f"h{i}.test" for i in range(8)]
# Its robots.txt goes to https on the same host: no hop, as it always worked.
SECURE = "secure.test"


async def test_hosts_redirecting_robots_txt_to_one_host_do_not_crowd_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Per host: (start, end) of each request, as the server sees them.
    log: dict[str, list[tuple[float, float]]] = {}
    in_flight: dict[str, int] = {}
    peak: dict[str, int] = {}

    async def serve(request: httpx2.Request) -> httpx2.Response:
        host, path = request.url.host, request.url.path
        start = trio.current_time()
        in_flight[host] = in_flight.get(host, 0) + 1
        peak[host] = max(peak.get(host, 0), in_flight[host])
        try:
            await trio.sleep(1.0 if host == CENTRAL else 0.2)
            if path == "/robots.txt":
                if host in REDIRECTING:
                    return httpx2.Response(
                        301, headers={"location": f"http://{CENTRAL}/robots.txt"}
                    )
                if host == SECURE and request.url.scheme == "http":
                    return httpx2.Response(
                        301, headers={"location": f"https://{SECURE}/robots.txt"}
                    )
                return httpx2.Response(200, text="User-agent: *\nAllow: /\n")
            links = '<a href="/next">next</a>' if path == "/" else ""
            html = f"<html><body><p>{host}{path}</p>{links}</body></html>"
            return httpx2.Response(200, headers={"content-type": "text/html"}, text=html)
        finally:
            in_flight[host] -= 1
            log.setdefault(host, []).append((start, trio.current_time()))

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=DELAY, concurrency=32),
        fetch=FetchConfig(max_retries=0, fetch_deadline=30.0),
        bounds=BoundsConfig(sitemaps=False),
    )
    hosts = [*REDIRECTING, CENTRAL, SECURE]
    shard = Shard.open(tmp_path)
    try:
        await crawl_until_idle(config, shard, serve, [f"http://{h}/" for h in hosts], within=600)
        shard = Shard.open(tmp_path)
        stored = {row["url"]: row["status"] for row in shard.iter_pages()}
    finally:
        shard.close()

    # Every host's robots.txt hop reached central.test, each once, and its own.
    assert len(log[CENTRAL]) == len(REDIRECTING) + 1 + 2
    for host in hosts:
        assert peak[host] == 1, (host, peak[host])
        spans = sorted(log[host])
        gaps = [b[0] - a[1] for a, b in itertools.pairwise(spans)]
        assert min(gaps) >= DELAY - 1e-6, (host, gaps)
    # Every host's pages were crawled, the redirected ones' included.
    assert {u: stored.get(u) for h in hosts for u in (f"http://{h}/", f"http://{h}/next")} == {
        u: 200 for h in hosts for u in (f"http://{h}/", f"http://{h}/next")
    }
