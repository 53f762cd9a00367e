"""Two live peers under one id: a data directory copied from a live peer's, started as
a new peer (a cloned disk image, a ``cp -r`` to start a second one), on the in-memory
network under the autojump clock.

Each heard the other's ALIVE about their id and outbid it, without end, and both
owned the id's share of the ring and fetched its hosts. Now the one on the greater
address stops, without a leave, and the id is the other's. ``UBIPY_SEEDS`` picks the
seeds, as in test_churn_memory.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import trio
import trio.testing

from tests.cluster.harness import cluster
from tests.cluster.test_churn_memory import SEEDS
from ubipy.membership import MemberState
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth

WEB = SyntheticWeb(WebSpec(seed=23, hosts=24, pages_per_host=20, latency=0.05))
TRUTH = ground_truth(WEB, [WEB.seed_url()])


@SEEDS
async def test_a_copied_data_directory_stops_one_of_the_two(
    seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async with cluster(tmp_path, WEB, seed=seed) as c:
        peers = await c.start_joined(3, delay=1.0)
        original = peers[1]
        shutil.copytree(original.data, c.tmp / "p3")  # its lock file too, as cp -r does
        copy = await c.start(3, join=peers[0], delay=1.0)
        assert copy.peer_id == original.peer_id and copy.address != original.address
        # Of the two, the one on the greater address stops, within a second of the
        # copy's join (each tells the other its outbids straight; it took 30-80 s of
        # push-pulls before); the other goes on.
        stopped, kept = sorted([original, copy], key=lambda p: p.address, reverse=True)
        with trio.fail_after(1):
            await stopped.ended.wait()
        assert stopped.exit == "stopped" and stopped.peer.clashed_with == kept.address
        assert not kept.ended.is_set() and kept.peer.clashed_with is None
        assert stopped.count("also that of the live peer") == 1
        # Then a crawl: with no leave for the id, the others come to hold it at the peer
        # that stayed (it outbids the copy's last ALIVE, or refutes its suspicion; looked
        # at with each request the web answers), and the crawl ends whole.
        others = [peers[0], peers[2]]
        # Seeded at another peer, which may still hold the id at the copy's address:
        # the seed URL and its scope each go again to where the id is now, the URL
        # maybe first (it brings its scope with it).
        others[0].peer.seed_urls([WEB.seed_url()])

        def settled() -> bool:
            views = [p.peer.membership.member(kept.peer_id) for p in others]
            return all(v is not None and v.address == kept.address for v in views)

        with trio.fail_after(900):
            await c.server.log.wait_for(lambda log: settled())
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
        for p in others:
            view = p.peer.membership.member(kept.peer_id)
            assert view is not None and view.state is MemberState.ALIVE
            assert p.count(rf"member {kept.peer_id} left") == 0


@SEEDS
async def test_a_copy_that_joins_its_original_directly_stops(
    seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """With no third peer to hear both, each took the other's frames for its own
    reflected: the copy tried its join for ever (QA). It asks the address that does
    not answer who is there, and stops; the original crawls on, whole."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        original = await c.start(0, delay=1.0)
        shutil.copytree(original.data, c.tmp / "p1")
        copy = await c.start(1, join=original, delay=1.0)
        assert copy.peer_id == original.peer_id
        with trio.fail_after(10):
            await copy.ended.wait()
        assert copy.exit == "stopped" and copy.peer.clashed_with == original.address
        assert not original.ended.is_set() and original.peer.clashed_with is None
        original.peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(900):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
        assert Referee(c.server.log, WEB).duplicates() == []
