"""A member that stays in the ring but takes nothing (its disk refuses writes): the URLs
the other peers find for it wait in their outboxes on disk, and what memory holds of
them stays under the cap; once it takes writes again, every page is crawled once.
Seeds as in test_churn_memory.py (``UBIPY_SEEDS``)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.cluster.harness import cluster
from tests.cluster.test_churn_memory import SEEDS
from ubipy.config import CrawlConfig
from ubipy.store import NewURL
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth

WEB = SyntheticWeb(WebSpec(seed=5, hosts=12, pages_per_host=40, latency=0.05))
HELD_MAX = 3


def _small_memory(config: CrawlConfig) -> CrawlConfig:
    forwarding = dataclasses.replace(config.forwarding, held_max=HELD_MAX, batch_size=1)
    return dataclasses.replace(config, forwarding=forwarding)


@SEEDS
@pytest.mark.parametrize("then", ["takes writes again", "dies", "a cannot read them at first"])
async def test_urls_for_a_member_that_takes_nothing_wait_on_disk_not_in_memory(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, then: str, seed: int
) -> None:
    """Then b takes writes again, and is sent them; or b dies, and they go to the hosts'
    new owners (a among them: those come home), which crawl them; or b takes writes
    again and a's first reads of its outbox fail (a's committer reads it again)."""
    async with cluster(tmp_path, WEB, seed=seed) as c:
        sims = await c.start_joined(3, tune=_small_memory)
        ring = sims[0].peer._router
        assert ring is not None
        # b: the peer with the most hosts, a: the next (a small web leaves one with few)
        owned = {s.peer_id: sum(ring.owner(h) == s.peer_id for h in WEB.host_names()) for s in sims}
        b, a, _ = sorted(sims, key=lambda s: owned[s.peer_id], reverse=True)
        router = a.peer._router
        assert router is not None
        ours = [i for i, h in enumerate(WEB.host_names()) if router.owner(h) == a.peer_id]
        seeds = [WEB.url(i) for i in ours]  # a's hosts: a crawls, and finds b's links
        truth = ground_truth(WEB, seeds)
        b.peer.shard._conn.execute("PRAGMA query_only = ON")
        a.peer.seed_urls(seeds)
        most_held = 0

        async def watch() -> None:
            nonlocal most_held
            while True:  # sampled on the virtual clock: a's memory as the crawl goes
                most_held = max(most_held, router.held(b.peer_id))
                await trio.sleep(0.01)

        async with trio.open_nursery() as watching:
            watching.start_soon(watch)
            with trio.fail_after(300):  # a and c crawl all they can reach without b
                for sim in c.running:
                    if sim is not b:
                        await sim.peer.crawler.wait_idle()
            await trio.sleep(30)  # virtual: b probed, silent, a while longer
            watching.cancel_scope.cancel()
        # More waits for b than memory holds: the rest in the outbox on disk alone.
        outbox = a.peer.shard._conn.execute(
            "SELECT count(*) FROM outbox WHERE host IN (SELECT value FROM json_each(?))",
            (json.dumps([h for h in WEB.host_names() if router.owner(h) == b.peer_id]),),
        ).fetchone()[0]
        assert most_held <= HELD_MAX < outbox and router.stats.spilled_urls > 0
        assert not b.ended.is_set()
        # Marked so (the last found may wait for the next commit's marks; one found
        # again with OPIC cash may be held and marked).
        marked = a.peer.shard._conn.execute("SELECT count(*) FROM outbox WHERE spilled = 1")
        assert outbox - router.held(b.peer_id) - 2 <= marked.fetchone()[0] <= outbox
        home: list[int] = []  # each read back of a's own rows, after b's death
        if then == "dies":
            reload = router.reload

            def reload_counted(owner: str, *args: Any, **kwargs: Any) -> list[NewURL]:
                taken = reload(owner, *args, **kwargs)
                if owner == a.peer_id:
                    home.append(len(taken))
                return taken

            router.reload = reload_counted  # type: ignore[method-assign]
            await c.kill(b)
        else:
            if then == "a cannot read them at first":
                failures: list[float] = []
                shard, read = a.peer.shard, a.peer.shard.outbox_spilled_hosts

                def failing() -> list[str]:
                    if len(failures) < 3:
                        failures.append(trio.current_time())
                        raise sqlite3.OperationalError("disk I/O error")
                    return read()

                shard.outbox_spilled_hosts = failing  # type: ignore[method-assign]
            b.peer.shard._conn.execute("PRAGMA query_only = OFF")
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(truth) == set())
        forwarder = a.peer._forwarder
        assert forwarder is not None
        with trio.fail_after(120):
            while router.backlog():  # the last acknowledgements
                await forwarder.drained.wait()
        if then == "a cannot read them at first":
            assert len(failures) == 3
        # b's hosts that are a's now came home out of a's outbox a chunk at a time.
        assert max(home, default=0) <= HELD_MAX, home
        for sim in c.running:
            await c.kill(sim)
    assert Referee(c.server.log, WEB).duplicates() == []
