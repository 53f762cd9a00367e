"""Large pages are parsed in slices, one such page at a time, so that the loop runs
between two slices: read with the others before a commit, pages that came together
were parsed one after another with nothing else running (a 10 MiB page of nested tags
takes a second: 40 held a peer's loop 19.5 s, and peers of a cluster were declared
dead, QA)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Coroutine
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.crawling import crawl_until_idle
from ubipy.config import CrawlConfig, PolitenessConfig
from ubipy.fetch import Entry, FetchResult, ParsedPage, parse_html
from ubipy.fetch.robots import LARGE_ROBOTS, PRODUCT_TOKEN, RobotsRules
from ubipy.peer import pageanswers, reading
from ubipy.peer.crawler import Crawler
from ubipy.steps import Steps
from ubipy.store import Shard

HTML = {"content-type": "text/html"}


class _Polls(trio.abc.Instrument):
    """Counts the times the loop looks for I/O: once between two batches of tasks."""

    def __init__(self) -> None:
        self.polls = 0

    def before_io_wait(self, timeout: float) -> None:
        self.polls += 1


async def _crawled(
    tmp_path: Path,
    serve: Callable[[httpx2.Request], Coroutine[None, None, httpx2.Response]],
    seeds: list[str],
    polls: _Polls | None = None,
) -> Crawler:
    """A crawl of ``seeds`` against ``serve`` to its end, ``polls`` counting."""
    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=0.0))
    shard = Shard.open(tmp_path)
    if polls is not None:
        trio.lowlevel.add_instrument(polls)
    try:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(serve)) as client:
            return await crawl_until_idle(config, shard, client, seeds)
    finally:
        if polls is not None:
            trio.lowlevel.remove_instrument(polls)
        shard.close()


async def test_large_pages_that_come_together_are_parsed_a_slice_at_a_time(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each host's home page is large (three slices of the parser's feed), all asked
    at once: no two slices, of one page or of two, are parsed between the same two
    looks for I/O; each page is parsed as a whole page would be, and read (its link
    followed)."""
    hosts = 6
    polls = _Polls()
    steps_at: list[int] = []
    parsed: list[ParsedPage] = []

    def page_parsing(entry: Entry, result: FetchResult, config: CrawlConfig) -> Steps[ParsedPage]:
        steps = reading.page_parsing(entry, result, config)
        while True:
            steps_at.append(polls.polls)
            try:
                next(steps)
            except StopIteration as done:
                page: ParsedPage = done.value
                parsed.append(page)
                return page
            yield

    monkeypatch.setattr(pageanswers, "page_parsing", page_parsing)
    monkeypatch.setattr(pageanswers, "READ_SLICE", 0.0)  # a step a slice
    large = b"<title>large</title>" + b"<p>text</p>" * 60_000 + b'<a href="/b">b</a>'
    assert len(large) > 2 * 256 * 1024

    async def serve(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/":
            return httpx2.Response(200, headers=HTML, content=large)
        return httpx2.Response(200, headers=HTML, content=b"<title>b</title>")

    crawler = await _crawled(tmp_path, serve, [f"http://h{i}.test/" for i in range(hosts)], polls)
    assert len(parsed) == hosts and len(steps_at) >= 4 * hosts
    assert len(set(steps_at)) == len(steps_at), steps_at
    whole = parse_html(large, "http://h0.test/")
    assert all(p.title == whole.title and len(p.links) == len(whole.links) == 1 for p in parsed)
    assert crawler.stats.pages == 2 * hosts


async def test_large_robots_txts_are_parsed_one_at_a_time_beside_the_event_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each host's robots.txt is large (a parse of 500 KiB of wildcard rules takes a
    quarter of a second, QA), all asked at once: each is parsed while the loop goes on
    looking for I/O (three looks at least during each parse, a task beside the crawl
    waking every millisecond, as a peer's membership and links do), no two at once,
    and each is obeyed. On the real clock: a parse by a thread takes no time on
    the autojump clock's, which jumps to the crawl's patience meanwhile."""
    hosts = 6
    polls = _Polls()
    parsed_at: list[int] = []
    real = RobotsRules.parse
    looked = threading.Event()

    class _Looks(trio.abc.Instrument):
        def before_io_wait(self, timeout: float) -> None:
            if parsed_at and polls.polls >= parsed_at[-1] + 3:
                looked.set()

    def parse(body: bytes, agent: str = PRODUCT_TOKEN) -> RobotsRules:
        if len(body) >= LARGE_ROBOTS:
            looked.clear()
            parsed_at.append(polls.polls)
            # On the loop's own thread this waited in vain (no look while it ran).
            assert looked.wait(10.0), "the event loop stood still during the parse"
        return real(body, agent)

    monkeypatch.setattr(RobotsRules, "parse", parse)
    rules = "".join(f"Disallow: /*private{i}*\n" for i in range(4000))
    robots = f"User-agent: *\n{rules}Disallow: /no\n".encode()
    assert len(robots) >= LARGE_ROBOTS
    asked: list[str] = []

    async def serve(request: httpx2.Request) -> httpx2.Response:
        asked.append(request.url.path)
        if request.url.path == "/robots.txt":
            return httpx2.Response(200, content=robots)
        return httpx2.Response(200, headers=HTML, content=b'<a href="/no">no</a><a href="/b">b</a>')

    async def beside() -> None:
        for _ in range(100_000):  # 100 s at most
            await trio.sleep(0.001)

    looks = _Looks()
    trio.lowlevel.add_instrument(looks)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(beside)
            seeds = [f"http://h{i}.test/" for i in range(hosts)]
            crawler = await _crawled(tmp_path, serve, seeds, polls)
            nursery.cancel_scope.cancel()
    finally:
        trio.lowlevel.remove_instrument(looks)
    assert len(parsed_at) == hosts and len(set(parsed_at)) == hosts, parsed_at
    assert "/no" not in asked and crawler.stats.pages == 2 * hosts


async def test_a_sitemap_that_is_a_large_page_is_parsed_a_slice_at_a_time(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A URL robots.txt names as a sitemap, answered with a large HTML page, is read as
    a page: parsed in slices as the others are, not whole when read (a review)."""
    sliced: list[str] = []
    real = reading.page_parsing

    def page_parsing(entry: Entry, result: FetchResult, config: CrawlConfig) -> Steps[ParsedPage]:
        sliced.append(entry.url)
        return real(entry, result, config)

    monkeypatch.setattr(pageanswers, "page_parsing", page_parsing)
    large = b"<title>large</title>" + b"<p>text</p>" * 60_000 + b'<a href="/b">b</a>'

    async def serve(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(200, content=b"User-agent: *\nSitemap: http://h.test/map\n")
        if request.url.path == "/map":
            return httpx2.Response(200, headers=HTML, content=large)
        return httpx2.Response(200, headers=HTML, content=b'<title>b</title><a href="/b">b</a>')

    crawler = await _crawled(tmp_path, serve, ["http://h.test/"])
    assert sliced == ["http://h.test/map"]
    assert crawler.stats.pages == 3  # /, /map read as a page, and /b it links to
