"""Peers as OS processes started out of the README's order: the second names the first,
which is not up yet, and the third names the second. The two made a cluster of their
own and crawled, the first a second cluster, and both fetched the same hosts until
they met (QA: 65 pages fetched twice, 158 requests closer than the delay). Now the two
wait for the first, and one cluster fetches every page once."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.e2e.cluster import PeerProcess, run_cli, start_peer, start_peer_or_fail, stop_all
from tests.peer.test_advertise import free_port
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.synthweb.referee import Referee
from ubipy.synthweb.server import serve
from ubipy.synthweb.truth import ground_truth

SECRET = "s3cret"


async def test_peers_that_join_one_not_up_yet_wait_for_it(tmp_path: Path) -> None:
    web = SyntheticWeb(WebSpec(seed=11, hosts=20, pages_per_host=5, crawl_delay=0.05))
    truth = ground_truth(web, [web.seed_url()])
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(web.seed_url() + "\n")
    first_address = f"127.0.0.1:{free_port()}"
    peers: list[PeerProcess] = []
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        try:
            second = await start_peer(nursery, tmp_path / "b", server.proxy_url,
                                      "--join", first_address)  # fmt: skip
            peers.append(second)
            third = await start_peer(nursery, tmp_path / "c", server.proxy_url,
                                     "--join", second.address)  # fmt: skip
            peers.append(third)
            with trio.fail_after(60):
                await second.wait_for(rb"no --join address answered: it founds no cluster")
            seeded = await run_cli("seed", str(seeds), "--peer", third.address,
                                   "--secret", SECRET)  # fmt: skip
            assert seeded.returncode == 0, seeded.stderr
            await trio.sleep(3)  # what the two do meanwhile is the test: nothing
            assert len(server.log) == 0
            status = await run_cli("status", "--peer", third.address, "--secret", SECRET)
            assert b"joining (attempt" in status.stdout, status.stdout
            first = await start_peer_or_fail(nursery, tmp_path / "a", server.proxy_url,
                                             listen=first_address)  # fmt: skip
            peers.append(first)
            with trio.fail_after(120):
                await server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
        finally:
            await stop_all(peers)
            nursery.cancel_scope.cancel()
    referee = Referee(server.log, web)
    assert referee.duplicates() == [] and referee.overlaps() == []
    assert second.count(rb"lease: --join 127\.0\.0\.1:\d+ answered") == 1
