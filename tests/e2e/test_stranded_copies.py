"""A host that a newcomer gained but its old owner never handed over, the old owner
frozen (SIGSTOP) before the join and killed after it (``--replicas 2``), with the peers
as OS processes on loopback: the old owner's successor hands its copy of the host to
the newcomer, and no page the old owner fetched is fetched again
(tests/cluster/test_stranded_copies.py runs it in one process, over seeds)."""

from __future__ import annotations

import signal
from pathlib import Path

import trio

from tests.churn import SPEC
from tests.e2e.cluster import (
    PeerProcess,
    run_cli,
    start_peer_or_fail,
    stop_all,
    wait_for_one_view,
)
from ubipy.ring import Ring
from ubipy.synthweb import Referee, SyntheticWeb, ground_truth
from ubipy.synthweb.server import serve

SECRET = "s3cret"
# Slow enough per host that pages linking to the frozen peer's hosts are still being
# crawled once the newcomer has them (a page it fetched again is found again so).
CRAWL = ("--batch-linger", "0.2", "--concurrency", "4", "--delay", "0.5", "--replicas", "2")
# A response the frozen peer had read but not yet committed (or whose copy had not
# left) is fetched again by the host's next owner, as at any kill.
IN_FLIGHT = 1.0


async def test_a_host_its_frozen_owner_never_handed_over_comes_from_its_copy(
    tmp_path: Path,
) -> None:
    web = SyntheticWeb(SPEC)
    truth = ground_truth(web, [web.seed_url()])
    procs: list[PeerProcess] = []
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)

        async def start(index: int, *join: PeerProcess) -> PeerProcess:
            joins = [a for p in join for a in ("--join", p.address)]
            p = await start_peer_or_fail(
                nursery, tmp_path / f"p{index}", server.proxy_url, *CRAWL, *joins, secret=SECRET
            )
            procs.append(p)
            return p

        try:
            first = await start(0)
            peers = [first, await start(1, first), await start(2, first)]
            await wait_for_one_view(peers, {p.peer_id for p in peers}, within=30)
            seeds = tmp_path / "seeds.txt"
            seeds.write_text(web.seed_url() + "\n")
            done = await run_cli("seed", str(seeds), "--peer", first.address, "--secret", SECRET)
            assert done.returncode == 0, done.stderr
            with trio.fail_after(60):
                await server.log.wait_for_count(len(truth) // 4)
            d = peers[2]
            d.proc.send_signal(signal.SIGSTOP)
            frozen = trio.current_time()
            newcomer = await start(3, *peers[:2])
            staying = [*peers[:2], newcomer]
            await wait_for_one_view(staying, {p.peer_id for p in staying}, within=60)
            d.proc.kill()
            with trio.fail_after(120):
                await server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
        finally:
            await stop_all(procs)
            nursery.cancel_scope.cancel()
    before = Ring([p.peer_id for p in peers])
    after = Ring([*before.members, newcomer.peer_id])
    hosts = {
        h
        for h in web.host_names()
        if before.owner(h) == d.peer_id and after.owner(h) == newcomer.peer_id
    }
    assert hosts
    referee = Referee(server.log, web)
    first_final: dict[str, tuple[str, float]] = {}
    for r in referee.requests:
        if r.host in hosts and 200 <= r.status < 300:
            first_final.setdefault(referee.url_of(r), (r.peer, r.end))

    def in_flight_at_freeze(url: str) -> bool:
        peer, end = first_final.get(url, ("", 0.0))
        return peer == d.peer_id and end >= frozen - IN_FLIGHT

    twice = [
        (r.peer, url)
        for r in referee.duplicates()
        if r.host in hosts and not in_flight_at_freeze(url := referee.url_of(r))
    ]
    assert twice == []
    assert referee.overlaps() == []
    log = "".join(bytes(p.output).decode(errors="replace") for p in procs)
    assert "Traceback" not in log
    assert "handed a gone peer's copy" in log
