"""A continuous crawl (--recrawl) across a ring change: the hosts that move to a peer
that joins take their pages' revisit state with them, and the new owner refreshes
them on, at about the rate they were refreshed at before, with no page asked twice
in a row by two peers. The synthetic web's request log is the judge.

Before hosts took their revisit state with them, the old owner forgot a host's pages
when it handed the host over and the new owner knew them only as "fetched
elsewhere": two peers refreshed a web for half an hour, a third joined, and in the
three hours after the hosts that moved to it got no request at all (the others
1,260 to 2,160 each)."""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import trio
import trio.testing

from tests.cluster.harness import cluster, one_view
from ubipy.config import CrawlConfig, RecrawlConfig, RefreshPolicy
from ubipy.synthweb import SyntheticWeb, WebSpec

WEB = SyntheticWeb(WebSpec(seed=5, hosts=8, pages_per_host=6))
MIN_INTERVAL = 60.0
BEFORE = 1800.0  # the first pass, then refreshes
AFTER = 7200.0
# The refreshes before the join are counted over its last WINDOW seconds (the first
# pass is over by then); those after it from SETTLE seconds after it (the ring has
# settled and the hosts have moved).
WINDOW = 900.0
SETTLE = 300.0


def recrawl(cfg: CrawlConfig) -> CrawlConfig:
    return replace(
        cfg,
        recrawl=RecrawlConfig(
            recrawl=True,
            policy=RefreshPolicy.UNIFORM,
            rate=0.5,
            min_interval=MIN_INTERVAL,
            replan=30,
        ),
    )


async def test_the_pages_of_a_host_that_moves_are_refreshed_on_by_its_new_owner(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, WEB, seed=1) as c:
        a, b = await c.start_joined(2, tune=recrawl)
        a.peer.seed_urls([WEB.seed_url()])
        await trio.sleep(BEFORE)
        joined_at = trio.current_time()
        third = await c.start(2, join=a, tune=recrawl)
        with trio.fail_after(120):
            await c.wait_until(lambda: one_view([a, b, third]))
        await trio.sleep(AFTER)
        end = trio.current_time()
        ring = third.peer.handoff.ring
        moved = {h for h in WEB.host_names() if ring.owner(h) == third.peer_id}
        refreshed_by_third = set(third.peer.crawler.refresher._by_host)  # type: ignore[union-attr]
        log = [
            r
            for r in c.server.log
            if r.target_path not in ("/robots.txt", "/sitemap.xml") and r.method == "GET"
        ]
    by_page: defaultdict[tuple[str, str], list[tuple[float, str]]] = defaultdict(list)
    for r in log:
        by_page[(r.host, r.target_path)].append((r.start, r.peer))
    # The pages of the hosts that moved that were refreshed before (asked twice at
    # least; robots.txt's redirect target, a page that failed, are not refreshed).
    moved_pages = {
        page
        for page, asked in by_page.items()
        if page[0] in moved and sum(t < joined_at for t, _ in asked) >= 2
    }
    assert moved_pages, "no host that had pages moved to the new peer: another seed"
    assert {h for h, _ in moved_pages} <= refreshed_by_third
    for host in sorted({h for h, _ in moved_pages}):
        pages = [p for p in moved_pages if p[0] == host]
        asked = sorted(t for p in pages for t, _ in by_page[p])
        before = sum(joined_at - WINDOW <= t < joined_at for t in asked) / WINDOW
        after = sum(t >= joined_at + SETTLE for t in asked) / (end - joined_at - SETTLE)
        # Refreshed on, at about the rate before (the new peer's budget spread over
        # fewer pages: no slower).
        assert after >= 0.5 * before > 0, (host, before, after)
    for page in sorted(moved_pages):
        requests = sorted(by_page[page])
        later = [peer for t, peer in requests if t >= joined_at + SETTLE]
        # Every page, refreshed by its new owner alone once the host moved.
        assert len(later) >= 10 and set(later) == {third.peer_id}, (page, later)
        for (t0, p0), (t1, p1) in itertools.pairwise(requests):
            if p0 != p1:
                # Its old owner's last request and its new owner's first: no sooner
                # than a refresh would have come (asked twice in a row, not refreshed).
                assert t1 - t0 >= MIN_INTERVAL, (page, p0, t0, p1, t1)
                assert p1 == third.peer_id, (page, requests)
