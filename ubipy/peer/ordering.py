"""The crawl order's part in a peer's crawl loop (``--order``; the scheduler's part is
:mod:`ubipy.fetch.ranking`; docs/order.md says what each order does and costs).

* Loading a host's window from the shard: oldest first, or best first under a ranked
  order (what was asked and is not yet written as done is left out: it is still
  pending on disk).
* OPIC (Abiteboul, Preda and Cobena, 2003): seeds start with 1 of cash; a fetched
  page's cash is split evenly over the links it holds, found again or new, here or
  on another peer (the cash travels with the URL in the batch, and an owner adds up
  what arrives for a URL it knows), so a URL's priority does not depend on which peer
  found its links. What a page passes on is damped as PageRank's (DAMPING): passed
  whole, an endless chain of pages of one link each (a calendar's "next day")
  outbid the rest of its host for ever (QA: 1,080 requests on the chain in a minute,
  none of the site's 15 other pages).
* Partial PageRank (Cho, Garcia-Molina and Page, 1998): every ``pagerank_every``
  pages this peer computes PageRank over the graph it knows (the links of the pages
  it fetched; the pages waiting are dangling), warm-started from the last one, and
  gives its pending URLs their rank; between two computations, and for the links
  other peers find, a URL gets cash as under OPIC.
"""

from __future__ import annotations

import logging
import math
import time
from array import array
from collections.abc import Callable, Collection, Sequence

from ubipy.config import CrawlConfig, CrawlOrder
from ubipy.errors import StorageError
from ubipy.fetch import Entry, Scheduler
from ubipy.peer.commits import Commits
from ubipy.peer.refiltering import Loader, RankedLoader
from ubipy.store import FrontierRow, NewURL, Shard

__all__ = ["DAMPING", "Ordering", "pagerank"]

log = logging.getLogger(__name__)

# Seconds between tries at the index of pending URLs by score, while the shard refuses.
_INDEX_RETRY = 60.0

# PageRank's damping, and the share of its cash a page passes on under OPIC.
DAMPING = 0.85
# A recomputation starts from the last ranks, so a few rounds suffice.
ROUNDS = 20


def pagerank(
    links: dict[int, array[int]], start: dict[int, float] | None = None, rounds: int = ROUNDS
) -> dict[int, float]:
    """PageRank over ``links`` (page -> the pages it links to), scaled so that the
    average page holds 1; pages with no known links (those not fetched) are dangling
    and spread their rank evenly, as in the Brin and Page formulation."""
    index: dict[int, int] = {}
    for source, targets in links.items():
        index.setdefault(source, len(index))
        for t in targets:
            index.setdefault(t, len(index))
    n = len(index)
    if n == 0:
        return {}
    out = [(index[s], [index[t] for t in targets]) for s, targets in links.items() if targets]
    linked = {i for i, _ in out}
    dangling = [i for i in range(n) if i not in linked]
    rank = [1.0] * n
    if start:
        for fp, i in index.items():
            rank[i] = start.get(fp, 1.0)
    for _ in range(rounds):
        spread = (1 - DAMPING) + DAMPING * sum(rank[i] for i in dangling) / n
        new = [spread] * n
        for i, to in out:
            share = DAMPING * rank[i] / len(to)
            for t in to:
                new[t] += share
        rank = new
    return {fp: rank[i] for fp, i in index.items()}


