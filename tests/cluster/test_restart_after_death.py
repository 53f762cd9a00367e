"""A peer restarted after another died (kill -9, found dead by the rest), on the
in-memory network under the autojump clock: the hosts it holds for the dead one wait
for that one's fence and grace, as those of a death it saw do, not for the hold's
whole limit. Before, the restarted peer held every host the last ring gave the dead
one until the limit (three minutes), the death the others told it of notwithstanding
(QA: 158-175 s, for a peer dead 40-50 s before).

Seeds as in test_churn_memory: one by default, ``UBIPY_SEEDS=N`` (or ``=3,17``) for more."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from tests.cluster.harness import SimPeer, cluster
from tests.cluster.test_churn_memory import seeds
from ubipy.membership import MemberState
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth

WEB = SyntheticWeb(WebSpec(seed=6, hosts=40, pages_per_host=12, latency=0.05, cross_link_ratio=0.6))
TRUTH = ground_truth(WEB, [WEB.seed_url()])
DELAY = 1.0


def _dead_to(sim: SimPeer, peer_id: str) -> bool:
    member = sim.peer.membership.member(peer_id)
    return member is not None and member.state is MemberState.DEAD


def _waits_for(sim: SimPeer, peer_id: str) -> bool:
    return any(peer_id in hold.waiting for hold in sim.peer.handoff._holds)


@pytest.mark.parametrize("replicas", [1, 2])
@pytest.mark.parametrize("seed", seeds())
async def test_a_peer_restarted_after_a_death_waits_for_the_dead_one_no_longer_than_its_grace(
    replicas: int, seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Peers 0, 1, 2 crawl; 2 is killed and found dead; 1 is stopped and started
    again. Its holds on 2's hosts end within 2's grace and fence (and half a minute),
    well before the hold's limit; no host is asked by two at once, and with two
    replicas the crawl ends whole (with one, what only 2 held is lost with it)."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        p = await c.start_joined(3, replicas=replicas, delay=DELAY)
        p[0].peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(300):
            await c.server.log.wait_for_count(len(TRUTH) // 5)
        dead = p[2].peer_id
        await c.kill(p[2])
        with trio.fail_after(60):
            await c.wait_until(lambda: all(_dead_to(sim, dead) for sim in p[:2]))
        assert await c.stop(p[1])
        watched = await c.start(1, join=p[0], replicas=replicas, delay=DELAY)
        handoff = watched.peer.handoff
        waited = max(handoff._grace, handoff._fence) + 30.0
        assert waited < handoff._hold_limit / 2
        with trio.fail_after(30):
            await c.wait_until(lambda: _dead_to(watched, dead))
        with trio.fail_after(waited):
            await c.wait_until(lambda: not _waits_for(watched, dead))
        if replicas > 1:
            with trio.fail_after(600):
                await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
        else:
            with trio.fail_after(600):
                for sim in (p[0], watched):
                    await sim.peer.crawler.wait_idle()
    assert Referee(c.server.log, WEB).overlaps() == []
