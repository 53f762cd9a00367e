"""A peer killed and restarted at once, before anyone notices, on a new address (the
harness gives a restart a new port, as a new pod IP or DHCP lease would), on the
in-memory network under the autojump clock.

Its incarnation is not kept across restarts, so both lives announce themselves at
incarnation 0, and the others take an ALIVE only at a strictly newer one: they kept
the old address, probed it, and declared the peer dead some 5 s after it was back; its
hosts moved away and back, and it was out of the ring until its next push-pull (up to
22 s). ``UBIPY_SEEDS`` picks the seeds, as in test_churn_memory.py."""

from __future__ import annotations

import re
from pathlib import Path

import trio
import trio.testing

from tests.cluster.harness import cluster
from tests.cluster.test_churn_memory import SEEDS
from ubipy.membership import MemberState
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth

WEB = SyntheticWeb(
    WebSpec(seed=21, hosts=48, pages_per_host=10, latency=0.05, cross_link_ratio=0.6)
)
TRUTH = ground_truth(WEB, [WEB.seed_url()])
GAP = 0.5  # between the kill and the restart: well under a probe round


@SEEDS
async def test_a_peer_restarted_on_a_new_address_is_never_declared_dead(
    seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Four peers with two replicas crawl; once a quarter is fetched peer 1 is killed
    and started again on a new port 0.5 s later. Every other peer learns the new
    address, none suspects it or declares it dead, and the crawl ends with no host asked
    by two peers at once and no page fetched twice beyond those in flight at the kill."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        peers = await c.start_joined(4, replicas=2, delay=1.0)
        peers[0].peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(300):
            await c.server.log.wait_for_count(len(TRUTH) // 4)
        victim = peers[1]
        old = victim.address
        await c.kill(victim)
        killed = trio.current_time()
        await trio.sleep(GAP)
        back = await c.start(1, join=peers[0], replicas=2, delay=1.0)
        assert back.address != old
        others = [p for p in peers if p is not victim]

        def learnt() -> bool:
            views = [p.peer.membership.member(back.peer_id) for p in others]
            return all(v is not None and v.address == back.address for v in views)

        with trio.fail_after(10):
            await c.wait_until(learnt)
        with trio.fail_after(900):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
        for p in others:
            view = p.peer.membership.member(back.peer_id)
            assert view is not None and view.state is MemberState.ALIVE
            assert view.address == back.address
        accused = re.compile(rf"member {back.peer_id} (suspect|dead)")
        accusations = [line for p in others for line in p.lines if accused.search(line)]
        if accusations:
            c.save_logs(tmp_path / "logs")
        assert accusations == []
        # Its outbids told to its previous life's address were relayed when no dial
        # there answered, and said as "cannot reach <its own id>" (QA).
        assert not any(f"cannot reach {back.peer_id}" in line for line in back.lines)
    ref = Referee(c.server.log, WEB)
    in_flight = sum(1 for r in ref.requests if r.start < killed <= r.end)
    assert ref.overlaps() == []
    assert len(ref.duplicates()) <= in_flight
