"""The cluster stopped while one member is frozen (SIGSTOP, a hung machine: its
connections stay open and answer nothing): the others stop within seconds, as when
none is frozen. They waited out the leave's patience, a minute, saying nothing
(a QA with processes: a leaving peer no longer probes, so the frozen one stayed
alive in its view, and each hand-off to it was tried three times). Seeds as in
test_churn_memory.py (``UBIPY_SEEDS``)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from tests.cluster.harness import cluster, host_of
from tests.cluster.test_churn_memory import SEEDS
from ubipy.synthweb import SyntheticWeb, WebSpec

WEB = SyntheticWeb(WebSpec(seed=14, hosts=20, pages_per_host=10, latency=0.05))


@SEEDS
async def test_the_others_stop_within_seconds_while_one_member_is_frozen(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, seed: int
) -> None:
    async with cluster(tmp_path, WEB, seed=seed) as c:
        peers = await c.start_joined(3, delay=0.2)
        peers[0].peer.crawler.seed([WEB.seed_url()])
        with trio.fail_after(300):  # mid-crawl: each peer holds hosts to hand off
            await c.wait_until(lambda: len(c.server.log) >= 40)
        for other in (0, 1):
            c.net.cut_link(host_of(other), host_of(2), silently=True)
        began = trio.current_time()
        for sim in peers[:2]:
            sim.peer.stop()
        with trio.fail_after(600):
            for sim in peers[:2]:
                await sim.ended.wait()
        # The leave's announcement, one hand-off's patience (10 s), a second: 65 s on
        # the code before (three tries of each hand-off, then the sweeps till the
        # patience ran out).
        took = trio.current_time() - began
        assert took < 20, f"the stop took {took:.0f} s"
