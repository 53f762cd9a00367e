"""Peers started after another left for good, on the in-memory network under the
autojump clock: the one that left handed every host on before it went, so nobody
waits for it. Before, a peer started later (a restart, a newcomer, a whole cluster
started again) held every host it gained for the hold's whole limit, three minutes at
each ring change, waiting for a DONE the one that left had sent before it was there
(QA: most of the web unasked for minutes after each restart).

Seeds as in test_churn_memory: one by default, ``UBIPY_SEEDS=N`` (or ``=3,17``) for more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.cluster.harness import Cluster, SimPeer, cluster, host_of, one_view, with_peer_id
from tests.cluster.test_churn_memory import seeds
from ubipy.progress import peer_figures
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth

WEB = SyntheticWeb(WebSpec(seed=5, hosts=40, pages_per_host=12, latency=0.05, cross_link_ratio=0.6))
TRUTH = ground_truth(WEB, [WEB.seed_url()])
DELAY = 1.0
# Well inside the hold's limit (the fetch deadline and a minute: 180 s by default),
# and time enough for the join, the sweeps and a first request.
PROMPT = 30.0


async def _fetches(c: Cluster, sim: SimPeer, after: float) -> None:
    """Returns once ``sim`` has sent the web a request for a page since ``after``."""
    referee = Referee(c.server.log, WEB)
    await c.server.log.wait_for(
        lambda log: any(
            r.peer == sim.peer_id and r.start >= after and not referee.is_robots(r) for r in log
        )
    )


# Ids in the order of the peers' indexes: 0 is the smallest (the tie-breaker of a base).
IDS = ("0" * 16, "8" * 16, "f" * 16)


async def _crawling(c: Cluster, n: int, **options: Any) -> list[SimPeer]:
    """Peers 0 to ``n`` - 1 (ids from IDS) joined, seeded, a fifth of the web fetched."""
    p = await c.start_joined(n, delay=DELAY, **options)
    p[0].peer.seed_urls([WEB.seed_url()])
    with trio.fail_after(300):
        await c.server.log.wait_for_count(len(TRUTH) // 5)
    return p


def _ids_in_order(tmp_path: Path) -> None:
    for index, peer_id in enumerate(IDS):
        with_peer_id(tmp_path / f"p{index}", peer_id)


@pytest.mark.parametrize("after", ["restart", "newcomer", "whole cluster"])
@pytest.mark.parametrize("seed", seeds())
async def test_a_peer_started_after_a_leave_does_not_wait_for_the_one_that_left(
    after: str, seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Peers 0, 1, 2 crawl; 2 stops for good (a graceful leave: every host handed on).
    Then peer 1 is restarted, or a new peer 3 joins, or 0 and 1 are both stopped and
    started again (0 without --join, 1 joining it). The peer started asks the web for a
    page within 30 s, not after the three minutes of a hold waiting for 2; status says
    nothing is held for 2; the crawl ends whole, no host asked by two peers at once."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        p = await c.start_joined(3, delay=DELAY)
        assert p[0].peer.handoff._hold_limit >= 6 * PROMPT  # what would be waited out
        p[0].peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(300):
            await c.server.log.wait_for_count(len(TRUTH) // 5)
        assert await c.stop(p[2])
        # Its last progress line counts itself among the living (QA: "peers 0/4" at
        # the end of a whole cluster's stop, 2/3 here).
        assert peer_figures([p[2].peer]).peers_alive == 3
        with trio.fail_after(60):
            await c.wait_until(lambda: one_view(p[:2]))
        if after == "restart":
            assert await c.stop(p[1])
            started = trio.current_time()
            watched = await c.start(1, join=p[0], delay=DELAY)
            crawling = [p[0], watched]
        elif after == "newcomer":
            started = trio.current_time()
            watched = await c.start(3, join=p[0], delay=DELAY)
            crawling = [p[0], p[1], watched]
        else:
            for sim in p[:2]:
                sim.peer.stop()  # at once, as SIGTERM to both processes
            with trio.fail_after(60):
                for sim in p[:2]:
                    await sim.ended.wait()
            started = trio.current_time()
            watched = await c.start(0, delay=DELAY)
            crawling = [watched, await c.start(1, join=watched, delay=DELAY)]
        with trio.fail_after(PROMPT):
            await _fetches(c, watched, started)
        with trio.fail_after(PROMPT):
            await c.wait_until(lambda: one_view(crawling))
        for sim in crawling:
            assert p[2].peer_id not in str(sim.peer.handoff.holding(trio.current_time() + 10))
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
    referee = Referee(c.server.log, WEB)
    assert referee.overlaps() == []
    assert [t for sim in crawling for t in sim.troubles] == []


@pytest.mark.parametrize("seed", seeds())
async def test_a_peer_that_left_waits_for_the_hosts_it_handed_on_when_it_starts_first(
    seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Peer 0 leaves, handing its hosts (pages done among them) to 1 and 2; later 1 and 2
    stop at once, each refusing the other's hand-offs, and keep them. 0 is started again
    first, alone, and 1 and 2 join it: 0 fetches none of the pages 1 and 2 hold for it
    (seen in CI on real processes: pages fetched twice, the peer that left believing its
    last ring's hosts still its own), and the crawl ends whole."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        p = await c.start_joined(3, delay=DELAY)
        p[0].peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(300):
            await c.server.log.wait_for_count(len(TRUTH) // 3)
        assert await c.stop(p[0])
        assert p[0].peer.handoff.stats.hosts_out > 0  # what makes the case
        with trio.fail_after(60):
            await c.wait_until(lambda: one_view(p[1:]))
        for sim in p[1:]:
            sim.peer.stop()  # at once, as SIGTERM to both processes
        with trio.fail_after(60):
            for sim in p[1:]:
                await sim.ended.wait()
        first = await c.start(0, delay=DELAY)
        # Asked again for every page (an operator's seed file run again, links on the
        # hosts 0 kept, its outbox): those 1 and 2 hold are held till they are back.
        first.peer.seed_urls(sorted(TRUTH))
        await trio.sleep(10.0)  # the others are started a while later (the CI's: 1 s)
        again = [first] + [await c.start(i, join=first, delay=DELAY) for i in (1, 2)]
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
        assert [t for sim in again for t in sim.troubles] == []
    referee = Referee(c.server.log, WEB)
    assert referee.duplicates() == []
    assert referee.overlaps() == []


@pytest.mark.parametrize("seed", seeds())
async def test_a_newcomer_whose_only_holder_leaves_as_it_counts_it_crawls_on_alone(
    seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Peer 0 crawls alone; peer 1 joins it, and 0 is stopped as soon as it counts 1 in
    its base, before 1 asks again for the base (a cadence later): 1 waited for an
    answer from a peer gone, new to the cluster for good (a review's fuzzer: after
    ordinary stops and joins a whole cluster fetched nothing more). Now 0 tells the
    base as it counts 1, and again before its leave: 1 crawls the web to its end."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        first = await c.start(0, delay=DELAY)
        first.peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(300):
            await c.server.log.wait_for_count(len(TRUTH) // 5)
        newcomer = await c.start(1, join=first, delay=DELAY)
        with trio.fail_after(60):
            await c.wait_until(lambda: newcomer.peer_id in first.peer.lease.quorum.base)
        assert newcomer.peer.lease.quorum.pending  # what makes the case
        assert await c.stop(first)
        with trio.fail_after(PROMPT):
            await c.wait_until(lambda: newcomer.peer.crawler.paused is None)
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
        assert newcomer.peer.lease.quorum.base == {newcomer.peer_id}
        assert newcomer.troubles == []
    assert Referee(c.server.log, WEB).overlaps() == []


@pytest.mark.parametrize(("cut", "silently"), [(5.0, False), (40.0, False), (20.0, True)])
async def test_the_tie_breaker_of_two_stopped_during_a_cut_is_heard_to_leave_at_the_heal(
    cut: float, silently: bool, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Of two peers (two replicas), 0 holds the lease through a cut as the smaller id;
    it is stopped a second into it, its leave reaching nobody. It exited at once, and 1, the
    cut healed, waited for it for good: a member is dropped from the base on its
    leave, and 1 held no lease without it (a review's fuzzer). Now 0 says so, and sends
    its leave again till the heal (a minute at most): 1 takes it, and crawls on. A
    ``silently`` cut (a firewall that drops) swallowed the leave on a connection that
    stayed open, counted as told (a review): told now means 1 answered since."""
    _ids_in_order(tmp_path)
    async with cluster(tmp_path, WEB, seed=0) as c:
        p = await _crawling(c, 2, replicas=2)
        if silently:  # its connection to 1 stays open, and swallows what is sent
            c.net.cut_link(host_of(0), host_of(1), silently=True)
        else:
            c.net.partition([host_of(0)], [host_of(1)])
        # Stopped before it takes 1 for dead: one held dead is not waited for (a stop
        # after a partner's death would wait a minute); it learns 0 left when 0 is back.
        await trio.sleep(1.0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(c.stop, p[0])
            with trio.fail_after(30):  # its crawl drained, its leave tried once
                await p[0].wait_count("none of the peers that need this one", 1)
            await trio.sleep(cut)
            c.net.heal()
        assert p[0].exit == "stopped"
        assert p[0].count(f"{p[1].peer_id} told") == 1
        with trio.fail_after(PROMPT):
            await c.wait_until(lambda: p[1].peer.crawler.paused is None)
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
        assert p[1].peer.lease.quorum.base == {p[1].peer_id}
    assert Referee(c.server.log, WEB).overlaps() == []


async def test_a_peer_restored_with_a_base_naming_one_that_left_unheard_goes_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Three peers (two replicas); the network is cut {0} | {1, 2}. 2 leaves, heard by
    1, whose base {0, 1} then hangs on 0, the tie-breaker, cut off. 0 is stopped, its
    leave lost in the cut; 1 is killed. Healed, 1 comes back restoring {0, 1}, and 0
    and 2 come back new, joining it: 1 waited for 0 to count it, 0 for a holder to
    count it, for good (a review's triage of a fuzzer's seed). Now 0 says in its
    answers that it left: 1 drops it, as the lost leave would have, holds, and the
    others join it."""
    _ids_in_order(tmp_path)
    async with cluster(tmp_path, WEB, seed=0) as c:
        p = await _crawling(c, 3, replicas=2)
        c.net.partition([host_of(0)], [host_of(1), host_of(2)])
        assert await c.stop(p[2])
        with trio.fail_after(60):
            await c.wait_until(lambda: p[1].peer.lease.quorum.base == set(IDS[:2]))
            await c.wait_until(lambda: p[1].peer.crawler.paused is not None)
        assert await c.stop(p[0])
        await c.kill(p[1])
        c.net.heal()
        back = await c.start(1, replicas=2, delay=DELAY)
        assert back.peer.lease.quorum.restoring  # what makes the case
        again = [back] + [await c.start(i, join=back, replicas=2, delay=DELAY) for i in (0, 2)]
        with trio.fail_after(PROMPT):
            await c.wait_until(lambda: all(s.peer.crawler.paused is None for s in again))
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
    assert Referee(c.server.log, WEB).overlaps() == []


async def test_a_peer_back_after_a_leave_founds_no_base_beside_the_one_it_left(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """0 and 1 crawl; 0 leaves (1 goes on alone). The network is cut {0, 2} | {1}; 0
    comes back, and a new peer 2, each joining the other. Both new, 0 the smaller id,
    they founded a base of their own beside 1's and crawled beside it (a review's
    fuzzer). 0 knows the base it left: until 1 is in sight and says it left too, a
    base may be there, and nobody founds. Healed, 1 counts them both."""
    _ids_in_order(tmp_path)
    async with cluster(tmp_path, WEB, seed=0) as c:
        p = await _crawling(c, 2)
        port = int(p[0].address.rpartition(":")[2])
        assert await c.stop(p[0])
        c.net.partition([host_of(0), host_of(2)], [host_of(1)])
        new = await c.start(2, join_addresses=[p[0].address], delay=DELAY)
        back = await c.start(0, join=new, port=port, delay=DELAY)
        with trio.fail_after(60):
            await c.wait_until(lambda: one_view([back, new]))
        await trio.sleep(60.0)
        assert back.peer.lease.quorum.pending and new.peer.lease.quorum.pending
        assert "every peer in sight is new too" in str(back.peer.crawler.paused)
        c.net.heal()
        everyone = [back, p[1], new]
        with trio.fail_after(120):
            await c.wait_until(lambda: all(s.peer.crawler.paused is None for s in everyone))
        assert {s.peer.lease.quorum.base for s in everyone} == {
            frozenset(s.peer_id for s in everyone)
        }
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
    assert Referee(c.server.log, WEB).overlaps() == []
