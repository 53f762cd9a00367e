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

import math
from collections import deque
from collections.abc import Mapping

from ubipy.fetch.slots import Entry

# A retried or abandoned URL goes first on its host, whatever its score.
FIRST = math.inf


def _scores(queue: deque[Entry], credit: Mapping[int, float]) -> list[float]:
    """Each entry's score with what was credited to it since it was loaded. Scores are
    finite, so adding FIRST makes FIRST. Built by a comprehension and searched by
    max/min/index: the window is scanned for every request and every host that comes
    due, and a loop of calls cost 6% of a crawl's CPU (bench/speed.py, py-spy)."""
    if not credit:
        return [e.score for e in queue]
    get = credit.get
    return [e.score + get(e.fp, 0.0) for e in queue]


def best(queue: deque[Entry], credit: Mapping[int, float]) -> tuple[int, float]:
    """Where the highest-scored entry is (the oldest among equals: the queue is kept in
    admission order), and its score; (-1, -inf) for an empty queue."""
    if not queue:
        return -1, -math.inf
    scores = _scores(queue, credit)
    top = max(scores)
    return scores.index(top), top


def pop_best(queue: deque[Entry], credit: dict[int, float], at: int = -1) -> Entry:
    """Take the highest-scored entry (the oldest among equals), with its credit folded
    into its score; ``at``: where it is, if known (see :func:`best`)."""
    if at < 0:
        at = best(queue, credit)[0]
    entry = queue[at]
    del queue[at]
    extra = credit.pop(entry.fp, 0.0) if credit else 0.0
    if extra and extra != FIRST:
        entry = entry._replace(score=entry.score + extra)
    return entry


def best_score(queue: deque[Entry], credit: Mapping[int, float]) -> float:
    return best(queue, credit)[1]


def worst(queue: deque[Entry], credit: Mapping[int, float]) -> tuple[int, float]:
    """Where the lowest-scored entry is (the newest among equals), and its score."""
    if not queue:
        return -1, math.inf
    scores = _scores(queue, credit)
    low = min(scores)
    scores.reverse()
    return len(scores) - 1 - scores.index(low), low
