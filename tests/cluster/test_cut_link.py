"""One cut link between two members, for the whole crawl (``--replicas 2``): both stay
in the ring (the third sees each alive, and so, by indirect probes, do they), and what
they send each other goes by the third (net/relays.py). Without it, their URL batches
never arrived and the hosts whose owner and successor they are got no request: each
waited for a barrier its successor never answered. Seeds as in test_churn_memory.py
(``UBIPY_SEEDS``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from tests.cluster.harness import cluster, host_of, one_view
from tests.cluster.test_churn_memory import SEEDS
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth

WEB = SyntheticWeb(
    WebSpec(seed=12, hosts=30, pages_per_host=10, latency=0.05, cross_link_ratio=0.6)
)
TRUTH = ground_truth(WEB, [WEB.seed_url()])


@SEEDS
@pytest.mark.parametrize(
    "cut", ["once all have met", "silently", "by refusals", "before 0 and 1 meet", "then 0 leaves"]
)
async def test_two_members_that_cannot_reach_each_other_crawl_on_through_a_third(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, seed: int, cut: str
) -> None:
    """Peers 0 and 1 cannot reach each other; peer 2 reaches both. Cut once all three
    have met, or before 1 joins (through 2): then 0 and 1 never hear each other say
    they take RELAY frames (a review: nothing was relayed between them); or cut once
    met and 0 leaves (SIGTERM) 3 s into the crawl: it hands 1 its hosts by way of 2
    (it handed them to 2, which refused them, until its leave ran out of time, and a
    page or two were never crawled: a review). ``silently``: their connections stay
    open and lose what is sent on them, as behind a firewall that drops; relaying
    starts within seconds, once each sees the other answer only through the third
    (it started when TCP gave up on the connections, a minute later). ``by refusals``:
    their dials to each other are refused (a firewall's REJECT), which alone looks
    like a peer that is down; the probes through the third show it is not (nothing
    was relayed, and the crawl never ended)."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        if cut != "before 0 and 1 meet":
            peers = await c.start_joined(3, replicas=2, delay=0.2)
            c.net.cut_link(
                host_of(0), host_of(1), silently=cut == "silently", reject=cut == "by refusals"
            )
        else:
            first = await c.start(0, replicas=2, delay=0.2)
            third = await c.start(2, join=first, replicas=2, delay=0.2)
            with trio.fail_after(60):
                await c.wait_until(lambda: one_view([first, third]))
            c.net.cut_link(host_of(0), host_of(1))
            peers = [first, await c.start(1, join=third, replicas=2, delay=0.2), third]
            with trio.fail_after(120):
                await c.wait_until(lambda: one_view(peers))
        carrier = peers[2]
        carrier.peer.seed_urls([WEB.seed_url()])
        if cut == "silently":
            with trio.fail_after(15):
                await c.wait_until(lambda: carrier.peer.status().frames_carried > 0)
        if cut == "then 0 leaves":
            await trio.sleep(3)  # virtual: the crawl under way
            assert await c.stop(peers[0])
            peers = peers[1:]
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
        alive = [p.peer.membership.alive_ids() for p in peers]
        relayed = carrier.peer.status().frames_carried
        troubles = [t for p in peers for t in p.troubles]
    referee = Referee(c.server.log, WEB)
    assert alive == [frozenset(p.peer_id for p in peers)] * len(peers)
    assert relayed > 0
    assert referee.duplicates() == []
    assert referee.overlaps() == []
    assert troubles == []


@SEEDS
@pytest.mark.parametrize("how", ["silently", "by refusals"])
async def test_a_link_cut_and_healed_over_and_over_loses_and_repeats_nothing(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, seed: int, how: str
) -> None:
    """The link between peers 0 and 1 of four flaps: cut for 5 s, whole for 3, from
    the seed on, for the whole crawl (``--replicas 2``). Each cut is seen afresh
    (connections dialled during the last heal are cut again, silently or by a REJECT's
    refusals), and frames go by relay then directly again: every page fetched once,
    no host by two peers at once."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        peers = await c.start_joined(4, replicas=2, delay=0.2)
        cuts = 0

        async def flap() -> None:
            nonlocal cuts
            while True:
                cuts += 1
                a, b = host_of(0), host_of(1)
                c.net.cut_link(a, b, silently=how == "silently", reject=how == "by refusals")
                await trio.sleep(5)
                c.net.heal()
                await trio.sleep(3)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(flap)
            peers[3].peer.seed_urls([WEB.seed_url()])
            with trio.fail_after(600):
                await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
            nursery.cancel_scope.cancel()
        relayed = sum(p.peer.status().frames_relayed for p in peers[:2])
        troubles = [t for p in peers for t in p.troubles]
    referee = Referee(c.server.log, WEB)
    assert cuts >= 2  # healed and cut again during the crawl
    assert relayed > 0
    assert referee.duplicates() == []
    assert referee.overlaps() == []
    assert troubles == []
