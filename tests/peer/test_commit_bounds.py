"""What closes a commit while a crawl is busy: ``commit_every_pages`` pages, or the
bodies waiting reaching ``COMMIT_BYTES`` (held in memory until the commit), whichever
comes first."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import httpx2
import pytest

from tests.peer.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig
from ubipy.peer import crawler as crawler_module
from ubipy.store import PageRecord, Shard
from ubipy.store_config import StoreConfig

HOSTS = [f"h{i}.test" for i in range(10)]


async def _batches(tmp: Path, body: bytes, every: int) -> list[int]:
    """Pages in each commit of a crawl of one page on each of 10 hosts, one request at
    a time (so a host is always ready: no commit for want of work)."""

    def serve(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=body)

    shard = Shard.open(tmp)
    batches: list[int] = []
    record = shard.record_pages

    def counted(pages: Sequence[PageRecord]) -> None:
        batches.append(len(pages))
        record(pages)

    shard.record_pages = counted  # type: ignore[method-assign]
    config = CrawlConfig(
        data_dir=tmp,
        politeness=PolitenessConfig(delay=0.0, concurrency=1),
        bounds=BoundsConfig(sitemaps=False),
        store=StoreConfig(commit_every_pages=every, commit_interval=1000.0),
    )
    await crawl_until_idle(config, shard, serve, [f"http://{h}/" for h in HOSTS], within=60)
    return [n for n in batches if n]


async def test_a_commit_comes_at_commit_every_pages(tmp_path: Path) -> None:
    assert await _batches(tmp_path, b"x" * 100, every=4) == [4, 4, 2]


async def test_a_commit_comes_when_the_bodies_waiting_reach_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(crawler_module, "COMMIT_BYTES", 2500)
    # 1,000 bytes a page: the third page's body passes 2,500 bytes, long before 100 pages.
    assert await _batches(tmp_path, b"x" * 1000, every=100) == [3, 3, 3, 1]
