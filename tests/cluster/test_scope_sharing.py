"""Seeds of many sites widen every peer's scope: the seeded peer shares the new roots
and the seeds' hosts in frames each member takes (a SCOPE frame of more than 10,000
roots is refused), and after a later seed only what that seed brought. A member
suspected while seeds came gets them when it is heard from again; a frame lost without
a suspicion is sent again until acknowledged."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.cluster.harness import SimPeer, cluster, host_of, one_view
from tests.cluster.test_dns import Answering, moved
from ubipy.config import BoundsConfig, Scope
from ubipy.fetch import host_key
from ubipy.membership import MemberState
from ubipy.net import Reply
from ubipy.peer import peer as peer_module
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth
from ubipy.wire import Message
from ubipy.wire import Scope as WireScope

SITES = 12_000


async def test_the_roots_of_many_seeds_reach_every_member(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A slow web: the crawl of the seeds, not this test's, barely starts meanwhile.
    web = SyntheticWeb(WebSpec(seed=3, hosts=2, pages_per_host=2, latency=20.0))
    async with cluster(tmp_path, web, seed=1) as c:
        a = await c.start(0)
        b = await c.start(1, join=a)
        both = {a.peer_id, b.peer_id}
        with trio.fail_after(30):
            await c.wait_until(
                lambda: a.peer.membership.alive_ids() == b.peer.membership.alive_ids() == both
            )
        took = b.peer.crawler.add_scope_roots
        arrived = trio.Event()
        expected = {f"site{i:05d}.example" for i in range(SITES + 1)}
        hosts = {f"www.site{i:05d}.example" for i in range(SITES)} | {f"site{SITES:05d}.example"}

        def add_scope_roots(roots: Iterable[str], seeds: Iterable[str] = ()) -> bool:
            new = took(roots, seeds)
            scope = b.peer.crawler.scope
            if scope.roots >= expected and scope.seeds >= hosts:
                arrived.set()
            return new

        b.peer.crawler.add_scope_roots = add_scope_roots  # type: ignore[method-assign]
        answer = a.peer.seed_urls([f"http://www.site{i:05d}.example/" for i in range(SITES)])
        assert (answer.offered, answer.refused) == (SITES, ())
        a.peer.seed_urls([f"http://site{SITES:05d}.example/", "http://www.site00001.example/x"])
        with trio.fail_after(30):
            await arrived.wait()
        scope_frames = a.peer.links.stats.frames_out["SCOPE"]
        rejected = dict(b.peer.links.stats.rejected)
        # Not a graceful stop: handing thousands of hosts over is not this test's.
        await c.kill(a)
        await c.kill(b)

    assert rejected == {}
    # A thousand roots a frame, as many hosts, and the later seed's new root and host.
    assert scope_frames == 2 * (SITES // 1000) + 2


async def test_a_member_suspected_while_seeds_came_gets_their_scope_when_heard_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The SCOPE frames sent while a member could not be reached are lost; it used to
    drop, as out of scope, every link into the seeds' sites on the hosts it owns (7 of
    101 pages never fetched in a review's run). It gets them when it refutes."""
    web = SyntheticWeb(WebSpec(seed=5, hosts=6, pages_per_host=10, latency=0.02))
    truth = ground_truth(web, [web.seed_url()])
    async with cluster(tmp_path, web, seed=2) as c:
        a, b, d = await c.start_joined(3)
        c.net.partition([host_of(a.index), host_of(d.index)], [host_of(b.index)])
        with trio.fail_after(120):
            await c.wait_until(lambda: _state(a, b) is MemberState.SUSPECT)
        assert a.peer.seed_urls([web.seed_url()]).admitted == 1
        c.net.heal()
        with trio.fail_after(120):
            await c.wait_until(lambda: _state(a, b) is MemberState.ALIVE and one_view([a, b, d]))
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
        assert b.peer.crawler.scope.roots == a.peer.crawler.scope.roots != frozenset()
        assert b.peer.crawler.stats.out_of_scope == 0
        for sim in (a, b, d):
            await c.kill(sim)


def _state(observer: SimPeer, member: SimPeer) -> MemberState | None:
    seen = observer.peer.membership.member(member.peer_id)
    return None if seen is None else seen.state


