"""A seed that redirects widens the scope to where it leads; when the shard refuses
writes at that moment (a disk full for a while), the scope is widened all the same and
the target crawled: the save of the widened scope used to fail the page's processing,
which stored the redirect as an error and dropped its target for good."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig, Scope
from ubipy.errors import StorageError
from ubipy.store import Shard


@pytest.mark.parametrize("disk_full", [False, True], ids=["disk fine", "disk full a moment"])
async def test_a_seed_s_redirect_target_is_crawled_whatever_the_disk_says(
    disk_full: bool,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[str] = []
    seed_asked, answer = trio.Event(), trio.Event()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        asked.append(str(request.url))
        if request.url.host == "a.test":
            seed_asked.set()
            await answer.wait()  # in flight while the disk fills
            return httpx2.Response(301, headers={"Location": "http://www.b.test/"})
        return httpx2.Response(200, headers={"Content-Type": "text/html"}, text="<p>b</p>")

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.0),
        bounds=BoundsConfig(scope=Scope.DOMAIN, sitemaps=False),
    )
    shard = Shard.open(tmp_path)
    async with running_crawler(config, handler, shard) as crawler:
        crawler.seed(["http://a.test/"])
        with trio.fail_after(30):
            await seed_asked.wait()
        set_meta = shard.set_meta
        if disk_full:

            def full(key: str, value: str) -> None:
                raise StorageError("database or disk is full")

            monkeypatch.setattr(shard, "set_meta", full)
        answer.set()
        with trio.fail_after(300):
            await crawler.wait_idle()
        monkeypatch.setattr(shard, "set_meta", set_meta)
    assert asked == ["http://a.test/", "http://www.b.test/"]
    assert "b.test" in crawler.scope.roots
