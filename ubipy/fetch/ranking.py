"""Crawl order inside the politeness scheduler (``--order``, docs/order.md).

Politeness decides *when* a host may be asked again; the order decides, among the
hosts whose time has come, which goes next, and which of its URLs it gets:

* ``bfs``: hosts in the order they come due, a host's URLs oldest first;
* ``opic`` and ``pagerank``: the host holding the highest-scored URL first, and a
  host's URLs by score (OPIC cash, partial PageRank), oldest first among equals;
* ``big-site-first``: the host with the most URLs waiting first, oldest first within.

A host's window in memory is small (``host_window``, 64 by default), so the best of
it is found by a scan rather than a heap, and a URL's score can rise in place (a link
to it found again brings more cash: :func:`credit`) without a heap to repair. What
rises on disk is seen at the window's next refill, which loads the host's best.

No I/O and no clock, as the scheduler.
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Mapping
from typing import Protocol, TypeVar

from ubipy.config import CrawlOrder


class Scored(Protocol):
    @property
    def fp(self) -> int: ...

    @property
    def score(self) -> float: ...


E = TypeVar("E", bound=Scored)

# A retried or abandoned URL goes first on its host, whatever its score.
FIRST = math.inf


def score_of(entry: E, credit: Mapping[int, float]) -> float:
    """An entry's score with what was credited to it since it was loaded."""
    extra = credit.get(entry.fp, 0.0)
    return FIRST if extra == FIRST else entry.score + extra


def pop_best(queue: deque[E], credit: dict[int, float]) -> E:
    """Take the highest-scored entry (the oldest among equals: the queue is kept in
    admission order), with its credit folded into its score."""
    best, best_score = 0, -math.inf
    for i, entry in enumerate(queue):
        s = score_of(entry, credit)
        if s > best_score:
            best, best_score = i, s
    entry = queue[best]
    del queue[best]
    extra = credit.pop(entry.fp, 0.0)
    if extra and extra != FIRST:
        entry = dataclasses.replace(entry, score=entry.score + extra)  # type: ignore[type-var]
    return entry


def best_score(queue: deque[E], credit: Mapping[int, float]) -> float:
    return max((score_of(e, credit) for e in queue), default=-math.inf)


def worst(queue: deque[E], credit: Mapping[int, float]) -> tuple[int, float]:
    """Where the lowest-scored entry is (the newest among equals), and its score."""
    at, low = -1, math.inf
    for i, entry in enumerate(queue):
        s = score_of(entry, credit)
        if s <= low:
            at, low = i, s
    return at, low


def host_priority(
    order: CrawlOrder, queue: deque[E], credit: Mapping[int, float], on_disk: int
) -> float:
    """How urgently a ready host should go next under ``order`` (higher first)."""
    if order is CrawlOrder.BIG_SITE_FIRST:
        return float(len(queue) + on_disk)
    return best_score(queue, credit)