async def test_a_seed_that_redirects_elsewhere_takes_the_scope_there_on_every_peer(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Under --scope host, a seed that redirects to another host (a bare domain to www.,
    an old name to a new one) used to end the crawl at its redirect, the target out of
    scope. The target's host joins the scope, on every peer, as the seed's did."""
    spec = WebSpec(seed=8, hosts=3, pages_per_host=4, latency=0.05)
    plain = SyntheticWeb(spec)
    seed_host, new_host = plain.host_names()[:2]
    web = Answering(spec, {plain.seed_url(): moved(f"http://{new_host}/")})
    async with cluster(tmp_path, web, seed=6) as c:
        sims = await c.start_joined(2, bounds=BoundsConfig(scope=Scope.HOST))
        sims[0].peer.seed_urls([web.seed_url()])
        with trio.fail_after(300):
            await c.server.log.wait_for(lambda log: any(r.host == new_host for r in log))
            for sim in sims:
                await sim.peer.crawler.wait_idle()
        assert all(new_host in s.peer.crawler.scope.roots for s in sims)
        for sim in sims:
            await c.kill(sim)
    asked = {r.host for r in c.server.log}
    assert asked == {seed_host, new_host}  # no third host: the scope is still by host
    new_pages = {r.target_path for r in c.server.log if r.host == new_host}
    assert len(new_pages - {"/robots.txt", "/sitemap.xml"}) > 1  # crawled, not one page


async def test_a_scope_frame_lost_without_a_suspicion_is_sent_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A SCOPE frame written to a connection that then broke is lost, and the member
    is not suspected (the next frame dials afresh): it used to drop, as out of scope,
    every link into the seeds' sites on the hosts it owns. Unacknowledged, the frame
    is sent again."""
    web = SyntheticWeb(WebSpec(seed=5, hosts=6, pages_per_host=10, latency=0.02))
    truth = ground_truth(web, [web.seed_url()])
    async with cluster(tmp_path, web, seed=2) as c:
        a, b = await c.start_joined(2)
        send, lost = a.peer.scopes._send, list[Message]()

        async def losing_the_first(address: str, message: Message) -> bool:
            if address == b.address and not lost:
                lost.append(message)
                return True  # written, as far as the sender can tell
            return await send(address, message)

        a.peer.scopes._send = losing_the_first
        assert a.peer.seed_urls([web.seed_url()]).admitted == 1
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
        assert lost != [] and b.peer.crawler.scope.roots == a.peer.crawler.scope.roots
        assert b.peer.crawler.scope.seeds == a.peer.crawler.scope.seeds
        assert b.peer.crawler.stats.out_of_scope == 0
        assert b.peer.crawler.stats.pages > 0  # it owns some of the sites
        # The lost frame again, and the seeds' hosts once: each acknowledged.
        assert a.peer.links.stats.frames_out["SCOPE"] == 2
        assert b.peer.links.stats.frames_out["SCOPE_ACK"] == 2
        for sim in (a, b):
            await c.kill(sim)


async def test_a_seed_that_reaches_its_owner_before_its_scope_frame_brings_its_root(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A seed given to a goes to its host's owner b in a URL batch, its scope in a
    SCOPE frame; when the frame is late (lost and sent again after a back-off, or held
    to a member's old address), b used to fetch the seed and drop its links as out of
    scope. A seed in a batch (depth 0, no redirect before it) brings its root with it,
    whatever becomes of the frame."""
    web = SyntheticWeb(WebSpec(seed=5, hosts=6, pages_per_host=10, latency=0.02))
    async with cluster(tmp_path, web, seed=4) as c:
        a, b = await c.start_joined(2)
        send = a.peer.scopes._send
        held = list[Message]()

        async def never_to_b(address: str, message: Message) -> bool:
            if address == b.address:
                held.append(message)
                return True  # written, as far as the sender can tell
            return await send(address, message)

        a.peer.scopes._send = never_to_b
        router = a.peer._router
        assert router is not None
        seed = next(url for i in range(6) if router.owner(host_key(url := web.url(i))) == b.peer_id)
        truth = ground_truth(web, [seed])
        assert a.peer.seed_urls([seed]).forwarded == 1
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
        assert held != []  # no SCOPE frame reached b
        assert b.peer.crawler.scope.roots == a.peer.crawler.scope.roots != frozenset()
        # Not the seed's host: its rights (an address otherwise refused) come only with
        # the frame, since a URL from an earlier version may look like a seed.
        assert b.peer.crawler.scope.seeds == frozenset() != a.peer.crawler.scope.seeds
        assert b.peer.crawler.stats.out_of_scope == 0
        for sim in (a, b):
            await c.kill(sim)


async def test_a_peer_of_an_earlier_version_gets_each_scope_frame_once_and_no_ack(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rolling upgrade: b is of an earlier version, which acknowledges no SCOPE and
    takes no SCOPE_ACK (it counts a frame of a kind it does not know as a bad frame,
    and cuts a connection after four in a row). Its membership frames say it takes
    nothing: it is sent each frame once, as before, and no acknowledgement."""
    web = SyntheticWeb(WebSpec(seed=5, hosts=2, pages_per_host=2, latency=20.0))
    async with cluster(tmp_path, web, seed=3) as c:
        a = await c.start(0)
        with monkeypatch.context() as earlier:
            earlier.setattr(peer_module, "TAKES", ())
            b = await c.start(1, join=a)
        with trio.fail_after(60):
            await c.wait_until(lambda: one_view([a, b]))
        taken, both = list[WireScope](), trio.Event()

        async def as_an_earlier_version(sender: str, scope: WireScope, reply: Reply) -> None:
            b.peer.crawler.add_scope_roots(scope.roots, scope.seeds)
            taken.append(scope)
            if len(taken) == 2:
                both.set()

        b.peer.handle(WireScope, as_an_earlier_version)
        a.peer.seed_urls([web.seed_url()])
        b.peer.seed_urls([f"http://{web.host_names()[1]}/"])
        with trio.fail_after(60):
            await both.wait()  # the roots' frame and the hosts' frame
        await trio.sleep(300)  # virtual: time for more sends, were there any
        assert len(taken) == a.peer.links.stats.frames_out["SCOPE"] == 2
        assert b.peer.crawler.scope.roots == a.peer.crawler.scope.roots != frozenset()
        # b's own seeds reached a, which did not acknowledge them.
        assert a.peer.crawler.scope.seeds == b.peer.crawler.scope.seeds
        assert a.peer.links.stats.frames_out["SCOPE_ACK"] == 0
        for sim in (a, b):
            await c.kill(sim)
