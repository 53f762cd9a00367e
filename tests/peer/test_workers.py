"""Requests in flight, as the server sees them: never more than ``--concurrency``, and
that many while enough hosts are ready, though a worker task goes on from one request
to the next by itself; and a host's delay is kept to the time when a slot is free."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.peer.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig
from ubipy.store import Shard


class Server:
    """Pages that link to the next page of their host, answered after a latency;
    what is in flight at each moment is counted here."""

    def __init__(self, pages: int, latency: dict[str, float] | None = None) -> None:
        self.pages = pages
        self.latency = latency or {}
        self.in_flight = 0
        self.most = 0
        self.fetched: list[str] = []
        self.starts: dict[str, list[float]] = {}
        self._rng = random.Random(7)

    async def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        host = request.url.host
        self.starts.setdefault(host, []).append(trio.current_time())
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await trio.sleep(self.latency.get(host, self._rng.uniform(0.05, 0.5)))
        finally:
            self.in_flight -= 1
        self.fetched.append(str(request.url))
        n = int(request.url.path.strip("/") or 0)
        link = f'<a href="/{n + 1}">next</a>' if n + 1 < self.pages else ""
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=link.encode())


async def crawl(
    tmp: Path, server: Server, hosts: list[str], *, concurrency: int, delay: float
) -> None:
    shard = Shard.open(tmp)
    config = CrawlConfig(
        data_dir=tmp,
        politeness=PolitenessConfig(delay=delay, concurrency=concurrency),
        bounds=BoundsConfig(sitemaps=False),
    )
    await crawl_until_idle(config, shard, server, [f"http://{h}/" for h in hosts], within=3600)


async def test_never_more_requests_in_flight_than_the_concurrency_and_as_many_as_it_allows(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    server = Server(pages=8)
    hosts = [f"h{i}.test" for i in range(12)]
    await crawl(tmp_path, server, hosts, concurrency=4, delay=0.0)
    assert server.most == 4
    assert sorted(server.fetched) == sorted(
        f"http://{h}/{n}" if n else f"http://{h}/" for h in hosts for n in range(8)
    )


async def test_a_host_due_while_the_other_slots_are_busy_is_asked_when_it_is_due(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Three slots. slow.test takes one for 30 s a request; the fast hosts answer at
    # once, so each is due again 2 s after its request ended: a slot is free for it
    # then, and it must not wait for some worker to finish a request.
    latency = {"slow.test": 30.0, "a.test": 0.0, "b.test": 0.0}
    server = Server(pages=6, latency=latency)
    await crawl(tmp_path, server, list(latency), concurrency=3, delay=2.0)
    for host in ("a.test", "b.test"):
        starts = server.starts[host]
        gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
        assert len(starts) == 6
        assert all(2.0 <= gap < 2.01 for gap in gaps), (host, gaps)
