"""The churn scenarios of tests/churn.py (issue 6) on the in-memory cluster: the same
scenarios as tests/e2e/test_churn.py (the same web, events, moments and assertions), but
the peers run in this process on the autojump clock, so each scenario takes seconds and
depends on a seed (the peers' ids, so who owns which host, and their membership choices;
the network's jitter).

By default one seed runs (0); ``UBIPY_SEEDS=20`` runs seeds 0-19 (``UBIPY_SEEDS=3,17`` just
those). A seed replays (given the same PYTHONHASHSEED): ``UBIPY_SEEDS=7, pytest -s`` shows
its figures again, and its logs are kept under the test's tmp_path. The process tests
stay as the end-to-end check of each scenario."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from tests import churn as scenarios
from tests.churn import SPEC, Scenario
from tests.cluster.harness import Cluster, SimPeer, cluster
from ubipy.peer import replica
from ubipy.synthweb import SyntheticWeb, ground_truth

WEB = SyntheticWeb(SPEC)
TRUTH = ground_truth(WEB, [WEB.seed_url()])


# What CI runs: each seed costs ~3.5 s a scenario on one core.
# One seed in CI: under coverage each scenario takes about 8 s, and the suite is to
# stay about as fast as it was before these tests came (the process tests run too).
DEFAULT_SEEDS = (0,)


def seeds() -> list[int]:
    """``UBIPY_SEEDS=N``: seeds 0 to N-1; ``UBIPY_SEEDS=3,17`` (or ``5,``): those."""
    wanted = os.environ.get("UBIPY_SEEDS", "").strip()
    if not wanted:
        return list(DEFAULT_SEEDS)
    if "," in wanted:
        return [int(s) for s in wanted.split(",") if s.strip()]
    if int(wanted) < 1:
        raise ValueError(f"UBIPY_SEEDS={wanted}: how many seeds, at least 1")
    return list(range(int(wanted)))


SEEDS = pytest.mark.parametrize("seed", seeds())


class MemoryScenario(Scenario[SimPeer]):
    """A scenario's world of peers in this process (tests/cluster/harness.py): the
    cluster, with every peer life started; "stopped" is a graceful stop's exit."""

    CLEAN_EXIT = "stopped"  # the process test's exit status 0
    ENDED = "ended"
    COPIES_MAY_LAG = False

    def __init__(self, name: str, seed: int, c: Cluster, tmp: Path) -> None:
        super().__init__(name, f"{name} seed {seed}", WEB, TRUTH, c.server)
        self.seed = seed
        self.c = c
        self.tmp = tmp

    async def start(self, index: int, *, join: SimPeer | None = None, replicas: int = 1) -> SimPeer:
        return await self.c.start(index, join=join, replicas=replicas)

    async def seed_crawl(self, peer: SimPeer) -> None:
        result = peer.peer.seed_urls([WEB.seed_url()])
        assert result.admitted + result.forwarded == 1, result

    async def kill_now(self, victim: SimPeer) -> None:
        await self.c.kill(victim)

    def terminate(self, peer: SimPeer) -> None:
        peer.peer.stop()

    async def wait_ended(self, peer: SimPeer) -> None:
        await peer.ended.wait()

    def exit_of(self, peer: SimPeer) -> str | None:
        return peer.exit

    def left_line(self, exit: object, after: float) -> str:
        return f"the leaver ended ({exit}) {after:.2f} s after"

    async def cluster_status(self, peer: SimPeer) -> dict[str, Any]:
        return await self.c.status(peer)

    def count(self, peer: SimPeer, pattern: str) -> int:
        return peer.count(pattern)

    async def wait_count(self, peer: SimPeer, pattern: str, n: int) -> None:
        await peer.wait_count(pattern, n)

    def log_texts(self) -> Iterable[str]:
        return (line for p in self.c.lives for line in p.lines)

    def diagnose(self) -> None:
        """Peers that logged an error or a traceback: show it, with the end of their log."""
        for sim in self.c.lives:
            if sim.troubles:
                tail = "\n".join(sim.lines[-40:])
                print(f"[{self.name}] peer {sim.peer_id} ({sim.data.name}) troubles:")
                print("\n".join(sim.troubles[:10]) + f"\n... log tail:\n{tail}")

    def assert_no_troubles(self) -> None:
        troubles = {s.peer_id: s.troubles[:3] for s in self.c.lives if s.troubles}
        assert troubles == {}, troubles


