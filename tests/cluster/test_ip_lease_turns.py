"""Peers take turns on a shared address, judged from the web server's log: fifty hosts
on one address, on four peers that each own some of them, each get a share of the
address's requests from the start, and never two requests at once.

Before, whoever asked first once the address was free had it: the address's owner,
which asks itself with no frame, took the first 80 requests while the three others
were denied 77 times each. Now the owner keeps the address for the peer that has
waited longest, its own asks queued with the others'.

Seeds as in test_churn_memory: one by default, ``UBIPY_SEEDS=N`` (or ``=3,17``) for more."""

from __future__ import annotations

import collections
import itertools
from pathlib import Path

import trio
import trio.testing

from tests.cluster.harness import cluster
from tests.cluster.test_churn_memory import SEEDS
from tests.cluster.test_dns import overlaps
from tests.cluster.test_ip_leases import IP_DELAY, PEERS, WEB, start_cluster

FIRST = 80  # requests judged: every peer has hosts of the address to ask by then


@SEEDS
async def test_every_peer_has_its_turns_on_a_shared_address(
    seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, WEB, seed=seed) as c:
        peers = await start_cluster(c, PEERS)
        peers[0].peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(300):
            await c.server.log.wait_for_count(FIRST)
        requests = sorted(c.server.log, key=lambda r: r.start)[:FIRST]
        denied = sum(p.peer.status().ip_leases_denied for p in peers)
    by_peer = collections.Counter(r.peer for r in requests)
    runs = [len(list(run)) for _, run in itertools.groupby(r.peer for r in requests)]
    print(f"\nfirst {FIRST} requests by peer: {sorted(by_peer.values())}, longest run {max(runs)}")
    print(f"{denied} denials")
    assert overlaps(requests, IP_DELAY) == (0, 0)
    # A fair share is 20 each; the peer that seeded starts alone for its robots.txt.
    assert len(by_peer) == PEERS and min(by_peer.values()) >= FIRST // PEERS // 2
    assert max(runs) <= 6
