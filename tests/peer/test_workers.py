"""Requests in flight, as the server sees them: never more than ``--concurrency``, and
that many while enough hosts are ready, though a worker task goes on from one request
to the next by itself; a host's delay kept to the time when a slot is free; no
request made once paused; and a commit the shard refuses tried again after
``storage_retry``, not in a loop."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.peer.crawling import crawl_until_idle, running_crawler
from tests.spinning import no_endless_spin
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig
from ubipy.errors import StorageError
from ubipy.peer.crawler import Crawler
from ubipy.store import Shard
from ubipy.store_config import StoreConfig


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


def _html(request: httpx2.Request) -> httpx2.Response:
    if request.url.path == "/robots.txt":
        return httpx2.Response(404)
    return httpx2.Response(200, headers={"content-type": "text/html"}, content=b"x")


async def _requests_made_after(tmp: Path, halt: Callable[[Crawler], None]) -> list[str]:
    """Halt a crawl (pause or stop it) from a task woken by a request's end, when a
    worker has taken its next job and waits at its checkpoint; the requests the
    server saw after that."""
    made_after: list[str] = []
    halted = trio.Event()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        # No checkpoint between the crawler's start of a request and this.
        if halted.is_set():
            made_after.append(str(request.url))
        await trio.sleep(0.01)
        return _html(request)

    async with running_crawler(_one_at_a_time(tmp), handler) as crawler:
        crawler.seed([f"http://h{i}.test/" for i in range(4)])
        await crawler.request_ended.wait()
        await crawler.request_ended.wait()
        halt(crawler)
        halted.set()
        await trio.sleep(1)
    return made_after


def _one_at_a_time(data: Path) -> CrawlConfig:
    return CrawlConfig(
        data_dir=data,
        politeness=PolitenessConfig(delay=0.0, concurrency=1),
        bounds=BoundsConfig(sitemaps=False),
    )


async def test_no_request_is_made_after_a_pause_by_a_worker_that_took_its_job_before(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Trio orders a batch's tasks at random, so 20 tries: before the fix about half of
    # them made a request while paused (all of them with a task a request).
    for attempt in range(20):
        (tmp_path / str(attempt)).mkdir()
        made = await _requests_made_after(tmp_path / str(attempt), lambda c: c.pause("no quorum"))
        assert made == [], attempt


async def test_no_request_is_made_after_a_stop_by_a_worker_that_took_its_job_before(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A stop lets the requests in flight end; one a worker had taken but not made
    # stays in the frontier, for the next run.
    for attempt in range(20):
        (tmp_path / str(attempt)).mkdir()
        assert await _requests_made_after(tmp_path / str(attempt), Crawler.stop) == [], attempt


async def test_a_commit_the_shard_refuses_is_tried_again_after_storage_retry_not_at_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    shard = Shard.open(tmp_path)
    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.0, concurrency=2),
        bounds=BoundsConfig(sitemaps=False),
        store=StoreConfig(storage_retry=5.0, commit_every_pages=1),
    )
    record = shard.record_pages

    def refuse(pages: object) -> None:
        raise StorageError("disk full")

    try:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(_html)) as client:
            crawler = Crawler(config, shard, client)
            # Before the fix the dispatcher and the committer woke each other at once,
            # never leaving the clock idle: the alarm ends that.
            with no_endless_spin():
                async with trio.open_nursery() as nursery:
                    await nursery.start(crawler.run)
                    crawler.seed([f"http://h{i}.test/{n}" for i in range(4) for n in range(5)])
                    monkeypatch.setattr(shard, "record_pages", refuse)
                    with trio.fail_after(5):
                        await crawler.storage_failing.wait()
                    # A request in flight still ends and its page asks for a commit at
                    # once; none starts while the shard refuses writes.
                    for _ in range(config.politeness.concurrency):
                        if crawler.scheduler.in_flight:
                            await crawler.request_ended.wait()
                    assert crawler.scheduler.in_flight == 0
                    await trio.sleep(0.1)  # the clock's: past that commit's attempt
                    first = crawler.stats.storage_failures
                    await trio.sleep(4.8)
                    assert crawler.stats.storage_failures == first
                    monkeypatch.setattr(shard, "record_pages", record)  # the disk has room
                    with trio.fail_after(100):
                        await crawler.wait_idle()
                    crawler.stop()
        assert len(list(shard.iter_pages())) == 20
    finally:
        shard.close()


async def test_no_request_is_made_after_a_stop_that_came_while_it_waited_to_be_cleared(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A request waits for its address's lease (a round trip to another peer) before it
    is made; a stop meanwhile leaves it unmade, and the stat of requests cut short by
    a pause does not count it."""
    made: list[tuple[float, str]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        made.append((trio.current_time(), str(request.url)))
        return _html(request)

    async def slow_lease(host: str) -> bool:
        await trio.sleep(0.5)
        return True

    async with running_crawler(_one_at_a_time(tmp_path), handler) as crawler:
        crawler.clear_to_fetch = slow_lease
        crawler.seed(["http://a.test/"])
        await trio.sleep(0.25)
    assert made == []
    assert crawler.stats.abandoned == 0
