"""An idle cluster's timers (issue #19: every wake-up of an idle peer costs it CPU), on
the in-memory network under the autojump clock: a peer's majority lease pings and
checks on membership's tick, not on a schedule of its own, and a peer with no control
centre does not wake to push figures."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import trio
import trio.testing

from tests.cluster.harness import _CURRENT, cluster
from ubipy.synthweb import SyntheticWeb, WebSpec

WEB = SyntheticWeb(WebSpec(seed=3, hosts=2, pages_per_host=2))


class _Moments(trio.abc.Instrument):
    """The moments at which each peer's tasks of the names watched ran."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.moments: dict[tuple[str, str], set[float]] = defaultdict(set)

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        name = next((n for n in self.names if task.name.endswith(n)), None)
        sim = task.context.get(_CURRENT)
        if name is not None and sim is not None:
            self.moments[sim.peer_id, name].add(trio.current_time())


async def test_an_idle_peer_s_lease_wakes_with_the_membership_tick(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    for seed in range(3):
        async with cluster(tmp_path / f"s{seed}", WEB, seed=seed) as c:
            sims = await c.start_joined(3)
            await trio.sleep(30)  # joined, the base agreed: nothing more changes
            moments = _Moments("Lease.run", "Peer._gossip_loop", "Reporter.push_forever")
            trio.lowlevel.add_instrument(moments)
            await trio.sleep(60)
            trio.lowlevel.remove_instrument(moments)
            for sim in sims:
                lease = moments.moments[sim.peer_id, "Lease.run"]
                ticks = moments.moments[sim.peer_id, "Peer._gossip_loop"]
                assert len(ticks) >= 60  # a tick a second, and the frames that came
                # The lease wakes only at moments membership wakes the peer anyway...
                assert lease <= ticks, sorted(lease - ticks)[:5]
                assert not moments.moments[sim.peer_id, "Reporter.push_forever"]
                # ...and still keeps every other member in sight: each answered a ping
                # (a probe or the lease's own) sent within the last 1.25 s (the lease is
                # 3 s, a member is asked after 1).
                now = trio.current_time()
                heard = sim.peer._lease.quorum.last_heard()  # type: ignore[union-attr]
                assert sorted(heard) == sorted(s.peer_id for s in sims if s is not sim)
                assert all(now - t <= 1.25 for t in heard.values()), heard
                assert sim.peer.crawler.paused is None
