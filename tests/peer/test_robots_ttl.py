"""A continuous crawl (--recrawl) whose sites change their robots.txt: a host's answer
is used for a day at most (RFC 9309 §2.4, ``robots_ttl``), then asked again before the
host's next request, and the new rules hold from then on. Judged from the server's
log; in process, on the autojump clock (a day is virtual)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.cluster.harness import wall_clock_on_trio_time
from tests.peer.crawling import running_crawler
from ubipy.config import CrawlConfig, PolitenessConfig, RecrawlConfig, RefreshPolicy
from ubipy.synthweb import SyntheticWeb, SynthServer, SynthTransport, WebSpec, in_process

DELAY = 0.5
SPEC = WebSpec(seed=5, hosts=3, pages_per_host=8)
TTL = PolitenessConfig().robots_ttl  # the default: a day
DISALLOW_ALL = b"User-agent: *\nDisallow: /\n"


class _Switch(httpx2.AsyncBaseTransport):
    """The synthetic web until ``switch()``; from then on every robots.txt says
    Disallow: / (answered here, not by the server: its log holds the pages alone).
    Every request's host and start are kept, robots.txt's too."""

    def __init__(self, server: SynthServer) -> None:
        self._web = SynthTransport(server)
        self.switched_at: float | None = None
        self.starts: list[tuple[str, float, bool]] = []

    def switch(self) -> None:
        self.switched_at = trio.current_time()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        robots = request.url.path == "/robots.txt"
        self.starts.append((request.url.host, trio.current_time(), robots))
        if robots and self.switched_at is not None:
            await trio.sleep(0.05)
            headers = {"content-type": "text/plain"}
            return httpx2.Response(200, content=DISALLOW_ALL, headers=headers, request=request)
        return await self._web.handle_async_request(request)


async def test_a_robots_txt_that_comes_to_disallow_all_is_obeyed_within_its_ttl(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    web = SyntheticWeb(SPEC)
    server = in_process(web)
    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=DELAY, concurrency=4),
        recrawl=RecrawlConfig(
            recrawl=True, policy=RefreshPolicy.UNIFORM, rate=0.05, min_interval=60, replan=600
        ),
    )
    transport = _Switch(server)
    with wall_clock_on_trio_time():
        async with running_crawler(config, transport) as crawler:
            crawler.seed([web.seed_url()])
            await trio.sleep(3600)
            transport.switch()
            await trio.sleep(TTL + 2 * 3600)
    switched = transport.switched_at
    assert switched is not None
    hosts = {host for host, _, _ in transport.starts}
    asked = {host for host, _, robots in transport.starts if robots}
    assert asked == hosts and len(hosts) >= 3
    # Each host's answer was taken once in the first hour and used for a day (RFC
    # 9309 allows no less): its pages were still asked after the switch, as before.
    pages_after = [r for r in server.log if r.start > switched and r.target_path != "/robots.txt"]
    assert len(pages_after) > 1000
    # Then robots.txt was asked again, once a host, and no page since: within the TTL
    # and a few minutes of the switch, nothing it disallows is fetched.
    again = Counter(host for host, t, robots in transport.starts if robots and t > switched)
    assert again == Counter(dict.fromkeys(hosts, 1))
    assert max(r.start for r in pages_after) < switched + TTL + 300
    assert crawler.stats.robots_disallowed > 0
    # Through the host's slot: no request to a host sooner than its delay after the last.
    last: dict[str, float] = {}
    for host, start, _ in transport.starts:
        assert start - last.get(host, -DELAY) >= DELAY - 1e-9
        last[host] = start
