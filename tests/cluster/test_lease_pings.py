"""The majority lease's own pings in clusters larger than a majority plus one, on the
in-memory network under the autojump clock: a peer keeps in sight only as many base
members as a majority needs, and one to spare, where it asked every member not heard
from for a second (N - 2 pings a second each, N^2 for the cluster: most of an idle
peer's CPU at N = 8, found by a review); the lease still holds under loss and still
lapses on the minority side of a cut.

Seeds as in test_churn_memory: one by default, ``UBIPY_SEEDS=N`` (or ``=3,17``) for more."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.cluster.harness import Cluster, SimPeer, cluster, host_of
from tests.cluster.test_churn_memory import seeds
from ubipy.membership import Outgoing
from ubipy.synthweb import SyntheticWeb, WebSpec

WEB = SyntheticWeb(WebSpec(seed=3, hosts=2, pages_per_host=2))
LOST = "lost sight of a majority"


Ping = Callable[[float, str], Outgoing | None]


def count_lease_pings(sims: list[SimPeer], monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """From now on, the lease pings each peer sends (membership's probes not counted)."""
    counts: Counter[str] = Counter()

    def counting(peer_id: str, real: Ping) -> Ping:
        def ping(now: float, member_id: str) -> Outgoing | None:
            counts[peer_id] += 1
            return real(now, member_id)

        return ping

    for sim in sims:
        membership = sim.peer.membership
        monkeypatch.setattr(membership, "ping", counting(sim.peer_id, membership.ping))
    return counts


def lossy(c: Cluster, n: int, *, loss: float, latency: float) -> None:
    for a, b in itertools.combinations(range(n), 2):
        c.net.set_link(host_of(a), host_of(b), latency=latency, loss=loss)


@pytest.mark.parametrize("seed", seeds())
async def test_an_idle_peer_asks_a_majority_and_a_spare_for_a_sign_of_life(
    seed: int,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Twelve peers: a majority is six others, kept in sight with one to spare, so
    about 7 pings a second less the probes that ask for it (10 a second each before:
    every other member but the one probed). Every peer holds throughout."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        sims = await c.start_joined(12, patience=300)
        await trio.sleep(30)  # joined, the base agreed
        counts = count_lease_pings(sims, monkeypatch)
        await trio.sleep(60)
        paused = [s.peer.crawler.paused for s in sims]
        lost = [s.count(LOST) for s in sims]
    print(f"\nlease pings in 60 s, each peer: {sorted(counts.values())}")
    assert max(counts.values()) <= 7 * 60
    assert sum(counts.values()) < 12 * 9 * 60  # well under N - 2 a second each
    assert paused == [None] * 12
    assert lost == [0] * 12


@pytest.mark.parametrize("seed", seeds())
async def test_the_lease_holds_under_loss_and_lapses_on_a_cut_s_minority_side(
    seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Eight peers, 5% loss and 50 ms each way on every link for two minutes: no peer
    loses the lease (five of the seven others kept in sight, each asked once a second,
    those that do not answer giving way to others). Then a cut, 5 | 3: the three pause
    within the lease and the five go on; healed, all crawl again."""
    n = 8
    async with cluster(tmp_path, WEB, seed=seed) as c:
        sims = await c.start_joined(n, patience=300)
        await trio.sleep(10)
        lossy(c, n, loss=0.05, latency=0.05)
        await trio.sleep(120)
        lost_under_loss = [s.count(LOST) for s in sims]
        lossy(c, n, loss=0.0, latency=0.0002)
        await trio.sleep(10)
        c.net.partition([host_of(i) for i in range(5)], [host_of(i) for i in range(5, n)])
        lease = sims[0].peer.config.membership.majority_lease
        await trio.sleep(lease + 0.5)
        minority = [s.peer.crawler.paused for s in sims[5:]]
        await trio.sleep(30)
        majority_lost = [s.count(LOST) for s in sims[:5]]
        c.net.heal()
        with trio.fail_after(60):
            await c.wait_until(lambda: all(s.peer.crawler.paused is None for s in sims))
    assert lost_under_loss == [0] * n
    assert all(why is not None and "no majority in sight" in why for why in minority)
    assert majority_lost == lost_under_loss[:5]
