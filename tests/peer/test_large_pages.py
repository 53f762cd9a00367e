"""Large pages are parsed in slices, one such page at a time, so that the loop runs
between two slices: read with the others before a commit, pages that came together
were parsed one after another with nothing else running (a 10 MiB page of nested tags
takes a second: 40 held a peer's loop 19.5 s, and peers of a cluster were declared
dead, QA)."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.crawling import crawl_until_idle
from ubipy.config import CrawlConfig, PolitenessConfig
from ubipy.fetch import Entry, FetchResult, ParsedPage, parse_html
from ubipy.peer import pageanswers, reading
from ubipy.steps import Steps
from ubipy.store import Shard

HTML = {"content-type": "text/html"}


class _Polls(trio.abc.Instrument):
    """Counts the times the loop looks for I/O: once between two batches of tasks."""

    def __init__(self) -> None:
        self.polls = 0

    def before_io_wait(self, timeout: float) -> None:
        self.polls += 1


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

    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=0.0))
    shard = Shard.open(tmp_path)
    trio.lowlevel.add_instrument(polls)
    try:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(serve)) as client:
            crawler = await crawl_until_idle(
                config, shard, client, [f"http://h{i}.test/" for i in range(hosts)]
            )
    finally:
        trio.lowlevel.remove_instrument(polls)
        shard.close()
    assert len(parsed) == hosts and len(steps_at) >= 4 * hosts
    assert len(set(steps_at)) == len(steps_at), steps_at
    whole = parse_html(large, "http://h0.test/")
    assert all(p.title == whole.title and len(p.links) == len(whole.links) == 1 for p in parsed)
    assert crawler.stats.pages == 2 * hosts
