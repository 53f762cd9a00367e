"""A seed that redirects widens the scope to where it leads; when the shard refuses
writes at that moment (a disk full for a while), the scope is widened all the same and
the target crawled: the save of the widened scope used to fail the page's processing,
which stored the redirect as an error and dropped its target for good. Chains of
redirects are followed twenty in a row at most, and widen the scope five times at
most, from a seed's host, on this peer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig, Scope
from ubipy.errors import StorageError
from ubipy.fetch import fingerprint
from ubipy.peer.crawler import Crawler
from ubipy.peer.reading import MAX_REDIRECTS, SCOPE_REDIRECTS
from ubipy.store import NewURL, Shard

Handler = Callable[[httpx2.Request], Awaitable[httpx2.Response]]


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


def redirecting(where: Callable[[httpx2.URL], str], asked: list[str]) -> Handler:
    """A web whose every page redirects to ``where(its URL)``; each request in
    ``asked`` (robots.txt aside, a 404)."""

    async def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        asked.append(str(request.url))
        return httpx2.Response(302, headers={"Location": where(request.url)})

    return handler


@asynccontextmanager
async def crawling(
    tmp_path: Path, handler: Handler, bounds: BoundsConfig
) -> AsyncIterator[Crawler]:
    """A crawler of ``handler``'s web, waited for until idle at the block's end."""
    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=0.1), bounds=bounds)
    async with running_crawler(config, handler, Shard.open(tmp_path)) as crawler:
        yield crawler
        with trio.fail_after(300):
            await crawler.wait_idle()


async def test_a_chain_of_redirects_is_followed_twenty_times_at_most(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Each answer a redirect to a new URL: a redirect is no hop, so neither
    --max-depth nor the path-repeat guard bounded it; the crawl never ended."""
    asked: list[str] = []
    handler = redirecting(lambda url: f"/go?n={int(url.params.get('n', '0')) + 1}", asked)
    async with crawling(tmp_path, handler, BoundsConfig(sitemaps=False, max_depth=0)) as c:
        c.seed(["http://trap.test/go?n=0"])
    assert len(asked) == 1 + MAX_REDIRECTS
    assert c.stats.refused["redirect chain"] == 1


def _next_host(url: httpx2.URL) -> str:
    return f"http://h{int(url.host.removeprefix('h').removesuffix('.test')) + 1}.test/"


async def test_a_seeds_redirects_across_hosts_widen_the_scope_a_few_times_at_most(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    asked: list[str] = []
    bounds = BoundsConfig(sitemaps=False, scope=Scope.HOST)
    async with crawling(tmp_path, redirecting(_next_host, asked), bounds) as c:
        c.seed(["http://h0.test/"])
    assert asked == [f"http://h{n}.test/" for n in range(SCOPE_REDIRECTS + 1)]
    assert len(c.scope.roots) == SCOPE_REDIRECTS + 1


async def test_a_redirect_chain_from_another_peer_does_not_widen_the_scope(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A URL at depth 0 on a host no seed was on came from another peer, partway
    through a chain it followed: this peer does not know how far. Each peer's chain
    started afresh and widened the scope again; only a chain that began on a seed's
    host, here, does."""
    asked: list[str] = []
    hops = {"a.test": "http://b.test/", "x.test": "http://y.test/"}
    handler = redirecting(lambda url: hops.get(url.host, "/"), asked)
    async with crawling(tmp_path, handler, BoundsConfig(sitemaps=False, scope=Scope.HOST)) as c:
        c.seed(["http://a.test/"])
        url = "http://x.test/"  # at depth 0: where another peer's seed led
        c.admit_routed([NewURL(fingerprint(url), url, "x.test", 0)])
    assert "b.test" in c.scope.roots and "y.test" not in c.scope.roots
    assert "http://y.test/" not in asked