class Ordering:
    """What the crawl loop asks of the order: a host's window, its seeds' and links'
    scores, and what a commit changed."""

    def __init__(
        self,
        config: CrawlConfig,
        shard: Shard,
        scheduler: Callable[[], Scheduler],
        commits: Commits,
    ) -> None:
        self.order = config.bounds.order
        self._every = config.bounds.pagerank_every
        self._shard = shard
        self._scheduler = scheduler
        self._unsettled = commits.unsettled
        # The failed tries of pending URLs, this run's and the last's (Commits.tries): a
        # URL loaded into a window goes on counting them, after a restart too.
        commits.tries.update(shard.tries())
        self._tries = commits.tries
        self._links: dict[int, array[int]] = {}
        self._ranks: dict[int, float] = {}
        self._since_rank = 0
        # Partial PageRank's cost: computations and the CPU seconds they took.
        self.rank_runs = 0
        self.rank_seconds = 0.0
        # When the index of pending URLs by score was last tried (made: inf).
        self._index_tried = -math.inf
        self._index()

    def _index(self) -> None:
        """Make the index a ranked order reads windows by, if it is not made: on a full
        disk, tried again a minute later (reading works without it, more slowly)
        rather than the peer failing to start."""
        if not self.order.ranked or time.monotonic() < self._index_tried + _INDEX_RETRY:
            return
        try:
            self._shard.rank_pending()
        except StorageError as exc:
            self._index_tried = time.monotonic()
            log.warning("the index of pending URLs by score waits for the shard: %s", exc)
            return
        self._index_tried = math.inf

    @property
    def loaders(self) -> tuple[Loader, RankedLoader | None]:
        """How a window is loaded (:meth:`load_window`), and how, under a ranked order,
        the entries past one loaded are (:meth:`load_after`)."""
        return self.load_window, self.load_after if self.order.ranked else None

    def load_window(self, host: str, after_seq: int, limit: int) -> list[Entry]:
        """Up to ``limit`` of a host's pending entries: the next ones in admission
        order after ``after_seq``, or, under a ranked order, its best."""
        if not self.order.ranked:
            rows = self._shard.pending_for_host(host, after_seq, limit)
            return [self._entry(r) for r in rows]
        # Fewer than ``limit`` must mean the disk holds no more (the scheduler counts
        # on it): ask for as many more as may be left out.
        asked = self._unsettled()
        return self.load_after(host, None, limit + len(asked), asked)[:limit]

    def load_after(
        self, host: str, last: Entry | None, read: int, left_out: Collection[int]
    ) -> list[Entry]:
        """A host's pending entries in rank order past ``last`` (None: from its best):
        ``read`` of them read, those ``left_out`` left out."""
        self._index()
        after = None if last is None else (last.score, last.seq)
        rows = self._shard.best_for_host(host, read, after)
        return [self._entry(r) for r in rows if r.fp not in left_out]

    def _entry(self, row: FrontierRow) -> Entry:
        tried = self._tries.get(row.fp) if self._tries else None
        if tried is None:
            return Entry(row.fp, row.seq, row.url, row.depth, score=row.score)
        attempt, free = tried
        return Entry(row.fp, row.seq, row.url, row.depth, attempt, row.score, free=free)

    @property
    def seed_score(self) -> float:
        """A seed's score: OPIC's initial cash, under a ranked order."""
        return 1.0 if self.order.ranked else 0.0

    def scored(self, entry: Entry, found: Sequence[NewURL]) -> Sequence[NewURL]:
        """The links of a page just fetched, with their share of its score."""
        if not self.order.ranked or not found:
            return found
        if self.order is CrawlOrder.PAGERANK:
            self._links[entry.fp] = array("q", (u.fp for u in found))
            self._since_rank += 1
        share = DAMPING * entry.score / len(found)
        # Made by tuple.__new__: a named tuple's own __new__ is a Python call a link.
        new = tuple.__new__
        return [
            new(NewURL, (fp, url, host, depth, share, hops))
            for fp, url, host, depth, _, hops in found
        ]

    def committed(self, credits: Sequence[tuple[str, int, float]]) -> None:
        """A commit is on disk: the scores it credited reach the windows, and partial
        PageRank is recomputed when its time has come."""
        scheduler = self._scheduler()
        for host, fp, amount in credits:
            scheduler.credit(host, fp, amount)
        if self.order is CrawlOrder.PAGERANK and self._since_rank >= self._every:
            self._rerank(scheduler)

    def _rerank(self, scheduler: Scheduler) -> None:
        started = time.process_time()
        self._since_rank = 0
        self._ranks = pagerank(self._links, self._ranks)
        pending = {fp: r for fp, r in self._ranks.items() if fp not in self._links}
        try:
            self._shard.rescore(pending)
        except StorageError as exc:
            # After a commit that worked: the ranks on disk stay the last ones, and the
            # next commit tries again (a peer died of it before).
            log.warning("PageRank not saved: %s", exc)
            self._since_rank = self._every
        scheduler.rescore(pending)
        self.rank_runs += 1
        self.rank_seconds += time.process_time() - started
        log.debug(
            "PageRank over %d pages (%d fetched) in %.2f s",
            len(self._ranks),
            len(self._links),
            time.process_time() - started,
        )
