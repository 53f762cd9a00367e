"""One cut link between two peer processes, for the whole crawl (``--replicas 2``):
three peers, each in a network namespace of its own joined to a bridge, and blackhole
routes between peers 0 and 1 alone. Both stay in the ring (peer 2 sees each alive) and
what they send each other goes by peer 2 (net/relays.py): every page is fetched, none
twice, no host by two peers at once (tests/cluster/test_cut_link.py runs it in one
process, over seeds).

Needs root and ``ip netns`` (CI runs as root); skipped elsewhere. Everything it creates
it removes."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.e2e.cluster import UBIPY, PeerProcess, start_peer_or_fail, stop_all, wait_for_one_view
from tests.e2e.netns import bridged_namespaces, can_make_namespaces, ip, relay
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth
from ubipy.synthweb.server import serve

WEB = SyntheticWeb(
    WebSpec(seed=12, hosts=30, pages_per_host=10, latency=0.05, cross_link_ratio=0.6)
)
TRUTH = ground_truth(WEB, [WEB.seed_url()])
SUBNET = "10.231.9"
BRIDGE_IP = f"{SUBNET}.1"
SECRET = "s3cret"

pytestmark = pytest.mark.skipif(
    not can_make_namespaces(), reason="needs root and network namespaces (ip netns)"
)


def _cut(names: list[str], i: int, j: int) -> None:
    """Blackhole routes between peers ``i`` and ``j`` alone, both ways."""
    ip("-n", names[i], "route", "add", "blackhole", f"{SUBNET}.{10 + j}/32")
    ip("-n", names[j], "route", "add", "blackhole", f"{SUBNET}.{10 + i}/32")


async def test_two_peer_processes_that_cannot_reach_each_other_crawl_on_through_a_third(
    tmp_path: Path,
) -> None:
    peers: list[PeerProcess] = []
    with bridged_namespaces(3, SUBNET) as names:
        async with trio.open_nursery() as nursery:
            server = await nursery.start(serve, WEB)
            port = await nursery.start(relay, BRIDGE_IP, server.port)
            proxy = f"http://{BRIDGE_IP}:{port}"
            try:
                for i, ns in enumerate(names):
                    join = ("--join", f"{SUBNET}.10:7000") if i else ()
                    peers.append(
                        await start_peer_or_fail(
                            nursery, tmp_path / f"p{i}", proxy, "--delay", "0.25",
                            "--replicas", "2", *join,
                            listen=f"{SUBNET}.{10 + i}:7000",
                            prefix=("ip", "netns", "exec", ns),
                        )
                    )  # fmt: skip
                everyone = {p.peer_id for p in peers}
                await wait_for_one_view(peers, everyone, within=30)
                _cut(names, 0, 1)
                seeds = tmp_path / "seeds.txt"
                seeds.write_text(WEB.seed_url() + "\n")
                seeded = await trio.run_process(
                    [*UBIPY, "seed", str(seeds), "--peer", peers[2].address,
                     "--secret", SECRET],
                    capture_stdout=True, capture_stderr=True, check=False,
                )  # fmt: skip
                assert seeded.returncode == 0, seeded.stderr
                with trio.fail_after(180):
                    await server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
                await wait_for_one_view(peers, everyone, within=10)
            finally:
                await stop_all(peers)
            nursery.cancel_scope.cancel()
    referee = Referee(server.log, WEB)
    assert referee.duplicates() == []
    assert referee.overlaps() == []
    log = b"".join(bytes(p.output) for p in peers)
    assert b"Traceback" not in log
