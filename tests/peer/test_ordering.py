"""The crawl order's part in the crawl loop: OPIC's cash, the credits a link found again
brings (in the shard, and only to URLs still waiting), partial PageRank."""

from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from ubipy.config import BoundsConfig, CrawlConfig, CrawlOrder
from ubipy.fetch import Entry
from ubipy.peer.commits import Commits
from ubipy.peer.ordering import Ordering, pagerank
from ubipy.store import Admission, NewURL, Shard
from ubipy.synthweb import pagerank as exact_pagerank


def _url(n: int, score: float = 0.0, host: str = "a.test") -> NewURL:
    return NewURL(n, f"http://{host}/{n}", host, 1, score)


def test_a_pages_damped_cash_is_split_evenly_over_its_links(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    config = CrawlConfig(data_dir=tmp_path, bounds=BoundsConfig(order=CrawlOrder.OPIC))
    ordering = Ordering(config, shard, lambda: None, Commits())  # type: ignore[arg-type,return-value]
    links = [_url(n) for n in range(4)]
    shared = ordering.scored(Entry(9, 9, "http://a.test/9", 0, score=2.0), links)
    # Its cash, damped as PageRank's (0.85), over its 4 links.
    assert [u.score for u in shared] == pytest.approx([0.425] * 4)
    assert [u.fp for u in shared] == [0, 1, 2, 3]
    assert ordering.seed_score == 1.0
    # Breadth-first: no cash at all.
    bfs_config = CrawlConfig(data_dir=tmp_path, bounds=BoundsConfig(order=CrawlOrder.BFS))
    bfs = Ordering(bfs_config, shard, lambda: None, Commits())  # type: ignore[arg-type,return-value]
    assert bfs.scored(Entry(9, 9, "", 0, score=2.0), links) == links and bfs.seed_score == 0.0
    shard.close()


def test_a_link_found_again_adds_its_cash_to_a_url_still_waiting(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    shard.rank_pending()
    admission = Admission(shard)
    with shard.transaction():
        rows = admission.admit([_url(1, 0.5), _url(2, 0.25), _url(1, 0.125)])
    # One row each; the same URL twice in one commit: both shares.
    assert sorted((r.fp, r.score) for r in rows) == [(1, 0.625), (2, 0.25)]
    assert admission.take_credits() == []
    with shard.transaction():
        assert admission.admit([_url(1, 0.375), _url(2, 1.0)]) == []
    assert admission.take_credits() == [("a.test", 1, 0.375), ("a.test", 2, 1.0)]
    best = shard.best_for_host("a.test", 10)
    assert [(r.fp, r.score) for r in best] == [(2, 1.25), (1, 1.0)]
    # A URL no longer waiting takes no cash.
    shard.mark_skipped([(2, "robots")])
    with shard.transaction():
        admission.admit([_url(2, 5.0)])
    assert [(r.fp, r.score) for r in shard.best_for_host("a.test", 10)] == [(1, 1.0)]
    shard.close()


def test_a_link_to_a_page_fetched_here_credits_nothing(tmp_path: Path) -> None:
    # The scheduler's windows and the shard are left alone: most links found again on a
    # site lead to pages fetched already (its menus), and each credit was an UPDATE.
    shard = Shard.open(tmp_path)
    shard.rank_pending()
    admission = Admission(shard)
    with shard.transaction():
        admission.admit([_url(1), _url(2)])
    admission.fetched([1, 7])  # 7: never admitted here, nothing to mark
    with shard.transaction():
        assert admission.admit([_url(1, 0.5), _url(2, 0.25)]) == []
    assert admission.take_credits() == [("a.test", 2, 0.25)]
    # A failed commit forgets the marks with the cache: the next link is credited as
    # before, and the shard's UPDATE (state = 0 only) decides.
    admission.rollback()
    with shard.transaction():
        assert admission.admit([_url(1, 0.5)]) == []
    assert admission.take_credits() == [("a.test", 1, 0.5)]
    shard.close()


def test_partial_pagerank_matches_the_exact_one_on_a_known_graph() -> None:
    # 0 -> 1, 2; 1 -> 2; 2 -> 0; 3 -> 2; 4 waits (dangling: linked, not fetched).
    out = [[1, 2], [2], [0], [2, 4], []]
    links = {i: array("q", targets) for i, targets in enumerate(out) if targets}
    ours = pagerank(links, rounds=200)
    exact = exact_pagerank(out).scores
    n = len(out)
    for page in range(n):
        assert ours[page] == pytest.approx(exact[page] * n, rel=1e-6)
    # Warm-started from the answer, a few rounds keep it.
    again = pagerank(links, ours, rounds=3)
    assert all(again[p] == pytest.approx(ours[p], rel=1e-9) for p in ours)
    assert pagerank({}) == {}
