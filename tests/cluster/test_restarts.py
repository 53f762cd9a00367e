"""Peers back from a stop or a kill, and the majority lease, on the in-memory network
under the autojump clock: the base a peer kept in its shard is what the cluster had
when it went away, not what it has now, so it lets the peer crawl again only on the
word of those that still count it; and a whole cluster stopped or killed and started
again crawls on.

Seeds as in test_churn_memory: one by default, ``UBIPY_SEEDS=N`` (or ``=3,17``) for more."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from tests.cluster.harness import Cluster, SimPeer, cluster, host_of, one_view
from tests.cluster.test_churn_memory import seeds
from ubipy.peer.lease import load_quorum
from ubipy.store import Shard
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth

WEB = SyntheticWeb(
    WebSpec(seed=21, hosts=48, pages_per_host=10, latency=0.05, cross_link_ratio=0.6)
)
TRUTH = ground_truth(WEB, [WEB.seed_url()])
DELAY = 3.0  # slow enough that the crawl outlasts the cut
CUT = 60.0  # how long the restarted peer spends on the cut-off side


async def _settled(
    c: Cluster, peers: list[SimPeer], *, crawled: bool = True
) -> tuple[set[frozenset[str]], list[str]]:
    """Wait until ``peers`` share one view and none is paused (and, ``crawled``, until
    the whole web was fetched); their bases, and what they logged as trouble."""
    with trio.fail_after(60):
        await c.wait_until(lambda: one_view(peers))
        await c.wait_until(lambda: all(q.peer.crawler.paused is None for q in peers))
    if crawled:
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
    # The last base change may come a moment after the last page (a crawl no longer
    # held for a peer that left ends sooner): what they agree on is asserted after.
    with trio.move_on_after(60):
        await c.wait_until(lambda: len({q.peer.lease.quorum.base for q in peers}) == 1)
    return {q.peer.lease.quorum.base for q in peers}, [t for q in peers for t in q.troubles]


async def _end(c: Cluster, sim: SimPeer, how: str) -> None:
    if how == "kill":
        await c.kill(sim)
    else:
        assert await c.stop(sim)


@pytest.mark.parametrize("how", ["stop", "kill"])
@pytest.mark.parametrize("seed", seeds())
async def test_a_peer_back_with_a_base_the_cluster_left_behind_crawls_only_with_the_majority(
    how: str, seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Peers 0, 1, 2 (two replicas); 1 is stopped or killed and the others drop it from
    their base, {0, 2}; 3 and 4 join: {0, 2, 3, 4}. The network is cut {0, 1} | {2, 3,
    4} and 1 starts again on 0's side. Its own base, kept from before, was {0, 1, 2},
    of which it saw 0 and itself, a majority: it crawled, and 0, holding no lease on
    its own base (1 of 4), took 1's base from its answer and crawled too, beside the
    majority (129-263 pages fetched by both sides in a 200 s cut, found by a review).
    Now a peer back from a kill trusts its kept base only where a majority of it still
    counts it (0's base lacks it), and one back from a stop kept none; both wait for
    the heal, and the web's log shows no page fetched by the two sides."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        p = await c.start_joined(3, replicas=2, delay=DELAY)
        p[0].peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(300):
            await c.server.log.wait_for_count(len(TRUTH) // 6)
        await _end(c, p[1], how)
        gone = p[1].peer_id
        with trio.fail_after(60):
            await c.wait_until(
                lambda: all(gone not in q.peer.lease.quorum.base for q in (p[0], p[2]))
            )
        new = [await c.start(i, join=p[0], replicas=2, delay=DELAY) for i in (3, 4)]
        majority = [p[2], *new]
        crawling = [p[0], *majority]
        with trio.fail_after(60):
            await c.wait_until(lambda: all(q.peer.crawler.paused is None for q in crawling))
        await trio.sleep(5)  # 3 and 4 confirmed (a majority of {0, 2} answered since)
        assert all(q.peer.lease.quorum.joint is None for q in crawling)
        c.net.partition([host_of(0), host_of(1)], [host_of(i) for i in (2, 3, 4)])
        cut = trio.current_time()
        await trio.sleep(30)  # each side has declared the other dead, and 0 has paused
        back = await c.start(1, join=p[0], replicas=2, delay=DELAY)
        await trio.sleep(CUT)
        assert back.peer.crawler.paused is not None and p[0].peer.crawler.paused is not None
        assert all(q.peer.crawler.paused is None for q in majority)
        c.net.heal()
        healed = trio.current_time()
        everyone = [p[0], back, *majority]
        bases, troubles = await _settled(c, everyone)
    referee = Referee(c.server.log, WEB)
    minority = {p[0].peer_id, back.peer_id}
    pages = [r for r in referee.requests if not referee.is_robots(r)]
    during = [r for r in pages if cut <= r.start < healed and r.peer in minority]
    by_minority = {referee.url_of(r) for r in during}
    by_majority = {referee.url_of(r) for r in pages if r.peer not in minority}
    # What 0 had in flight at the cut, or began in the moment its lease still held:
    # the majority may fetch those again, as in test_partitions. Nothing else.
    in_flight = sum(1 for r in pages if r.peer in minority and r.start < cut < r.end)
    assert [r for r in during if r.peer == back.peer_id] == []
    assert len(by_minority & by_majority) <= in_flight
    assert referee.overlaps() == []
    assert bases == {frozenset(q.peer_id for q in everyone)}
    assert troubles == []


@pytest.mark.parametrize("how", ["stop", "kill"])
@pytest.mark.parametrize("peers", [1, 3])
async def test_a_whole_cluster_stopped_or_killed_and_started_again_crawls_on(
    how: str, peers: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Every peer stopped (a graceful leave each) or killed mid-crawl, then started again
    over its data, peer 0 without --join as at first and the others joining it: nobody
    holds a lease to count the others, so the peers found their base again (from what
    they kept, or, having left, as new peers do) and crawl the rest, with no host asked
    by two peers at once. A lone peer does so at once."""
    async with cluster(tmp_path, WEB, seed=0) as c:
        first = await c.start_joined(peers, replicas=min(peers, 2), delay=0.5)
        first[0].peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(300):
            await c.server.log.wait_for_count(len(TRUTH) // 3)
        if how == "kill":
            for sim in first:
                await c.kill(sim)
        else:
            for sim in first:
                sim.peer.stop()  # all at once, as SIGTERM to every process
            with trio.fail_after(60):
                for sim in first:
                    await sim.ended.wait()
            assert [sim.exit for sim in first] == ["stopped"] * peers
        stopped = len(c.server.log)
        again = [await c.start(0, replicas=min(peers, 2), delay=0.5)]
        for i in range(1, peers):
            again.append(await c.start(i, join=again[0], replicas=2, delay=0.5))
        bases, troubles = await _settled(c, again)
    referee = Referee(c.server.log, WEB)
    assert stopped < len(TRUTH)
    assert referee.overlaps() == []
    assert bases == {frozenset(q.peer_id for q in again)}
    assert troubles == []


def _comes_back_new(sim: SimPeer) -> bool:
    """Whether the shard of a peer that ended keeps no base: started again with --join,
    the peer is pending, as a new one is, not restoring a base."""
    shard = Shard.open(sim.data)
    try:
        return load_quorum(sim.peer_id, shard, lease=1.0, newcomer=True).pending
    finally:
        shard.close()


async def test_a_peer_stopped_on_its_own_keeps_no_base_and_comes_back_new(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A peer stopped while the others crawl on exits before its own leave's event comes
    back to its lease: the base it had was never rewritten, and it came back restoring
    it rather than new, as a peer that left is (a review). Its shard keeps none now."""
    async with cluster(tmp_path, WEB, seed=0) as c:
        p = await c.start_joined(3, replicas=2, delay=DELAY)
        p[0].peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(300):
            await c.server.log.wait_for_count(len(TRUTH) // 6)
        assert await c.stop(p[1])
        assert _comes_back_new(p[1])
        back = await c.start(1, join=p[0], replicas=2, delay=DELAY)
        assert back.peer.lease.quorum.pending  # new to the cluster, not restoring
        everyone = [p[0], back, p[2]]
        bases, troubles = await _settled(c, everyone, crawled=False)
    assert bases == {frozenset(q.peer_id for q in everyone)}
    assert troubles == []


@pytest.mark.parametrize("seed", seeds())
async def test_a_whole_cluster_stopped_at_once_keeps_no_base_and_restarts_with_one_founder(
    seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Three peers stopped at once: the last to see its own leave had seen the others'
    first, its base shrunk to itself alone, and it kept that. Started again as
    documented (0 without --join, 1 and 2 joining 0) with 2 cut off from 0 and 1, 2
    held a lease of itself alone beside the {0, 1} that 0 founded: 354 pages fetched by
    both sides (a review). What a stopping peer keeps is decided when it is asked to
    stop, before any other's leave: none of them keeps a base, and 2, new, waits."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        first = await c.start_joined(3, replicas=2, delay=0.5)
        first[0].peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(300):
            await c.server.log.wait_for_count(len(TRUTH) // 3)
        for sim in first:
            sim.peer.stop()  # all at once, as SIGTERM to every process
        with trio.fail_after(60):
            for sim in first:
                await sim.ended.wait()
        assert [_comes_back_new(sim) for sim in first] == [True] * 3
        stopped = len(c.server.log)
        c.net.partition([host_of(0), host_of(1)], [host_of(2)])
        again = [await c.start(0, replicas=2, delay=0.5)]
        again += [await c.start(i, join=again[0], replicas=2, delay=0.5) for i in (1, 2)]
        await trio.sleep(CUT)
        assert again[2].peer.crawler.paused is not None
        healed = trio.current_time()
        c.net.heal()
        bases, troubles = await _settled(c, again)
    referee = Referee(c.server.log, WEB)
    pages = [r for r in referee.requests if not referee.is_robots(r)][stopped:]
    assert [r for r in pages if r.peer == again[2].peer_id and r.start < healed] == []
    assert referee.overlaps() == []
    assert bases == {frozenset(q.peer_id for q in again)}
    assert troubles == []
