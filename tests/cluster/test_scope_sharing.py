"""Seeds of many sites widen every peer's scope: the seeded peer shares the new roots
in frames each member takes (a SCOPE frame of more than 10,000 roots is refused), and
after a later seed only the roots that seed brought."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import trio
import trio.testing

from tests.cluster.harness import cluster
from ubipy.synthweb import SyntheticWeb, WebSpec

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

        def add_scope_roots(roots: Iterable[str]) -> bool:
            new = took(roots)
            if b.peer.crawler.scope.roots >= expected:
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
    # A thousand roots a frame, and the later seed's one new root in one more.
    assert scope_frames == SITES // 1000 + 1
