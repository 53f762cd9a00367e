"""An address's lease whose holder is lost mid-request, judged from the web server:
the address is asked again soon, and still never by two at once.

Forty hosts on one address, on three peers, a second per response. The peer that holds
the address's lease (not its owner) is killed, cut off, or loses its release, while its
request is in flight. Before, the owner kept the lease its whole term (the fetch
deadline and a second: 121 s) and the address stood still for every peer, though
membership had declared the holder dead: 121.2 s idle, 844 denials, in a review's run.
Now a holder that membership drops loses its leases after the majority's fence (by
then, cut off, it has paused and dropped its request), and a release that is lost is
sent again until the owner answers it.

Seeds as in test_churn_memory: one by default, ``UBIPY_SEEDS=N`` (or ``=3,17``) for more."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.cluster.harness import Cluster, SimPeer, cluster
from tests.cluster.test_churn_memory import SEEDS
from tests.cluster.test_dns import overlaps
from tests.cluster.test_ip_leases import ADDRESS, IP_DELAY, start_cluster
from ubipy.membership import fence
from ubipy.peer.ipleases import RELEASE_RESEND
from ubipy.ring import Ring
from ubipy.synthweb import SyntheticWeb, SynthTransport, WebSpec
from ubipy.wire import IpRelease, Message

WEB = SyntheticWeb(WebSpec(seed=8, hosts=40, pages_per_host=3, latency=1.0))
# Requests before the fault: the crawl is under way on every peer.
WARM_UP = 10
# How long membership takes to declare a silent peer dead here (about 6 s), and the
# majority's fence after that (4.3 s with the default 3 s --majority-lease).
DETECTION = 10.0
FREED_WITHIN = DETECTION + fence(3.0) + 5.0


class Begun:
    """Requests as the web server sees them begin (its log has them once they end):
    when, and the client host of each, in order."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.starts: list[tuple[float, str]] = []
        self._grew = trio.Event()
        handle = SynthTransport.handle_async_request

        async def begun(transport: SynthTransport, request: httpx2.Request) -> httpx2.Response:
            self.starts.append((trio.current_time(), transport.client))
            self._grew.set()
            self._grew = trio.Event()
            return await handle(transport, request)

        monkeypatch.setattr(SynthTransport, "handle_async_request", begun)

    async def first_after(self, at: float, which: Callable[[str], bool]) -> tuple[float, str]:
        """When, and from which client, the first request after ``at`` that ``which``
        picks (by its client) began."""
        seen = 0
        while True:
            for when, client in self.starts[seen:]:
                if when > at and which(client):
                    return when, client
            seen = len(self.starts)
            await self._grew.wait()


async def holder_mid_request(
    c: Cluster, begun: Begun, web: SyntheticWeb = WEB
) -> tuple[list[SimPeer], SimPeer]:
    """Three peers crawling ``web``; returns them and one that is not the address's
    owner, once a request of its (under the owner's lease) has begun."""
    peers = await start_cluster(c, 3, web)
    peers[0].peer.seed_urls([web.seed_url()])
    owner = Ring([p.peer_id for p in peers]).owner(ADDRESS)
    others = {p.host: p for p in peers if p.peer_id != owner}
    with trio.fail_after(300):
        await c.server.log.wait_for_count(WARM_UP)
        _, host = await begun.first_after(trio.current_time(), lambda client: client in others)
    return peers, others[host]


async def next_request_after(begun: Begun, at: float, by: list[SimPeer], within: float) -> float:
    """When the first request of a peer of ``by`` began after ``at``; fails if none
    began within ``within`` seconds of it."""
    hosts = {p.host for p in by}
    with trio.fail_after(at + within - trio.current_time()):
        when, _ = await begun.first_after(at, lambda client: client in hosts)
    return when


@SEEDS
async def test_a_killed_holder_holds_the_address_only_until_the_fence(
    seed: int,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    begun = Begun(monkeypatch)
    async with cluster(tmp_path, WEB, seed=seed) as c:
        peers, holder = await holder_mid_request(c, begun)
        await c.kill(holder)
        killed_at = trio.current_time()
        rest = [p for p in peers if p is not holder]
        resumed = await next_request_after(begun, killed_at, rest, FREED_WITHIN)
        print(
            f"\nholder killed at {killed_at:.1f}; address asked again +{resumed - killed_at:.1f} s"
        )
        with trio.fail_after(60):
            await c.server.log.wait_for(lambda log: log.entries[-1].start > resumed + 10)
        assert overlaps(list(c.server.log), IP_DELAY) == (0, 0)


@SEEDS
async def test_a_cut_off_holder_holds_the_address_only_until_the_fence(
    seed: int,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cut off, the holder goes on until its majority lease runs out, then pauses and
    drops its request: the majority's next request to the address comes after, and
    once healed the holder's release (sent again and again meanwhile) is answered."""
    begun = Begun(monkeypatch)
    async with cluster(tmp_path, WEB, seed=seed) as c:
        peers, holder = await holder_mid_request(c, begun)
        rest = [p for p in peers if p is not holder]
        c.net.partition([holder.host], [p.host for p in rest])
        cut_at = trio.current_time()
        resumed = await next_request_after(begun, cut_at, rest, FREED_WITHIN)
        print(f"\nholder cut off at {cut_at:.1f}; address asked again +{resumed - cut_at:.1f} s")
        assert holder.peer.crawler.paused is not None
        with trio.fail_after(60):
            await c.server.log.wait_for(lambda log: log.entries[-1].start > resumed + 10)
        c.net.heal()
        with trio.fail_after(120):
            await c.server.log.wait_for(
                lambda log: (
                    log.entries[-1].peer == holder.peer_id and log.entries[-1].start > resumed
                )
            )
        assert overlaps(list(c.server.log), IP_DELAY) == (0, 0)


@SEEDS
async def test_a_lost_release_is_sent_again(
    seed: int,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The holder's release is lost (a connection that broke with it in the kernel's
    buffer): the owner answers none, and the holder sends it again a second later."""
    begun = Begun(monkeypatch)
    async with cluster(tmp_path, WEB, seed=seed) as c:
        peers, holder = await holder_mid_request(c, begun)
        leases = holder.peer._ip_leases
        send, lost, lost_at = leases._send, trio.Event(), list[float]()

        async def losing(where: str, message: Message) -> bool:
            if isinstance(message, IpRelease) and not lost.is_set():
                lost_at.append(trio.current_time())
                lost.set()
                return True  # written, and lost on the way
            return await send(where, message)

        leases._send = losing
        with trio.fail_after(30):
            await lost.wait()
        # Sent again a second later; then the address's delay (the server's pace:
        # about a second here) and the next ask.
        within = RELEASE_RESEND + 2.0
        resumed = await next_request_after(begun, lost_at[0], peers, within)
        print(
            f"\nrelease lost at {lost_at[0]:.1f}; address asked again +{resumed - lost_at[0]:.2f} s"
        )
        with trio.fail_after(60):
            await c.server.log.wait_for(lambda log: log.entries[-1].start > resumed + 5)
        assert overlaps(list(c.server.log), IP_DELAY) == (0, 0)
        assert sum(p.peer.status().ip_lease_timeouts for p in peers) == 0
