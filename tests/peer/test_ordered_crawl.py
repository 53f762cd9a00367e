"""Crawls under every --order, judged from the synthetic web's request log: whatever the
order, every page of the truth is fetched once, politely; a restart in the middle of a
ranked crawl asks nothing twice. In process, on the autojump clock."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, CrawlOrder, PolitenessConfig, StoreConfig
from ubipy.errors import StorageError
from ubipy.peer.crawler import Crawler
from ubipy.store.shard import Shard
from ubipy.synthweb import Referee, SyntheticWeb, SynthTransport, WebSpec, ground_truth, in_process
from ubipy.synthweb.referee import ShortGap

DELAY = 0.05
SPEC = WebSpec(seed=11, hosts=12, pages_per_host=25)


def _config(tmp_path: Path, order: CrawlOrder) -> CrawlConfig:
    return CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=DELAY, concurrency=4),
        bounds=BoundsConfig(order=order, pagerank_every=20),
        # Windows of 2 refill from disk all the time, while what was asked waits to be
        # committed: it must not be loaded (and asked) again.
        store=StoreConfig(host_window=2),
    )


@pytest.mark.parametrize("order", list(CrawlOrder))
async def test_every_order_fetches_the_whole_web_once_and_politely(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, order: CrawlOrder
) -> None:
    web = SyntheticWeb(SPEC)
    server = in_process(web)
    shard = Shard.open(tmp_path)
    try:
        async with httpx2.AsyncClient(transport=SynthTransport(server)) as client:
            crawler = await crawl_until_idle(
                _config(tmp_path, order), shard, client, [web.seed_url()], patience=600
            )
    finally:
        shard.close()
    truth = ground_truth(web, [web.seed_url()])
    Referee(list(server.log), web).assert_clean(truth, DELAY)
    if order is CrawlOrder.PAGERANK:
        assert crawler.order.rank_runs >= 5  # every 20 pages, over ~300


async def test_a_ranked_crawl_stopped_and_resumed_asks_nothing_twice(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    web = SyntheticWeb(SPEC)
    server = in_process(web)
    config = _config(tmp_path, CrawlOrder.OPIC)
    async with httpx2.AsyncClient(transport=SynthTransport(server)) as client:
        shard = Shard.open(tmp_path)
        try:
            crawler = Crawler(config, shard, client)
            async with trio.open_nursery() as nursery:
                await nursery.start(crawler.run)
                crawler.seed([web.seed_url()])
                with trio.fail_after(600):
                    while len(server.log) < 80:
                        await crawler.request_ended.wait()
                crawler.stop()
            # What is left is scored: the windows are rebuilt from the best on disk.
            assert crawler.pending > 0
        finally:
            shard.close()
        restart = trio.current_time()
        shard = Shard.open(tmp_path)
        try:
            await crawl_until_idle(config, shard, client, [], patience=600)
        finally:
            shard.close()
    # Politeness across the restart is a wall-clock matter (the marks), which the
    # autojump clock does not move (the real milliseconds of the restart count, the
    # virtual ones do not): tests/e2e/test_crash.py has it with processes.
    truth = ground_truth(web, [web.seed_url()])
    problems = Referee(list(server.log), web).problems(truth, 0.0)
    gaps = [
        g
        for g in problems.pop("short_gaps", [])
        if isinstance(g, ShortGap) and not g.previous.start < restart <= g.next.start
    ]
    assert not problems and not gaps, (problems, gaps)


async def test_pagerank_not_saved_for_a_while_leaves_the_crawl_whole(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ranks are written after a commit that worked; a disk that refused them then
    ended the crawler (found by a review). They are written at a later commit."""
    web = SyntheticWeb(SPEC)
    server = in_process(web)
    shard = Shard.open(tmp_path)
    rescore, refused = shard.rescore, list[int]()

    def refusing_thrice(scores: Mapping[int, float]) -> None:
        if len(refused) < 3:
            refused.append(len(scores))
            raise StorageError("database or disk is full")
        rescore(scores)

    monkeypatch.setattr(shard, "rescore", refusing_thrice)
    try:
        async with httpx2.AsyncClient(transport=SynthTransport(server)) as client:
            crawler = await crawl_until_idle(
                _config(tmp_path, CrawlOrder.PAGERANK), shard, client, [web.seed_url()],
                patience=600,
            )  # fmt: skip
    finally:
        shard.close()
    Referee(list(server.log), web).assert_clean(ground_truth(web, [web.seed_url()]), DELAY)
    assert len(refused) == 3 and crawler.order.rank_runs >= 5
