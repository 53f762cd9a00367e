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
from tests.peer.crawling import running_crawler
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


@pytest.mark.parametrize("order", [CrawlOrder.OPIC, CrawlOrder.PAGERANK])
async def test_an_endless_chain_of_links_does_not_take_its_host_s_whole_crawl(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, order: CrawlOrder
) -> None:
    """A calendar's "next day": /day/N links to /day/N+1 alone, for ever. Each passed
    its whole cash to the next, which kept outbidding the site's pages (whose cash
    their links split): in 60 s, 1,080 requests on the chain and 0 of the 15 pages of
    the site's sections (QA). Each page passes on 0.85 of its cash, as PageRank's
    damping: a chain's falls away in a few hops."""
    sections = [f"/sec{s}/p{i}" for s in range(5) for i in range(3)]
    asked: list[str] = []

    async def serve(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path in ("/robots.txt", "/sitemap.xml"):
            return httpx2.Response(404)
        asked.append(path)
        if path == "/":
            links = [f"/sec{s}/" for s in range(5)] + ["/day/0"]
        elif path.startswith("/day/"):
            links = [f"/day/{int(path[5:]) + 1}"]
        elif path.endswith("/"):
            links = [p for p in sections if p.startswith(path)]
        else:
            links = []
        body = "".join(f'<a href="{p}">x</a>' for p in links)
        headers = {"content-type": "text/html"}
        return httpx2.Response(200, headers=headers, text=f"<html><body>{body}</body></html>")

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.1),
        bounds=BoundsConfig(order=order),
    )
    async with running_crawler(config, serve) as crawler:
        crawler.seed(["http://a.test/"])
        with trio.fail_after(600):
            while not set(sections) <= set(asked):
                await crawler.request_ended.wait()
    # The site's 21 pages within the first 40 requests; the rest of the chain after.
    assert len(asked) <= 40
