"""How often each page is asked again in a continuous crawl (``--refresh``; seed 001's
update policies). No I/O and no clock: histories in, revisit frequencies out.

The yardstick is Cho and Garcia-Molina's freshness: the fraction of time a stored copy
equals the live page. A page that changes as a Poisson process of rate ``λ``, asked
again every ``1/f`` seconds, is fresh on average ``F(λ, f) = (f/λ)(1 - e^(-λ/f))`` of
the time ("Synchronizing a database to improve freshness", SIGMOD 2000).

* Its rate is estimated from what the crawler saw: ``n`` intervals between visits
  covering ``T`` seconds, ``X`` of which found the page changed. Changes between two
  visits are not seen one by one, so ``X / T`` underestimates the rate; Cho and
  Garcia-Molina's estimator for such incomplete histories ("Estimating frequency of
  change", TOIT 2003) is ``-log((n - X + 0.5) / (n + 0.5)) * n / T``
  (:func:`change_rate`).
* Given every page's rate and a budget of ``B`` requests a second, the freshness-optimal
  allocation maximises ``Σ w_i F(λ_i, f_i)`` under ``Σ f_i = B``: with Lagrange's
  multiplier ``μ``, ``w_i ∂F/∂f = μ``, that is ``g(λ_i/f_i) = μ λ_i / w_i`` with
  ``g(x) = 1 - (1 + x) e^(-x)``. A page changing so often that no affordable frequency
  keeps it fresh (``μ λ / w ≥ 1``) is left to its floor: the papers' surprise that
  revisiting in proportion to the rate can do worse than revisiting all alike
  (:func:`allocate`).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from ubipy.config import RefreshPolicy

__all__ = [
    "History",
    "RefreshPolicy",
    "allocate",
    "change_rate",
    "estimate",
    "freshness",
    "proportional",
]


@dataclass(slots=True)
class History:
    """What the crawler saw of one page."""

    visits: int = 0
    # Visits that found it changed since the visit before (not the first visit).
    changes: int = 0
    # Seconds from its first visit to its last.
    observed: float = 0.0
    last_visit: float = 0.0

    def visited(self, at: float, changed: bool) -> None:
        if self.visits:
            self.observed += max(0.0, at - self.last_visit)
            self.changes += changed
        self.visits += 1
        self.last_visit = at


def change_rate(intervals: int, changes: float, observed: float) -> float | None:
    """Cho and Garcia-Molina's estimate of a Poisson change rate from ``intervals``
    visits-to-visit intervals over ``observed`` seconds, ``changes`` of which saw a
    change; None without an interval to go by."""
    if intervals < 1 or observed <= 0:
        return None
    x = min(changes, intervals)
    return -math.log((intervals - x + 0.5) / (intervals + 0.5)) * intervals / observed


def estimate(history: History) -> float | None:
    """A page's change rate from its history, for planning: Cho and Garcia-Molina's
    estimate, except that a page never seen to change counts half a change. Their
    estimate is then 0, and a page at rate 0 is never worth a visit: planned on it,
    every page seen twice unchanged would wait for the floor (30 days), and the ones
    that do change, slowly, would go stale (measured: freshness 0.79 against
    uniform's 0.90). Half a change over ``T`` seconds is about ``0.5 / T``: the longer
    a page stays the same, the longer it is left."""
    intervals = history.visits - 1
    return change_rate(intervals, max(history.changes, 0.5), history.observed)


def freshness(rate: float, frequency: float) -> float:
    """Expected freshness of a page of change ``rate`` asked at ``frequency``."""
    if rate <= 0:
        return 1.0
    if frequency <= 0:
        return 0.0
    x = rate / frequency
    return (1 - math.exp(-x)) / x


def _g(x: float) -> float:
    return 1 - (1 + x) * math.exp(-x)


# g's inverse by table: x on a log grid from 1e-4 to 60, where g is ~x^2/2 to ~1.
_XS = [10 ** (-4 + 5.778 * i / 4000) for i in range(4001)]
_GS = [_g(x) for x in _XS]


def _g_inverse(y: float) -> float:
    i = bisect_left(_GS, y)
    if i <= 0:
        return math.sqrt(2 * y)  # g(x) ~ x^2 / 2 near 0
    if i >= len(_GS):
        return _XS[-1]
    g0, g1 = _GS[i - 1], _GS[i]
    return _XS[i - 1] + (_XS[i] - _XS[i - 1]) * (y - g0) / (g1 - g0)


def allocate(
    rates: Sequence[float],
    weights: Sequence[float],
    budget: float,
    floor: float = 0.0,
    ceiling: float = math.inf,
    useful: float = math.inf,
    own: Sequence[bool] | None = None,
) -> list[float]:
    """Revisit frequencies (per second) maximising weighted freshness, summing to
    ``budget`` at most: each at least ``floor`` (which comes off the budget first), at
    most ``ceiling``, and, for a page whose rate is its ``own`` (all if None; not one
    pooled for a page seen once), at most ``useful`` times that rate. What a page
    cannot take goes to the others, and what none can is left unspent."""
    n = len(rates)
    if n == 0:
        return []
    spare = budget - floor * n
    if spare <= 0:
        return [budget / n] * n
    ceiling = max(0.0, ceiling - floor)

    def cap_of(rate: float, capped: bool) -> float:
        if not capped or rate <= 0:
            return ceiling
        return min(ceiling, max(0.0, useful * rate - floor))

    # Pages alike get the same answer: solved per (rate, weight) rounded to 1% (an
    # estimate from a few visits is no finer), counted.
    capped = [True] * n if own is None else own
    keys = [(_rounded(r), _rounded(w), c) for r, w, c in zip(rates, weights, capped, strict=True)]
    kinds: dict[tuple[float, float, bool], int] = {}
    for key in keys:
        kinds[key] = kinds.get(key, 0) + 1

    def spend(mu: float) -> dict[tuple[float, float, bool], float]:
        out = {}
        for rate, weight, c in kinds:
            y = mu * rate / weight if weight > 0 else math.inf
            f = 0.0 if rate <= 0 or y >= 1 else rate / _g_inverse(y)
            out[rate, weight, c] = min(f, cap_of(rate, c))
        return out

    def total(freqs: dict[tuple[float, float, bool], float]) -> float:
        return sum(f * kinds[k] for k, f in freqs.items())

    # Σ f(μ) falls as μ grows: bisect on log μ.
    lo, hi = 1e-12, 1e12
    for _ in range(64):
        mid = math.sqrt(lo * hi)
        if total(spend(mid)) > spare:
            lo = mid
        else:
            hi = mid
    freqs = spend(hi)
    used = total(freqs)
    # Nothing worth refreshing (no page seen to change): the spare goes evenly.
    extra = (spare - used) / n if used < spare * 0.999 else 0.0
    return [floor + min(extra + freqs[key], cap_of(key[0], key[2])) for key in keys]


def _rounded(value: float) -> float:
    """``value`` to within 1% (0 and below stay as they are)."""
    return value if value <= 0 else math.exp(round(math.log(value) * 100) / 100)


def proportional(rates: Sequence[float], budget: float, floor: float = 0.0) -> list[float]:
    """Frequencies in proportion to the rates (each at least ``floor``)."""
    n = len(rates)
    spare = budget - floor * n
    whole = sum(rates)
    if n == 0 or spare <= 0 or whole <= 0:
        return [budget / n] * n if n else []
    return [floor + spare * r / whole for r in rates]
