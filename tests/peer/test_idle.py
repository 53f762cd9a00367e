"""An idle crawler sleeps: once its crawl is done nothing of it wakes until there is
work (issue #19: an idle peer's timers cost CPU a second), yet what comes later is
still written within the commit interval. Counted with a trio instrument on the
autojump clock: each step of a task is a wake-up."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.spinning import no_endless_spin
from tests.wakeups import counting_steps
from ubipy.config import CrawlConfig, PolitenessConfig, StoreConfig
from ubipy.peer.commits import COMMIT_GRACE, COMMIT_PATIENCE
from ubipy.peer.crawler import Crawler
from ubipy.store import Shard
from ubipy.synthweb import SyntheticWeb, SynthTransport, WebSpec, in_process


@asynccontextmanager
async def _idle_crawler(
    tmp_path: Path, store: StoreConfig | None = None
) -> AsyncIterator[tuple[Crawler, Shard, SyntheticWeb]]:
    """A crawler that has crawled a small synthetic web and is idle; stopped after."""
    web = SyntheticWeb(WebSpec(seed=3, hosts=2, pages_per_host=5))
    config = CrawlConfig(
        data_dir=tmp_path, politeness=PolitenessConfig(delay=0.1), store=store or StoreConfig()
    )
    shard = Shard.open(tmp_path)
    try:
        async with httpx2.AsyncClient(transport=SynthTransport(in_process(web))) as client:
            crawler = Crawler(config, shard, client)
            async with trio.open_nursery() as nursery:
                await nursery.start(crawler.run)
                crawler.seed([web.seed_url()])
                with trio.fail_after(600):
                    await crawler.wait_idle()
                yield crawler, shard, web
                crawler.stop()
    finally:
        shard.close()


async def test_an_idle_crawler_does_not_wake_and_still_commits_what_comes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with _idle_crawler(tmp_path, StoreConfig(commit_interval=0.05)) as (crawler, shard, web):
        await trio.sleep(1)  # the last commit
        with counting_steps() as steps:
            await trio.sleep(60)
        # A minute idle: a wake-up a commit interval would be 1,200.
        assert steps.steps <= 10
        # Work after the idle spell wakes it: a new page is fetched and
        # written (idle means nothing left to write) within a second.
        pages = len(list(shard.iter_pages()))
        crawler.seed([f"http://{web.host_names()[0]}/never-linked.html"])
        with trio.fail_after(1):
            await crawler.wait_idle()
        assert len(list(shard.iter_pages())) == pages + 1


async def test_waiting_for_idleness_waits_for_a_write_without_a_spin(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with _idle_crawler(tmp_path) as (crawler, _, _):
        # A write that schedules no work and waits for the next commit (an owner's
        # acknowledgement, were it not committed at once): waiting for idleness waits
        # for that commit, without looping meanwhile.
        crawler._commits.acked([12345])
        start = trio.current_time()
        # Looping through checkpoints without waiting, it would hold the autojump
        # clock still, and that commit would never come.
        with no_endless_spin():
            await crawler.wait_idle()
        waited = trio.current_time() - start
        assert 0 < waited <= COMMIT_PATIENCE + COMMIT_GRACE
