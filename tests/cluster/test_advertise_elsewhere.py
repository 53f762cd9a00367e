"""A peer whose --advertise is another live peer's, on the in-memory network: it stops
(asked at its start who answers at its address), and the peers it reached go on
handing hosts to the real owner of that address. Its leave, or its death, named that
address: the others stopped handing off there (hand-offs "not taken; kept") until the
real one restarted (a review). The processes' case: tests/e2e/test_advertise.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import trio
import trio.testing

from tests.cluster.harness import cluster
from ubipy.config import CrawlConfig
from ubipy.membership import MemberState
from ubipy.synthweb import SyntheticWeb, WebSpec

WEB = SyntheticWeb(WebSpec(seed=3, hosts=6, pages_per_host=4))


async def test_the_peers_go_on_handing_off_to_the_address_a_stopped_peer_claimed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, WEB, seed=1) as c:
        a, other = await c.start_joined(2)

        def copied(config: CrawlConfig) -> CrawlConfig:
            return dataclasses.replace(config, advertise=a.address)

        b = await c.start(2, join=other, tune=copied)
        with trio.fail_after(30):
            await b.ended.wait()
        assert b.peer.advertised_elsewhere == a.peer_id

        def b_gone() -> bool:
            seen = other.peer.membership.member(b.peer_id)
            return seen is None or seen.state in (MemberState.DEAD, MemberState.LEFT)

        with trio.fail_after(60):
            await c.wait_until(b_gone)
        assert a.address not in other.peer.handoff._gone  # hand-offs to A still go
        alive = other.peer.membership.member(a.peer_id)
        assert alive is not None and alive.state is MemberState.ALIVE
