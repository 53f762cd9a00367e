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
- The owner, killed while another peer's request runs under its lease and restarted
  0.2 s later: its table, in memory only, was empty, and it granted the address while
  that request ran (one overlap in each of seeds 1 to 3). Now a starting owner grants
  nothing for a grace, and holders renew their leases while their requests run: an
  owner that lost its table takes a renewal as the lease held, so a request longer
  than the grace is not overlapped either.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from tests.cluster.harness import cluster
from tests.cluster.test_dns import overlaps
from tests.cluster.test_ip_lease_holders import WEB, Begun, holder_mid_request, next_request_after
from tests.cluster.test_ip_leases import ADDRESS, IP_DELAY, start
from ubipy.membership import MemberState
from ubipy.peer.ipleases import START_GRACE
from ubipy.ring import Ring
from ubipy.synthweb import SyntheticWeb, WebSpec

SEEDS = pytest.mark.parametrize("seed", [1, 2, 3, 4])
# Between the kill and the restart: well under membership's probe round.
HOLDER_GAP = 0.5
OWNER_GAP = 0.2
# How soon the address is asked again after a holder's quick restart: its start and
# join, its first ask, the old request's usual length and the address's gap.
ASKED_AGAIN_WITHIN = 15.0
# Responses slower than the owner's grace: only the holder's renewals keep them safe.
SLOW_WEB = SyntheticWeb(WebSpec(seed=8, hosts=40, pages_per_host=3, latency=3 * START_GRACE))


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


async def restarted_owner(
    seed: int, tmp_path: Path, web: SyntheticWeb, begun: Begun
) -> tuple[int, int]:
    """The address's owner killed while another peer's request runs under its lease,
    and restarted at once (joining the third peer, so the holder learns its new address
    by gossip): the overlaps and requests too soon on the address, through the
    next 30 s."""
    async with cluster(tmp_path, web, seed=seed) as c:
        peers, holder = await holder_mid_request(c, begun, web)
        owner_id = Ring([p.peer_id for p in peers]).owner(ADDRESS)
        owner = next(p for p in peers if p.peer_id == owner_id)
        third = next(p for p in peers if p not in (owner, holder))
        await c.kill(owner)
        killed_at = trio.current_time()
        await trio.sleep(OWNER_GAP)
        back = await start(c, owner.index, join=third, web=web)
        # Its grace holds the address up a few seconds, no more.
        latency = web.spec.latency
        within = latency + OWNER_GAP + START_GRACE + 5.0
        resumed = await next_request_after(begun, killed_at + latency, [*peers, back], within)
        print(f"\nowner restarted; address asked again +{resumed - killed_at:.1f} s")
        with trio.fail_after(120):
            await c.server.log.wait_for(lambda log: log.entries[-1].start > killed_at + 30)
        return overlaps(list(c.server.log), IP_DELAY)


@SEEDS
async def test_an_owner_restarted_at_once_grants_no_lease_still_in_use(
    seed: int,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert await restarted_owner(seed, tmp_path, WEB, Begun(monkeypatch)) == (0, 0)


@pytest.mark.parametrize("seed", [1, 2])
async def test_a_request_longer_than_the_grace_is_renewed_with_a_restarted_owner(
    seed: int,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Responses of 12 s: the holder's request outlasts the restarted owner's grace,
    and only its renewals tell the owner the address is in use."""
    assert await restarted_owner(seed, tmp_path, SLOW_WEB, Begun(monkeypatch)) == (0, 0)
