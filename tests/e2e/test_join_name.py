"""One --join name for every peer, with real processes and the system's resolver: three
peers, each in a network namespace of its own, are all given ``--join svc:7000``, where
``svc`` resolves (through each namespace's /etc/hosts) to the three of them, as
round-robin DNS or a headless Kubernetes service does. glibc puts the asker's own
address first (RFC 6724's longest matching prefix, which it applies to IPv4 within a
subnet), so a dial to the name reached the peer itself: each peer founded a cluster of
its own and never met the others. Each address of the name is dialled now.

Needs root and ``ip netns``; skipped elsewhere. About 10 s."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.e2e.cluster import PeerProcess, start_peer_or_fail, stop_all, wait_for_one_view
from tests.e2e.netns import bridged_namespaces, can_make_namespaces, relay
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth
from ubipy.synthweb.server import serve

pytestmark = pytest.mark.skipif(
    not can_make_namespaces(), reason="needs root and network namespaces (ip netns)"
)
WEB = SyntheticWeb(WebSpec(seed=5, hosts=24, pages_per_host=8, latency=0.02))
TRUTH = ground_truth(WEB, [WEB.seed_url()])
SUBNET = "10.231.9"
PEERS = 3
SECRET = "s3cret"


async def test_peers_given_one_name_for_them_all_make_one_cluster(tmp_path: Path) -> None:
    addresses = [f"{SUBNET}.{10 + i}" for i in range(PEERS)]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(WEB.seed_url() + "\n")
    peers: list[PeerProcess] = []
    with bridged_namespaces(PEERS, SUBNET, hosts={"svc": addresses}) as names:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(serve, WEB)
            port = await nursery.start(relay, f"{SUBNET}.1", server.port)
            try:
                for i, ns in enumerate(names):
                    first = ("--seeds", str(seeds)) if i == 0 else ()
                    peers.append(
                        await start_peer_or_fail(
                            nursery, tmp_path / f"p{i}", f"http://{SUBNET}.1:{port}",
                            "--join", "svc:7000", "--delay", "0.05", *first,
                            listen=f"{addresses[i]}:7000", prefix=("ip", "netns", "exec", ns),
                        )
                    )  # fmt: skip
                    if i == 0:  # the first alone: it starts the cluster, and crawls
                        with trio.fail_after(30):
                            await peers[0].wait_for(rb"fetching starts")
                everyone = {p.peer_id for p in peers}
                await wait_for_one_view(peers, everyone, within=30)
                with trio.fail_after(120):
                    await server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
            finally:
                await stop_all(peers)
            nursery.cancel_scope.cancel()

    assert all(b"a cluster of its own" not in p.output for p in peers[1:])
    referee = Referee(server.log, WEB)
    assert referee.overlaps() == []
    assert referee.duplicates() == []
