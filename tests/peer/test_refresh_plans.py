"""A continuous crawl's plan goes over every page it refreshes, every minute: made at
once it held the event loop 1.3 s at 200,000 pages (7 s at a million; a review), and
a peer silent for seconds is declared dead by the others. Made in slices, with the
arithmetic in a worker thread, it comes to the same due times."""

from __future__ import annotations

import dataclasses
import gc
import itertools
import random
import time
from pathlib import Path

import pytest
import trio

from ubipy.config import CrawlConfig, RecrawlConfig, RefreshPolicy
from ubipy.fetch import Scheduler
from ubipy.peer.refreshing import Refresher
from ubipy.peer.refreshpages import RefreshPage, Sample, change_rates
from ubipy.peer.refreshplans import PLAN_SHARE
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


def _dues(refresher: Refresher) -> dict[int, float]:
    pages = [refresher.page(fp) for fp in refresher._pages]
    return {p.fp: p.due for p in pages if p is not None}


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
    sliced = _dues(refresher)
    refresher.plan()
    assert _dues(refresher) == sliced
    assert refresher.stats.plans == 2


def test_a_page_comes_out_of_its_packing_as_it_went_in() -> None:
    values = dict(
        visits=1, changes=2, observed=3.0, last_visit=4.0, fp=5, url="http://a.test/",
        host="a.test", depth=6, importance=7.0, etag='"e"', last_modified="lm",
        digest="d", due=8.0, checks=9, agreed=10, barred_until=11.0, asked_at=12.0,
        failures=13, missing=14, held_until=15.0,
    )  # fmt: skip
    page = RefreshPage(**values)  # type: ignore[arg-type]
    assert RefreshPage.unpacked(page.packed()) == page
    assert {f.name: getattr(page, f.name) for f in dataclasses.fields(page)} == values


async def test_a_million_pages_would_be_no_work_for_the_collectors_full_passes(
    tmp_path: Path,
) -> None:
    """Each full collection of the garbage collector goes through every object it
    tracks, with the event loop standing still: at a million pages refreshed, held as
    objects, 1.1 s (bench/refresh_memory.py), more than a peer's probe time-out. Held
    packed, once a collection has seen them, no page is tracked here or in the
    scheduler, after a plan as after answers."""
    refresher = _refresher(tmp_path, RefreshPolicy.HISTORY, pages=3_000, hosts=300)
    await refresher.replan()
    gc.collect()
    assert not gc.is_tracked(refresher._pages)
    assert not any(gc.is_tracked(fps) for fps in refresher._by_host.values())
    scheduler = refresher._scheduler()
    heaps = [scheduler.slot(host) for host in refresher._by_host]
    assert sum(len(s.refresh) for s in heaps if s is not None) == 3_000
    assert not any(gc.is_tracked(item) for s in heaps if s is not None for item in s.refresh)
    assert len(_dues(refresher)) == 3_000


async def test_plans_that_cost_more_than_their_share_come_less_often(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """At a million pages a plan takes seconds of CPU (7.7 s here), and one a minute
    took 13% of a core for histories that change over hours: plans come every
    ``replan`` seconds, or more apart once one costs over PLAN_SHARE of that."""
    refresher = _refresher(tmp_path, RefreshPolicy.HISTORY, pages=100, hosts=10)
    costs = iter([0.5, 12.0, 1.0, 1.0])  # seconds of a plan's own work, as replan says
    began: list[float] = []

    async def replan() -> float:
        began.append(trio.current_time())
        return next(costs)

    refresher.replan = replan  # type: ignore[method-assign]
    with trio.move_on_after(60 + 60 + 240 + 60 + 1):
        await refresher.run(lambda: None)
    gaps = [round(b - a, 3) for a, b in itertools.pairwise(began)]
    assert gaps == [60.0, 12.0 / PLAN_SHARE, 60.0]
    # A real plan of a few thousand pages says what it took: far under its share.
    took = await Refresher.replan(refresher)
    assert 0 < took < 60 * PLAN_SHARE


@pytest.mark.parametrize("changed", [0, 1, 2, 10])
def test_a_page_seen_once_is_not_taken_for_slower_than_pages_seen_twice(changed: int) -> None:
    """Under the history policy a page seen once takes the rate pooled over the pages
    seen more: with half a change for the whole pool (or for none once one changed, a
    review), it looked many times slower to change than each unchanged page seen twice
    by its own estimate, and the plan left it for minutes (QA)."""
    seen = [
        Sample(visits=2, changes=int(i < changed), observed=60.0, host="a.test",
               importance=1.0, url=f"http://a.test/{i}")
        for i in range(20)
    ]  # fmt: skip
    once = Sample(visits=1, changes=0, observed=0.0, host="a.test", importance=1.0, url="x")
    rates = change_rates([*seen, once], by_group=False)
    unchanged_own = rates[changed]  # the first page seen twice unchanged
    assert rates[-1] >= unchanged_own
