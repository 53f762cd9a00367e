"""Revisit frequencies for a continuous crawl: Cho and Garcia-Molina's rate estimator
and freshness-optimal allocation, checked against simulated Poisson pages."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from ubipy.fetch.refresh import (
    History,
    allocate,
    change_rate,
    estimate,
    freshness,
    proportional,
)


def _observe(rng: random.Random, rate: float, interval: float, visits: int) -> History:
    """A page changing at ``rate``, visited every ``interval`` seconds."""
    h = History()
    for i in range(visits):
        changed = i > 0 and rng.random() < 1 - math.exp(-rate * interval)
        h.visited(i * interval, changed)
    return h


@pytest.mark.parametrize("rate_per_interval", [0.1, 0.5, 1.0, 2.0])
def test_the_estimate_is_close_where_counting_changes_falls_short(
    rate_per_interval: float,
) -> None:
    rng = random.Random(7)
    interval, visits = 60.0, 40
    rate = rate_per_interval / interval
    ours, naive = [], []
    for _ in range(400):
        h = _observe(rng, rate, interval, visits)
        estimate = change_rate(h.visits - 1, h.changes, h.observed)
        assert estimate is not None
        ours.append(estimate)
        naive.append(h.changes / h.observed)
    # Changes between two visits are seen as one: X/T falls short as the rate grows;
    # the estimator stays within 10% of the truth.
    assert statistics.mean(ours) == pytest.approx(rate, rel=0.1)
    if rate_per_interval >= 1.0:
        assert statistics.mean(naive) < 0.7 * rate


def test_no_interval_no_estimate_and_a_history_adds_up() -> None:
    h = History()
    h.visited(10.0, changed=True)  # a first visit cannot see a change
    assert (h.visits, h.changes, h.observed) == (1, 0, 0.0)
    assert change_rate(h.visits - 1, h.changes, h.observed) is None
    h.visited(70.0, changed=True)
    h.visited(100.0, changed=False)
    assert (h.visits, h.changes, h.observed, h.last_visit) == (3, 1, 90.0, 100.0)
    assert change_rate(2, 0, 90.0) == 0.0


def test_freshness_at_the_edges() -> None:
    assert freshness(0.0, 1.0) == 1.0
    assert freshness(1.0, 0.0) == 0.0
    # Asked as often as it changes: (1 - 1/e).
    assert freshness(0.01, 0.01) == pytest.approx(1 - math.exp(-1))


def test_the_optimal_allocation_beats_uniform_and_proportional_on_the_budget() -> None:
    rng = random.Random(3)
    rates = [10 ** rng.uniform(-6, -1) for _ in range(5000)]
    budget = 5.0
    best = allocate(rates, [1.0] * len(rates), budget)
    alike = [budget / len(rates)] * len(rates)
    prop = proportional(rates, budget)
    for freqs in (best, alike, prop):
        assert sum(freqs) == pytest.approx(budget, rel=1e-6)

    def mean_freshness(freqs: list[float]) -> float:
        return statistics.mean(freshness(r, f) for r, f in zip(rates, freqs, strict=True))

    assert mean_freshness(best) > mean_freshness(alike) > mean_freshness(prop)
    # The fastest pages, beyond keeping fresh, are left alone; slower ones get more.
    fastest = max(range(len(rates)), key=rates.__getitem__)
    assert best[fastest] == 0.0


def test_weights_and_floors() -> None:
    rates = [1e-3, 1e-3, 1e-4]
    heavy = allocate(rates, [10.0, 1.0, 1.0], 1e-3)
    assert heavy[0] > heavy[1]
    floored = allocate(rates, [1.0] * 3, 1e-3, floor=1e-4)
    assert min(floored) >= 1e-4 and sum(floored) == pytest.approx(1e-3)
    # Nothing seen to change: the budget is spread evenly.
    assert allocate([0.0, 0.0], [1.0, 1.0], 2.0) == pytest.approx([1.0, 1.0])
    assert allocate([], [], 1.0) == [] and proportional([], 1.0) == []


def test_a_page_never_seen_to_change_is_planned_on_half_a_change_not_none() -> None:
    h = History()
    for at in (0.0, 3600.0, 7200.0):
        h.visited(at, changed=False)
    # Cho and Garcia-Molina's estimate is 0 (never worth a visit again); planned on
    # half a change, about 0.5 / T: the longer it stays the same, the longer it waits.
    assert change_rate(2, 0, 7200.0) == 0.0
    rate = estimate(h)
    assert rate is not None and 0.4 / 7200 < rate < 0.6 / 7200 * 2
    h.visited(14_400.0, changed=False)
    later = estimate(h)
    assert later is not None and later < rate
    assert estimate(History()) is None


def test_a_ceiling_passes_what_a_page_cannot_take_to_the_others() -> None:
    rates = [1e-6, 1e-3, 1e-3]
    capped = allocate(rates, [1.0] * 3, 0.01, ceiling=0.004)
    assert max(capped) <= 0.004 + 1e-12
    assert sum(capped) == pytest.approx(0.01, rel=1e-3)


def test_a_page_is_asked_at_most_useful_times_its_rate_and_the_rest_is_left_unspent() -> None:
    """A budget larger than the pages need went on every page at the ceiling: a site of
    pages that never change asked every one of them each --min-interval, for ever
    (QA). Capped at ``useful`` times its own rate, what no page can take is unspent;
    a page whose rate is not its own (seen once, pooled) takes the ceiling still."""
    rates = [1e-6, 1e-5, 1e-3]
    freqs = allocate(rates, [1.0] * 3, 1.0, ceiling=1 / 60, useful=10)
    # (Rates are solved to within 1%.)
    assert freqs[0] == pytest.approx(1e-5, rel=0.01) and freqs[1] == pytest.approx(1e-4, rel=0.01)
    assert freqs[2] == pytest.approx(1e-2, rel=0.01)
    seen_once = allocate(rates, [1.0] * 3, 1.0, ceiling=1 / 60, useful=10, own=[False, True, True])
    assert seen_once[0] == pytest.approx(1 / 60) and seen_once[1] == pytest.approx(1e-4, rel=0.01)
    # A binding budget is spent as before: the cap frees what a slow page would take.
    tight = allocate(rates, [1.0] * 3, 2e-3, ceiling=1 / 60, useful=10)
    assert sum(tight) == pytest.approx(2e-3, rel=1e-3) and tight[0] <= 1.01e-5
