"""A host that a newcomer gained but its old owner never handed over before it died
(``--replicas 2``): the copy of the host's frontier and history is on the old owner's
successor, which is not the host's owner under the ring without the dead peer. The
holder hands the copy to the owner, and the owner waits for it before fetching the
host: no page the dead owner fetched is fetched again, and none it had pending is lost.
Seeds as in test_churn_memory.py (``UBIPY_SEEDS``)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from tests.cluster.harness import cluster, host_of, one_view
from tests.cluster.test_churn_memory import SEEDS
from ubipy.ring import Ring
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth

WEB = SyntheticWeb(WebSpec(seed=8, hosts=40, pages_per_host=12, latency=0.05, cross_link_ratio=0.6))
TRUTH = ground_truth(WEB, [WEB.seed_url()])
DELAY = 1.0


@SEEDS
async def test_a_host_its_dead_owner_never_handed_over_comes_from_its_copy(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, seed: int
) -> None:
    """Peers 0, 1, 2 (two replicas) crawl; peer 3 joins, and nothing peer d (the one
    losing most hosts to it) sends peer 3 arrives, so d's hand-offs to it are not taken;
    d dies. The hosts that moved from d to peer 3 were held by d from the join on (they
    were no longer its own): every request for one of their pages after the first is a
    page fetched twice. And the crawl finds every page."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        peers = await c.start_joined(3, replicas=2, delay=DELAY)
        peers[0].peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(120):
            await c.server.log.wait_for_count(len(TRUTH) // 3)
        # Joining through all three: the answers of one may not arrive (d's).
        addresses = [p.address for p in peers]
        newcomer = await c.start(3, join_addresses=addresses, replicas=2, delay=DELAY)
        before = Ring([p.peer_id for p in peers])
        after = Ring([*before.members, newcomer.peer_id])

        def moved(sim_id: str) -> list[str]:
            return [
                h
                for h in WEB.host_names()
                if before.owner(h) == sim_id and after.owner(h) == newcomer.peer_id
            ]

        d = max(peers, key=lambda p: len(moved(p.peer_id)))
        hosts = set(moved(d.peer_id))
        assert hosts
        # Before anything reaches the newcomer: nothing d sends it arrives.
        c.net.set_link(d.host, host_of(3), loss=1.0, one_way=True)
        everyone = [*peers, newcomer]
        with trio.fail_after(60):
            await c.wait_until(lambda: one_view(everyone))
            await d.wait_count(rf"hand-off of \S+ to {newcomer.peer_id} not taken", 1)
        died = trio.current_time()
        await c.kill(d)
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
        troubles = [t for p in c.running for t in p.troubles]
    referee = Referee(c.server.log, WEB)
    twice = [r for r in referee.duplicates() if r.host in hosts]
    assert twice == [], (died, [(r.start, r.peer, referee.url_of(r)) for r in twice])
    assert referee.overlaps() == []
    assert troubles == []
