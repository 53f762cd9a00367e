"""A continuous crawl (--recrawl) over weeks: pages that are removed or moved give their
share of the refresh budget back to the pages that live, and a wall clock stepped back
does not stop the refreshes.

Found by a review: a 404, 410 or 301 was no visit of the page's history, so the page
was asked at its planned interval for ever, and under the history policy a live page's
estimated change rate fell with every unchanged visit while a dead page's stood still:
94% of a later week's refreshes went to dead URLs. And due times are wall-clock times:
after the clock stepped back a day, no page was refreshed for a day."""

from __future__ import annotations

import itertools
import math
import time
from collections import Counter
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.cluster.harness import EPOCH, wall_clock_on_trio_time
from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig, RecrawlConfig, RefreshPolicy
from ubipy.store import Shard

DAY = 86400.0
WEEK = 7 * DAY
# When the pages below stop answering 200.
DIES_AT = 3600.0
MISSING = ("/p0", "/p1", "/p2")  # 404
GONE = ("/p3", "/p4")  # 410
MOVED = "/p5"  # 301 to /moved5
FAILING = ("/p6", "/p7")  # 503, for good
DEAD = (*MISSING, *GONE, MOVED, *FAILING)
RATE = 0.01  # refreshes a second


class _Site:
    """A home page linking to /p0../p9, each linking to them all, each changing every
    hour (worth the budget: a page is asked at most ten times as often as it changes);
    from DIES_AT on the pages above answer as said. Every request is logged: (time,
    path, status)."""

    def __init__(self) -> None:
        self.log: list[tuple[float, str, int]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        now, path = trio.current_time(), request.url.path
        if path == "/robots.txt":
            return httpx2.Response(404)
        status = 200
        if now >= DIES_AT and path in DEAD:
            status = (
                404 if path in MISSING else 410 if path in GONE else 301 if path == MOVED else 503
            )
        self.log.append((now, path, status))
        if status == 301:
            return httpx2.Response(301, headers={"location": "/moved5"})
        if status != 200:
            return httpx2.Response(status)
        links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(10))
        hour = int(now // 3600)
        return httpx2.Response(200, html=f"<html><body>{links}<p>{hour}</body></html>")


def _config(data: Path, policy: RefreshPolicy, rate: float = RATE) -> CrawlConfig:
    return CrawlConfig(
        data_dir=data,
        politeness=PolitenessConfig(delay=1.0),
        bounds=BoundsConfig(sitemaps=False),
        recrawl=RecrawlConfig(recrawl=True, policy=policy, rate=rate, min_interval=60, replan=60),
    )


@pytest.mark.parametrize(
    "policy", [RefreshPolicy.UNIFORM, RefreshPolicy.HISTORY, RefreshPolicy.CLUSTER]
)
async def test_pages_removed_or_moved_give_the_budget_back_to_the_live_ones(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, policy: RefreshPolicy
) -> None:
    # Before: in the second week 94% of the refreshes went to the dead pages (history,
    # cluster), half of them under uniform: each asked at its interval for ever.
    site = _Site()
    config = _config(tmp_path, policy)
    with wall_clock_on_trio_time():
        async with running_crawler(config, site) as crawler:
            crawler.seed(["http://a.test/"])
            await trio.sleep(DAY + WEEK)
            assert crawler.refresher is not None
            stats = crawler.refresher.stats
    after = Counter(path for t, path, _ in site.log if t >= DIES_AT)
    # Gone or moved for good: asked once, and not again; missing: three times.
    assert {after[p] for p in (*GONE, MOVED)} == {1}
    assert {after[p] for p in MISSING} == {3}
    assert stats.retired == len(MISSING) + len(GONE) + 1
    # Over a later week the live pages (the home page, /p8, /p9, /moved5) have the
    # budget; a page that fails for good is backed off to a few requests a week.
    week = [path for t, path, _ in site.log if t >= DAY]
    live = [p for p in week if p not in DEAD]
    assert len(live) >= 0.9 * RATE * WEEK
    # (A 503 is tried three times a request, a minute at most: one ask.)
    asks = Counter(p for p, t in _asks(site, since=DAY) if p in FAILING)
    assert max(asks.values()) <= 4, asks
    assert len(week) - len(live) <= 0.01 * len(week)
    # The rows of the pages retired are gone from the shard (a restart would ask them).
    shard = Shard.open(tmp_path)
    try:
        kept = sorted(r.url.removeprefix("http://a.test") for r in shard.refresh_rows())
    finally:
        shard.close()
    assert kept == sorted(["/", "/p8", "/p9", "/moved5", *FAILING])


def _asks(site: _Site, *, since: float) -> list[tuple[str, float]]:
    """Each page's requests from ``since`` on, those a minute or less after the one
    before counted as one (the fetcher's tries of one request)."""
    last: dict[str, float] = {}
    asks = []
    for t, path, _ in site.log:
        if t >= since and t - last.get(path, -math.inf) > 60:
            asks.append((path, t))
        last[path] = t
    return asks


class _Steady:
    """A site whose pages always answer 200, with when each is asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[float, str]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        self.asked.append((trio.current_time(), request.url.path))
        links = "".join(f'<a href="/p{i}">{i}</a>' for i in range(10))
        return httpx2.Response(200, html=f"<html><body>{links}</body></html>")


class _SteppedClock:
    """time.time() on trio's clock (as wall_clock_on_trio_time) that steps by ``step``
    at trio time ``at`` (an NTP correction, a machine restored from a snapshot)."""

    def __init__(self, at: float, step: float) -> None:
        self.at, self.step = at, step
        self._real = time.time

    def __call__(self) -> float:
        try:
            t = trio.current_time()
        except RuntimeError:
            return self._real()
        return EPOCH + t + (self.step if t >= self.at else 0.0)

    def __enter__(self) -> None:
        time.time = self

    def __exit__(self, *exc: object) -> None:
        time.time = self._real


def _largest_gaps(site: _Steady, since: float, until: float) -> tuple[float, float]:
    """From ``since`` to ``until``: the longest time without a request, and the longest
    any page waited (from ``since`` or its last request) for its next."""
    times = [since, *(t for t, _ in site.asked if since <= t < until), until]
    overall = max(b - a for a, b in itertools.pairwise(times))
    last = {path: since for _, path in site.asked}
    longest = 0.0
    for t, path in [*site.asked, *((until, path) for path in last)]:
        if since <= t <= until:
            longest = max(longest, t - last[path])
            last[path] = t
    return overall, longest


async def test_a_clock_stepped_back_a_day_does_not_stop_the_refreshes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Before: no request at all for the day after the step (due times, wall-clock
    # times from before it, each a day later on trio's clock).
    site = _Steady()
    step_at = 2 * 3600.0
    # 11 pages at 0.02 refreshes a second: each due every 550 s.
    config = _config(tmp_path, RefreshPolicy.UNIFORM, rate=0.02)
    interval = 11 / 0.02
    with _SteppedClock(step_at, -DAY):
        async with running_crawler(config, site) as crawler:
            crawler.seed(["http://a.test/"])
            await trio.sleep(step_at + 6 * 3600)
    overall, longest = _largest_gaps(site, step_at, step_at + 6 * 3600)
    # The refreshes go on at their pace: no page waits longer than its interval.
    assert overall <= interval + config.recrawl.replan
    assert longest <= interval + config.recrawl.replan
    after = [t for t, _ in site.asked if t >= step_at]
    assert len(after) >= 0.9 * 0.02 * 6 * 3600


async def test_a_restart_after_the_clock_stepped_back_goes_on_refreshing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The peer stops, the clock is put back a day, the peer starts again: its rows'
    # due times and last visits lie a day ahead of the clock. A start holds the plans
    # to its rows' due times (a back-off kept): not to a day ahead.
    site = _Steady()
    config = _config(tmp_path, RefreshPolicy.UNIFORM, rate=0.02)
    interval = 11 / 0.02
    start = 3600.0
    with _SteppedClock(start, -DAY):
        async with running_crawler(config, site) as crawler:
            crawler.seed(["http://a.test/"])
            await trio.sleep(start - 60)
        await trio.sleep(60)  # stopped while the clock is put back
        async with running_crawler(config, site):
            await trio.sleep(6 * 3600)
    overall, longest = _largest_gaps(site, start, start + 6 * 3600)
    assert overall <= interval + 2 * config.recrawl.replan
    assert longest <= interval + 2 * config.recrawl.replan
