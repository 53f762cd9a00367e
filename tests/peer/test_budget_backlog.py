"""A host past its page budget with a long backlog: its URLs are closed without a
request, a chunk at a time, and the rest of the peer runs between the chunks."""

from __future__ import annotations

import time
from pathlib import Path

import httpx2
import pytest
import trio

from tests.peer.test_handoff import crawler_at
from ubipy.config import BoundsConfig, CrawlConfig, CrawlOrder, PolitenessConfig
from ubipy.fetch import Entry, JobKind
from ubipy.fetch.robots import RobotsRules
from ubipy.peer.crawler import Crawler
from ubipy.store.shard import HostMark, NewURL, Shard
from ubipy.synthweb import SyntheticWeb, SynthTransport, WebSpec, in_process

HOST = "h000.synth.test"


async def test_a_spent_hosts_backlog_is_closed_without_holding_the_loop(tmp_path: Path) -> None:
    """Closed in one synchronous loop, a million of them held the peer's loop for 5 s,
    its membership pings with it (found by a review)."""
    n = 5_000
    web = SyntheticWeb(WebSpec(seed=5, hosts=1, pages_per_host=5))
    shard = Shard.open(tmp_path)
    shard.add_to_frontier([NewURL(1000 + i, f"http://{HOST}/x/{i}", HOST, 1) for i in range(n)])
    shard.save_host_marks({HOST: HostMark(time.time() - 10, 0.01, 5)})  # its 5 pages made
    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.01, concurrency=4),
        bounds=BoundsConfig(max_pages_per_host=5, order=CrawlOrder.BFS),
    )
    steps = 0
    async with httpx2.AsyncClient(transport=SynthTransport(in_process(web))) as client:
        crawler = Crawler(config, shard, client)
        async with trio.open_nursery() as nursery:
            await nursery.start(crawler.run)
            with trio.fail_after(60):
                while crawler.pending:
                    steps += 1  # another task of the peer, given its turn
                    await trio.lowlevel.checkpoint()
            crawler.stop()
    shard.close()
    assert crawler.stats.skipped["host page budget"] == n
    assert steps >= n // 512  # a turn at least every chunk


async def test_refreshes_robots_txt_now_forbids_are_put_off_a_chunk_at_a_time(
    tmp_path: Path,
) -> None:
    """Not counted with the others, a host's thousands of pages due again that its
    robots.txt now forbade were all put off in one go (found by a review)."""
    async with crawler_at(tmp_path) as crawler:
        s = crawler.scheduler
        now = trio.current_time()
        n = 2_000
        s.refreshes(
            HOST, [(now, Entry(i, 0, f"http://{HOST}/p{i}", 1, refresh=True)) for i in range(n)]
        )
        robots = s.next_job(now)
        assert robots is not None and robots.kind is JobKind.ROBOTS
        s.robots_answer(HOST, now, status=200, location=None, body=b"User-agent: *\nDisallow: /\n")
        slot = s.slot(HOST)
        assert slot is not None
        calls = 0
        while slot.refresh:
            due = len(slot.refresh)
            assert crawler._next_fetch() is None
            calls += 1
            assert due - len(slot.refresh) <= 512
        assert calls >= n // 512
        assert not crawler.stats.skipped  # put off, not closed


async def test_skips_whose_robots_checks_are_slow_let_the_loop_run_within_milliseconds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A robots.txt of 26,000 wildcard rules took 30 ms to check a long URL: 512 skips
    in a row held the peer's loop 15 s (found by a review). A turn comes after 20 ms."""
    async with crawler_at(tmp_path) as crawler:
        s = crawler.scheduler
        now = trio.current_time()
        for i in range(100):
            s.add(HOST, Entry(i, i, f"http://{HOST}/p{i}", 1))
        robots = s.next_job(now)
        assert robots is not None and robots.kind is JobKind.ROBOTS
        s.robots_answer(HOST, now, status=200, location=None, body=b"User-agent: *\nDisallow: /\n")
        allowed = RobotsRules.allowed

        def slow(rules: RobotsRules, url: str) -> bool:
            time.sleep(0.005)  # the check's own cost, not a wait for anything
            return allowed(rules, url)

        monkeypatch.setattr(RobotsRules, "allowed", slow)
        assert crawler._next_fetch() is None
        assert 1 <= crawler.stats.skipped["robots"] <= 6
