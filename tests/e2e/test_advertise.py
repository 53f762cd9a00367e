"""A peer that joins with an ``--advertise`` that is not its own, as OS processes on
loopback: its frames reach the first peer, whose pings to it go nowhere. The first
peer, alone before, goes on crawling the whole web (it paused for good, found in a
network namespace; the in-memory case is tests/cluster/test_newcomers.py)."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.cluster.harness import with_peer_id
from tests.e2e.cluster import run_cli, start_peer_or_fail, status_json, stop_all
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.synthweb.referee import Referee
from ubipy.synthweb.server import serve
from ubipy.synthweb.truth import ground_truth


async def test_a_newcomer_advertising_an_address_not_its_own_never_pauses_a_lone_peer(
    tmp_path: Path,
) -> None:
    web = SyntheticWeb(WebSpec(seed=3, hosts=6, pages_per_host=6))
    truth = ground_truth(web, [web.seed_url()])
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(web.seed_url() + "\n")
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        proxy = server.proxy_url
        # The newcomer's id the smaller: it would win the tie-break of a base of two.
        lone = await start_peer_or_fail(nursery, with_peer_id(tmp_path / "a", "f" * 16), proxy)
        astray = await start_peer_or_fail(
            nursery,
            with_peer_id(tmp_path / "b", "0" * 16),
            proxy,
            "--join",
            lone.address,
            "--advertise",
            "127.0.0.99:9",  # nothing listens there
        )
        peers = [lone, astray]
        try:
            with trio.fail_after(30):
                await lone.wait_for(rb"member 0{16} joined")
            result = await run_cli("seed", str(seeds), "--peer", lone.address, "--secret", "s3cret")
            assert result.returncode == 0, result.stderr
            # Several leases (3 s) on: the crawl ends, by the lone peer alone.
            with trio.fail_after(90):
                await server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
            report = await status_json(lone.address)
            [mine] = [p for p in report["peers"] if p["peer_id"] == lone.peer_id]
            assert mine["paused"] is None
            assert b"fetching paused" not in lone.output
            assert Referee(server.log, web).duplicates() == []
        finally:
            await stop_all(peers)
        nursery.cancel_scope.cancel()


async def test_a_peer_advertising_another_peer_s_address_exits_saying_so(tmp_path: Path) -> None:
    web = SyntheticWeb(WebSpec(seed=3, hosts=2, pages_per_host=2))
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        proxy = server.proxy_url
        first = await start_peer_or_fail(nursery, tmp_path / "a", proxy)
        copied = await start_peer_or_fail(
            nursery, tmp_path / "b", proxy, "--join", first.address, "--advertise", first.address
        )
        try:
            with trio.fail_after(30):
                code = await copied.proc.wait()
            assert code == 1
            said = bytes(copied.output).decode(errors="replace")
            assert f"its address {first.address} reaches the live peer {first.peer_id}" in said
            assert first.proc.returncode is None
        finally:
            await stop_all([first, copied])
        nursery.cancel_scope.cancel()
