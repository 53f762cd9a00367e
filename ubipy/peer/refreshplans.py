"""A continuous crawl's plans: the refresh budget, each page's revisit frequency under
the policy and its due time (a mixin of :class:`ubipy.peer.refreshing.Refresher`,
whose state it reads and sets; the arithmetic is :mod:`ubipy.fetch.refresh`).

A plan goes over every page the peer refreshes, every ``replan`` seconds: made at
once it held the event loop 1.3 s at 200,000 pages (7 s at a million, found by a
review), and a peer that answers no probe for seconds is declared dead. So it is made
in slices (:meth:`PlanningMixin._planning`): between two, other tasks run; the
arithmetic over every page runs in a worker thread, on copies of what it needs.
"""

from __future__ import annotations

import functools
import math
import time
from collections import defaultdict, deque
from collections.abc import Callable, Generator
from typing import Any

import trio

from ubipy.config import PolitenessConfig, RecrawlConfig, RefreshPolicy
from ubipy.fetch import Scheduler, allocate, is_sitemap, proportional
from ubipy.peer.refreshpages import (
    Packed,
    RefreshPage,
    RefreshStats,
    Sample,
    change_rates,
    depth_of,
)

__all__ = ["PLAN_SHARE", "PlanningMixin"]

# Hinted refreshes are counted over this many seconds.
_RATE_WINDOW = 300.0
# Pages (or tenths as many hosts) a plan goes through between two checkpoints, and
# the pages from which its arithmetic runs in a worker thread (~0.1 s of CPU).
_SLICE = 5_000
_IN_THREAD = 20_000
#: At most this share of the time between two plans goes to planning.
PLAN_SHARE = 0.05
#: A page is asked at most this many times as often as it is estimated to change:
#: then it is fresh 95% of the time (F(λ, 10λ)), and more buys at most the last 5%.
#: Without it a budget larger than the pages need (the default, a share of what their
#: hosts could take) went on every page at --min-interval: a site of 30 pages that
#: never change was asked every page a minute, for ever (QA).
USEFUL = 10.0


def _timed(step: Callable[[], Any]) -> tuple[Any, float]:
    """``step()`` and the seconds of CPU it took (its thread's)."""
    start = time.thread_time()
    return step(), time.thread_time() - start


def _frequencies(
    seen: list[Sample],
    policy: RefreshPolicy,
    budget: float,
    floor: float,
    cfg: RecrawlConfig,
) -> list[float]:
    """The pages' revisit frequencies under ``policy`` (not uniform), from their
    histories, hosts and importance: no page object, so a worker thread may run it."""
    rates = change_rates(seen, by_group=policy is RefreshPolicy.CLUSTER)
    if policy is RefreshPolicy.PROPORTIONAL:
        return proportional(rates, budget, floor)
    weights = [1.0] * len(seen)
    if policy is RefreshPolicy.IMPORTANCE:
        weights = [max(s.importance, 1e-9) for s in seen]
    own = [s.visits >= 2 for s in seen]
    return allocate(rates, weights, budget, floor, 1 / cfg.min_interval, USEFUL, own)


