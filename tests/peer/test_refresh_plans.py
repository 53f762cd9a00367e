"""A continuous crawl's plan goes over every page it refreshes, every minute: made at
once it held the event loop 1.3 s at 200,000 pages (7 s at a million; a review), and
a peer silent for seconds is declared dead by the others. Made in slices, with the
arithmetic in a worker thread, it comes to the same due times."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
import trio

from ubipy.config import CrawlConfig, RecrawlConfig, RefreshPolicy
from ubipy.fetch import Scheduler
from ubipy.peer.refreshing import Refresher
from ubipy.peer.refreshpages import RefreshPage
from ubipy.store import Shard


def _refresher(tmp: Path, policy: RefreshPolicy, pages: int, hosts: int) -> Refresher:
    config = CrawlConfig(data_dir=tmp, recrawl=RecrawlConfig(recrawl=True, policy=policy))
    scheduler = Scheduler.of(config, loader=lambda host, after, limit: [])
    refresher = Refresher(config, Shard.open(tmp), lambda: scheduler, None)  # type: ignore[arg-type]
    rng, now = random.Random(7), time.time()
    for i in range(pages):
        host, last = f"h{i % hosts}.test", now - rng.uniform(0, 1e5)
        page = RefreshPage(
            visits=rng.randint(1, 40), changes=rng.randint(0, 5),
            observed=rng.uniform(1e3, 1e6), last_visit=last, fp=i, url=f"http://{host}/{i}",
            host=host, depth=2, importance=rng.random(), etag=None, last_modified=None,
            digest="d", due=now + 100, asked_at=last,
        )  # fmt: skip
        refresher._keep(page)
    return refresher


@pytest.mark.parametrize("policy", [RefreshPolicy.HISTORY, RefreshPolicy.UNIFORM])
async def test_a_plan_of_many_pages_lets_other_tasks_run_and_comes_to_the_same_dues(
    tmp_path: Path, policy: RefreshPolicy
) -> None:
    refresher = _refresher(tmp_path, policy, pages=30_000, hosts=3_000)
    turns = 0
    planned = trio.Event()

    async def other_task() -> None:
        nonlocal turns
        while not planned.is_set():
            turns += 1
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(other_task)
        await refresher.replan()
        planned.set()
    # Turns between slices of 5,000 pages (copied, then dated) and of 500 hosts (their
    # due pages handed to the scheduler): none when a plan was made at once.
    assert turns >= 10
    sliced = {fp: p.due for fp, p in refresher._pages.items()}
    refresher.plan()
    assert {fp: p.due for fp, p in refresher._pages.items()} == sliced
    assert refresher.stats.plans == 2
