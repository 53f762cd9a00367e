"""A continuous crawl (--recrawl) with one replica, when a peer dies for good: its
hosts' URLs died with it, and what links lead to them is all that finds them again.
Under --recrawl an unchanged page's links were never read again, so the survivor
never asked the dead peer's hosts again (QA: 2 minutes on, not one request to them;
'crawled again from what links lead to' never came). Now each page is asked once in
full after the death and its links followed, changed or not. The synthetic web's
request log is the judge."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import trio
import trio.testing

from tests.cluster.harness import cluster
from ubipy.config import CrawlConfig, RecrawlConfig, RefreshPolicy
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth

WEB = SyntheticWeb(WebSpec(seed=5, hosts=8, pages_per_host=6))
TRUTH = ground_truth(WEB, [WEB.seed_url()])


def recrawl(cfg: CrawlConfig) -> CrawlConfig:
    return replace(
        cfg,
        recrawl=RecrawlConfig(
            recrawl=True, policy=RefreshPolicy.UNIFORM, rate=0.5, min_interval=60, replan=30
        ),
    )


async def test_a_dead_peer_s_hosts_are_found_again_from_the_links_that_lead_there(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, WEB, seed=3) as c:
        a, b, survivor = await c.start_joined(3, tune=recrawl)
        a.peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
        await trio.sleep(300)  # refreshed unchanged a few times: 304s, no links read
        ring = a.peer.handoff.ring
        lost = {h for h in WEB.host_names() if ring.owner(h) == b.peer_id}
        assert lost
        killed_at = trio.current_time()
        await c.kill(b)
        referee = Referee(c.server.log, WEB)
        lost_pages = {referee.url_of(r) for r in referee.requests if r.host in lost}

        def found_again() -> bool:
            asked = {
                referee.url_of(r)
                for r in Referee(c.server.log, WEB).requests
                if r.start > killed_at and r.peer in (a.peer_id, survivor.peer_id)
            }
            return lost_pages <= asked

        with trio.fail_after(1800):
            await c.server.log.wait_for(lambda log: found_again())
        print(f"\n{len(lost_pages)} pages found again {trio.current_time() - killed_at:.0f} s on")
        # Each survivor said the death without -v (QA: only "peers 2/3" said it).
        for p in (a, survivor):
            assert p.count(rf"WARNING .*member {b.peer_id} is dead") == 1
