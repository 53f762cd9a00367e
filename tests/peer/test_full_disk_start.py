"""A peer started on a full disk starts, and does what the shard refused once the disk
has room: the last run's unacknowledged forwards that are its own now, and a ranked
order's index. Before, each raised out of the crawler's start, and ``ubipy peer`` died
with a traceback (found by a review)."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from ubipy.config import BoundsConfig, CrawlConfig, CrawlOrder, PolitenessConfig, StoreConfig
from ubipy.fetch import fingerprint
from ubipy.peer.crawler import Crawler
from ubipy.peer.router import Router
from ubipy.ring import Ring
from ubipy.store import NewURL, Shard, outbox

URLS = [f"http://a.test/{i}" for i in range(3000)]


def _full(shard: Shard) -> None:
    (pages,) = shard._conn.execute("PRAGMA page_count").fetchone()
    shard._conn.execute(f"PRAGMA max_page_count = {pages}")


def _room(shard: Shard) -> None:
    shard._conn.execute("PRAGMA max_page_count = 1000000")


@pytest.mark.parametrize("order", [CrawlOrder.BFS, CrawlOrder.OPIC])
async def test_a_peer_started_on_a_full_disk_admits_its_outbox_once_there_is_room(
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    order: CrawlOrder,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Read a chunk at a time, and no further while the disk is full: what waits in
    memory is one chunk, not the outbox (which may hold millions)."""
    monkeypatch.setattr(outbox, "CHUNK", 700)
    shard = Shard.open(tmp_path)
    shard.outbox_add([NewURL(fingerprint(u), u, "a.test", 1) for u in URLS])
    shard.close()
    shard = Shard.open(tmp_path)
    _full(shard)
    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.0),
        bounds=BoundsConfig(order=order),
        store=StoreConfig(storage_retry=1.0),
    )

    def site(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(404)

    # Alone on the ring: the forwards of the last run are this peer's own.
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(site)) as client:
        crawler = Crawler(config, shard, client, Router("me", Ring(["me"])))
        admitted = trio.Event()
        crawler.on_commit = lambda rows, done, marks: admitted.set()
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                await nursery.start(crawler.run)
                assert shard.counts().seen < len(URLS) and len(crawler._come_home) <= 700
                _room(shard)
                await admitted.wait()  # at the committer's next try
                crawler.stop()
    counts = shard.counts()
    assert counts.seen == len(URLS) and not shard.outbox()
    shard.close()
