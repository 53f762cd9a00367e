"""Large pages are read one at a time as they come, so that the loop runs between
two: read with the others before a commit, pages that came together were parsed one
after another with nothing else running (a 10 MiB page of nested tags takes a second:
40 held a peer's loop 19.5 s, and peers of a cluster were declared dead, QA)."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.crawling import crawl_until_idle
from ubipy.config import CrawlConfig, PolitenessConfig
from ubipy.fetch import parse
from ubipy.fetch.parse import ParsedPage
from ubipy.peer.pageanswers import LARGE_PAGE
from ubipy.store import Shard

HTML = {"content-type": "text/html"}


class _Polls(trio.abc.Instrument):
    """Counts the times the loop looks for I/O: once between two batches of tasks."""

    def __init__(self) -> None:
        self.polls = 0

    def before_io_wait(self, timeout: float) -> None:
        self.polls += 1


async def test_large_pages_that_come_together_are_read_apart(
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each host's home page is large, all asked at once: no two are parsed between
    the same two looks for I/O, and each is read (its link followed)."""
    hosts = 8
    polls = _Polls()
    read_at: list[int] = []
    real = parse.parse_html

    def parse_html(body: bytes, *args: object, **kwargs: object) -> ParsedPage:
        if len(body) >= LARGE_PAGE:
            read_at.append(polls.polls)
        return real(body, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr("ubipy.peer.reading.parse_html", parse_html)
    large = b"<title>large</title>" + b"<p>text</p>" * (LARGE_PAGE // 10) + b'<a href="/b">b</a>'

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
    assert len(read_at) == hosts and len(set(read_at)) == hosts, read_at
    assert crawler.stats.pages == 2 * hosts