@asynccontextmanager
async def churn(name: str, tmp: Path, seed: int) -> AsyncIterator[Scenario[SimPeer]]:
    """A scenario's world; on the way out, whatever happened, the peers' logs are checked
    for errors, the peers stopped and the logs kept."""
    wall = time.perf_counter()
    async with cluster(tmp, WEB, seed) as c:
        s = MemoryScenario(name, seed, c, tmp)
        try:
            yield s
        finally:
            s.diagnose()
            await c.stop_all()
            c.save_logs(tmp / "logs")
            s.report(
                f"logs in {tmp / 'logs'}; {trio.current_time():.1f} s of trio time "
                f"in {time.perf_counter() - wall:.2f} s"
            )


@SEEDS
async def test_peers_join_mid_crawl_and_take_their_share(
    tmp_path: Path, seed: int, autojump_clock: trio.testing.MockClock
) -> None:
    await scenarios.peers_join_mid_crawl_and_take_their_share(
        partial(churn, tmp=tmp_path, seed=seed)
    )


@SEEDS
async def test_a_peer_leaves_gracefully_mid_crawl(
    tmp_path: Path, seed: int, autojump_clock: trio.testing.MockClock
) -> None:
    await scenarios.a_peer_leaves_gracefully_mid_crawl(partial(churn, tmp=tmp_path, seed=seed))


@SEEDS
async def test_a_peer_killed_for_good_with_two_replicas(
    tmp_path: Path, seed: int, autojump_clock: trio.testing.MockClock
) -> None:
    await scenarios.a_peer_killed_for_good_with_two_replicas(
        partial(churn, tmp=tmp_path, seed=seed)
    )


@SEEDS
async def test_a_peer_killed_and_restarted_after_10_s(
    tmp_path: Path, seed: int, autojump_clock: trio.testing.MockClock
) -> None:
    await scenarios.a_peer_killed_and_restarted_after_10_s(partial(churn, tmp=tmp_path, seed=seed))


@SEEDS
async def test_a_newcomer_joins_while_a_killed_peer_is_away(
    tmp_path: Path, seed: int, autojump_clock: trio.testing.MockClock
) -> None:
    await scenarios.a_newcomer_joins_while_a_killed_peer_is_away(
        partial(churn, tmp=tmp_path, seed=seed)
    )


@SEEDS
async def test_the_whole_cluster_stops_and_restarts(
    tmp_path: Path, seed: int, autojump_clock: trio.testing.MockClock
) -> None:
    await scenarios.the_whole_cluster_stops_and_restarts(partial(churn, tmp=tmp_path, seed=seed))


@SEEDS
async def test_a_peer_joining_while_a_dead_peers_copies_are_taken_over_loses_none(
    tmp_path: Path,
    seed: int,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A dead peer's hosts are taken over from their copies a few a tick (here 2, so
    that it lasts); a peer joining meanwhile changed the ring, and the copies left of
    hosts the newcomer owns were neither taken over nor handed over: their pending
    URLs lost (found by a review). Now the rest is taken under the ring that made
    them ours, and handed on."""
    monkeypatch.setattr(replica, "_PROMOTE_AT_ONCE", 2)
    async with churn("kill, join during the take-over", tmp_path, seed) as s:
        peers = await s.crawling(4, replicas=2)
        victim = peers[2]
        stay = [p for p in peers if p is not victim]
        killed_at, stored = await s.kill(victim)
        await s.stable(
            [(p, scenarios.membership(victim, "dead")) for p in stay], since=killed_at, what="dead"
        )
        await s.start(4, join=peers[0], replicas=2)
        missing = await s.coverage()
    referee = s.report_referee()
    lost = scenarios.lost_at_kill(
        referee, victim.peer_id, stored, killed_at, copy_margin=0.1, copies_may_lag=False
    )
    s.judge(referee, missing, lost=lost)
