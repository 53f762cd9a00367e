"""A peer restarted after another left for good, as OS processes on loopback (the
in-memory runs, over seeds and with a newcomer and a whole cluster too, are in
tests/cluster/test_leaves.py). It held every host it gained for three minutes (the
hold's limit), waiting for a sweep the one that left had done before it started (QA);
now it asks the web for pages within seconds, and the crawl ends whole."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.e2e.cluster import run_cli, start_peer_or_fail, stop_all, wait_for_one_view
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth
from ubipy.synthweb.server import serve

# 40 pages a host at 0.5 s: the crawl outlasts the leave and the restart.
WEB = SyntheticWeb(WebSpec(seed=5, hosts=24, pages_per_host=40, cross_link_ratio=0.6))
SLOW = ("--delay", "0.5", "--concurrency", "8")
PROMPT = 20.0  # the hold waited 180 s


async def test_a_peer_restarted_after_a_leave_crawls_at_once(tmp_path: Path) -> None:
    truth = ground_truth(WEB, [WEB.seed_url()])
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(WEB.seed_url() + "\n")
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, WEB)
        proxy = server.proxy_url
        a = await start_peer_or_fail(nursery, tmp_path / "a", proxy, *SLOW)
        join = ("--join", a.address)
        b = await start_peer_or_fail(nursery, tmp_path / "b", proxy, *SLOW, *join)
        c = await start_peer_or_fail(nursery, tmp_path / "c", proxy, *SLOW, *join)
        peers = [a, b, c]
        try:
            await wait_for_one_view(peers, {a.peer_id, b.peer_id, c.peer_id}, within=30)
            seeded = await run_cli("seed", str(seeds), "--peer", a.address, "--secret", "s3cret")
            assert seeded.returncode == 0, seeded.stderr
            with trio.fail_after(60):
                await server.log.wait_for_count(len(truth) // 6)
            c.proc.terminate()  # for good: every host handed on
            with trio.fail_after(30):
                assert await c.proc.wait() == 0
            await wait_for_one_view([a, b], {a.peer_id, b.peer_id}, within=30)
            b.proc.terminate()
            with trio.fail_after(30):
                assert await b.proc.wait() == 0
            started = trio.current_time()
            b = await start_peer_or_fail(nursery, b.data, proxy, *SLOW, *join)
            peers.append(b)
            referee = Referee(server.log, WEB)
            with trio.fail_after(PROMPT):
                await server.log.wait_for(
                    lambda log: any(
                        r.peer == b.peer_id and r.start > started and not referee.is_robots(r)
                        for r in log
                    )
                )
            with trio.fail_after(120):
                await server.log.wait_for(lambda log: Referee(log, WEB).missing(truth) == set())
        finally:
            await stop_all(peers)
        nursery.cancel_scope.cancel()
    assert Referee(server.log, WEB).overlaps() == []
