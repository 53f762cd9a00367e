"""An address's lease across a quick restart (a crash loop, a service manager's
restart), judged from the web server: forty hosts on one address, three peers, a
second per response (test_ip_lease_holders.py's world). Restarted at once, a peer is
never declared dead (test_restart_address.py), so the ring, and the lease's owner,
keep it.

- The holder, killed mid-request and restarted 0.5 s later: the owner kept the old
  process's lease its whole term (121 s), denying the address to every peer, the
  restarted one too (740 denials, the address asked again 121.2 s after the kill, in
  a review's run). Now the restarted peer's asks name a new run, which ends its
  earlier run's leases: the address is asked again within seconds.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from tests.cluster.harness import cluster
from tests.cluster.test_dns import overlaps
from tests.cluster.test_ip_lease_holders import WEB, Begun, holder_mid_request, next_request_after
from tests.cluster.test_ip_leases import IP_DELAY, start
from ubipy.membership import MemberState

SEEDS = pytest.mark.parametrize("seed", [1, 2, 3, 4])
# Between the kill and the restart: well under membership's probe round.
HOLDER_GAP = 0.5
# How soon the address is asked again after a holder's quick restart: its start and
# join, its first ask, the old request's usual length and the address's gap.
ASKED_AGAIN_WITHIN = 15.0


@SEEDS
async def test_a_holder_restarted_at_once_holds_up_its_address_no_longer(
    seed: int,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    begun = Begun(monkeypatch)
    async with cluster(tmp_path, WEB, seed=seed) as c:
        peers, holder = await holder_mid_request(c, begun)
        rest = [p for p in peers if p is not holder]
        await c.kill(holder)
        killed_at = trio.current_time()
        await trio.sleep(HOLDER_GAP)
        back = await start(c, holder.index, join=rest[0], web=WEB)
        resumed = await next_request_after(begun, killed_at, [*rest, back], ASKED_AGAIN_WITHIN)
        print(f"\nholder restarted; address asked again +{resumed - killed_at:.1f} s")
        with trio.fail_after(60):
            await c.server.log.wait_for(lambda log: log.entries[-1].start > resumed + 10)
        # Quick enough that nobody noticed: the ring kept it all along.
        for p in rest:
            view = p.peer.membership.member(back.peer_id)
            assert view is not None and view.state is MemberState.ALIVE
        assert not any(f"member {back.peer_id} dead" in line for p in rest for line in p.lines)
        assert overlaps(list(c.server.log), IP_DELAY) == (0, 0)