class PlanningMixin:
    """The budget and the plans (see the module's docstring)."""

    _cfg: RecrawlConfig
    _politeness: PolitenessConfig
    _scheduler: Callable[[], Scheduler]
    _pages: dict[int, Packed]
    _by_host: defaultdict[str, dict[int, None]]
    _latency: float
    _budget: float | None
    _budget_hosts: int
    _intervals: dict[int, float]
    _failing: set[int]
    _hinted: deque[float]
    _prompted: set[int]
    stats: RefreshStats

    def _schedule(self, hosts: set[str] | None = None) -> None:
        raise NotImplementedError

    def budget(self) -> float:
        """Refreshes a second to plan for: ``--refresh-rate``, or ``--refresh-share``
        of the requests a second this peer could make to its pages' hosts.

        Not a share of the requests it made lately: once new URLs ran out, those
        were the refreshes themselves, and each plan halved the last one's rate
        until a continuous crawl refreshed nothing (found by a review)."""
        if self._cfg.rate is not None:
            return self._cfg.rate
        return max(1e-3, self._cfg.share * self.capacity())

    def capacity(self) -> float:
        """Requests a second this peer could make to the hosts of its pages: one a
        host's delay (its Crawl-delay, its pace), one an address's ``--ip-delay``,
        and ``--concurrency`` at once over the time an answer takes (its measured
        mean; a second until one is measured)."""
        polite = self._politeness
        scheduler = self._scheduler()
        by_address: defaultdict[str | None, float] = defaultdict(float)
        for host in self._by_host:
            slot = scheduler.slot(host)
            delay = polite.delay if slot is None else scheduler.delay_of(slot)
            address = None if slot is None else slot.address
            by_address[address] += math.inf if delay <= 0 else 1 / delay
        ip_delay = polite.delay if polite.ip_delay is None else polite.ip_delay
        per_address = math.inf if ip_delay <= 0 else 1 / ip_delay
        hosts = by_address.pop(None, 0.0)
        hosts += sum(min(rate, per_address) for rate in by_address.values())
        return min(hosts, polite.concurrency / max(self._latency, 1e-3))

    def _first_interval(self) -> float:
        n = max(1, len(self._pages) - len(self._failing))
        if self._budget is None or len(self._by_host) > 2 * self._budget_hosts:
            self._budget, self._budget_hosts = self.budget(), len(self._by_host)
        return min(max(n / self._budget, self._cfg.min_interval), self._cfg.max_interval)

    async def replan(self) -> float:
        """:meth:`plan` in slices, other tasks running between two; the arithmetic
        in a worker thread once there are _IN_THREAD pages (below, it takes less than
        a slice, and tests on trio's mock clock keep their timeline). Returns the
        seconds the plan's own work took (its slices and its arithmetic)."""
        planning = self._planning()
        in_thread = len(self._pages) >= _IN_THREAD
        done = None
        own = 0.0
        try:
            while True:
                start = time.perf_counter()
                step, done = planning.send(done), None
                own += time.perf_counter() - start
                if step is not None:
                    if in_thread:
                        done, took = await trio.to_thread.run_sync(_timed, step)
                        own += took
                    else:
                        start = time.perf_counter()
                        done = step()
                        own += time.perf_counter() - start
                await trio.lowlevel.checkpoint()
        except StopIteration:
            pass
        return own

    def next_plan_in(self, took: float) -> float:
        """Seconds until the next plan, after one whose own work took ``took``:
        ``replan``, or more once a plan costs more than PLAN_SHARE of the time
        between two (a million pages: 7.7 s of CPU a plan, 13% of a core at one a
        minute, bench/refresh_memory.py; histories change over hours)."""
        return max(self._cfg.replan, took / PLAN_SHARE)

    def plan(self) -> None:
        """Every page's revisit frequency under the policy, and its due time (at once:
        :meth:`run` plans in slices)."""
        planning = self._planning()
        done = None
        try:
            while True:
                step = planning.send(done)
                done = None if step is None else step()
        except StopIteration:
            pass

    def _planning(self) -> Generator[Callable[[], Any] | None, Any, None]:
        """A plan in slices: it yields None between two slices of _SLICE pages or
        hosts, and once the arithmetic over every page as a function to call, whose
        result it is sent (pages answered, kept or retired meanwhile are told apart)."""
        if not self._pages:
            return
        cfg = self._cfg
        budget = self._budget = self.budget()
        self._budget_hosts = len(self._by_host)
        floor = 1 / cfg.max_interval
        # The pages whose last answers failed have no part in it: they keep their last
        # interval, backed off (see _wait_of).
        failing = set(self._failing)
        every_fp = list(self._pages)
        live = [fp for fp in every_fp if fp not in failing]
        # A sitemap at uniform's frequency; its requests and the hinted refreshes (at
        # their recent rate) come out of the pages' budget.
        every = budget / max(1, len(live))
        policy = cfg.policy
        uniform = policy is RefreshPolicy.UNIFORM
        # The pages and the sitemaps, and what the arithmetic needs of each page,
        # copied a slice at a time (answers change histories meanwhile).
        pages: list[int] = []
        maps: list[int] = []
        seen: list[Sample] = []
        for i in range(0, len(live), _SLICE):
            for fp in live[i : i + _SLICE]:
                if (packed := self._pages.get(fp)) is None:
                    continue  # retired or forgotten since
                if is_sitemap(depth_of(packed)):
                    maps.append(fp)
                    continue
                pages.append(fp)
                if not uniform:
                    seen.append(Sample.of(packed))
            yield None
        while self._hinted and self._hinted[0] < time.time() - _RATE_WINDOW:
            self._hinted.popleft()
        hinted = len(self._hinted) / _RATE_WINDOW
        budget = max(budget - every * len(maps) - hinted, 0.1 * budget)
        if uniform or not pages:
            freqs = [budget / max(1, len(pages))] * len(pages)
        else:
            freqs = yield functools.partial(_frequencies, seen, policy, budget, floor, cfg)
        last, intervals = self._intervals, {}
        planned, freqs = [*pages, *maps], [*freqs, *[every] * len(maps)]
        for i in range(0, len(planned), _SLICE):
            for fp, f in zip(planned[i : i + _SLICE], freqs[i : i + _SLICE], strict=True):
                interval = min(1 / f if f > 0 else cfg.max_interval, cfg.max_interval)
                intervals[fp] = max(interval, cfg.min_interval)
            yield None
        if failing:
            first = self._first_interval()
            for fp in failing:
                intervals[fp] = last.get(fp) or first
        self._intervals = intervals
        for i in range(0, len(every_fp), _SLICE):
            yield None
            now = time.time()
            ceiling = now + cfg.max_interval
            for fp in every_fp[i : i + _SLICE]:
                if (packed := self._pages.get(fp)) is None:
                    continue  # retired or forgotten since
                page = RefreshPage.unpacked(packed)
                # A time ahead of the clock (a clock stepped back since: an NTP
                # correction, a machine restored) counts from now. From then, every
                # page waited out the step as well: a day's step stopped every refresh
                # for a day.
                page.asked_at = min(page.asked_at, now)
                page.last_visit = min(page.last_visit, now)
                if page.barred_until > ceiling:
                    page.barred_until = now
                if page.held_until > ceiling:
                    page.held_until = now
                # Overdue under the new plan (its interval shrank): due now. Put off
                # instead (spread over the interval), the refreshes fell 40% short of
                # the budget (bench/freshness.py).
                due = page.asked_at + self._wait_of(page)
                due = min(due, page.due) if page.fp in self._prompted else due
                page.due = max(due, page.barred_until, page.held_until)
                self._pages[fp] = page.packed()
        self.stats.plans += 1
        hosts = list(self._by_host)
        for i in range(0, len(hosts), _SLICE // 10):
            yield None
            self._schedule(set(hosts[i : i + _SLICE // 10]))

    def _interval_of(self, page: RefreshPage) -> float:
        """The page's planned interval (the first one's until a plan includes it)."""
        return self._intervals.get(page.fp) or self._first_interval()

    def _wait_of(self, page: RefreshPage) -> float:
        """From when it was last asked to when it is due: its interval, doubled for
        each failure in a row, up to the longest interval."""
        interval = self._interval_of(page)
        if page.failures:
            backed_off = interval * 2.0 ** min(page.failures, 64)
            interval = max(min(backed_off, self._cfg.max_interval), interval)
        return interval
