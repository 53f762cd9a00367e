"""The crawler's count of URLs pending, which tells a peer (and the demo) when the
crawl is done: it must come back to 0 whatever order things are saved in; and
what it stores and counts for a page that could not be had."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from tests.peer.crawling import crawl_until_idle
from tests.peer.test_handoff import crawler_at
from tests.peer.test_replica import page
from ubipy.config import BoundsConfig, CrawlConfig, FetchConfig, PolitenessConfig
from ubipy.fetch.politeness import HostRobots, JobKind
from ubipy.fetch.urls import fingerprint
from ubipy.peer import reading as reading_module
from ubipy.peer.crawler import Crawler
from ubipy.peer.crawlstats import CrawlStats
from ubipy.store.shard import NewURL, Shard

PAGE = "http://a.test/"


@asynccontextmanager
async def crawled(tmp: Path, handler: Any) -> AsyncIterator[Crawler]:
    """A crawler that fetched PAGE from ``handler`` (robots.txt: none; no sitemaps
    looked for), once, and stopped."""

    async def serve(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        return await handler(request)  # type: ignore[no-any-return]

    shard = Shard.open(tmp)
    config = CrawlConfig(
        data_dir=tmp,
        politeness=PolitenessConfig(delay=0.0),
        fetch=FetchConfig(max_retries=0, fetch_deadline=5.0),
        bounds=BoundsConfig(sitemaps=False),
    )
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(serve)) as client:
        crawler = Crawler(config, shard, client)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(crawler.run)
                crawler.seed([PAGE])
                await crawler.wait_idle()
                crawler.stop()
            yield crawler
        finally:
            shard.close()


def stored_error(crawler: Crawler) -> str | None:
    [row] = list(crawler._shard.iter_pages())
    assert row["url"] == PAGE
    return row["error"]  # type: ignore[no-any-return]


async def test_a_page_over_the_fetch_deadline_is_stored_as_a_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def never(_: httpx2.Request) -> httpx2.Response:
        await trio.sleep_forever()

    async with crawled(tmp_path, never) as c:
        assert stored_error(c) == "timeout: over the fetch deadline"
        assert (c.stats.errors, c.stats.timeouts, c.stats.pages) == (1, 1, 0)
        assert c.pending == 0


async def test_a_refused_connection_is_an_error_but_not_a_timeout(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    async def refuse(_: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("connection refused")

    async with crawled(tmp_path, refuse) as c:
        assert stored_error(c) == "ConnectError: connection refused"
        assert (c.stats.errors, c.stats.timeouts, c.stats.pages) == (1, 0, 0)


async def test_a_page_that_breaks_the_parser_is_stored_as_an_error_not_fetched_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    async def html(request: httpx2.Request) -> httpx2.Response:
        asked.append(str(request.url))
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=b"<a href=x>")

    def breaks(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the parser broke")

    monkeypatch.setattr(reading_module, "parse_html", breaks)
    async with crawled(tmp_path, html) as c:
        assert stored_error(c) == "processing failed"
        # An error, not a page besides (it was counted as both).
        assert (c.stats.errors, c.stats.timeouts, c.stats.pages) == (1, 0, 0)
        assert c.stats.statuses == {}
        assert asked == [PAGE] and c.pending == 0


def give_up(c: Crawler, gone: str) -> None:
    """The host's robots.txt never answers: the scheduler gives the host up."""
    s = c.scheduler
    now = 0.0
    while (slot := s.slot(gone)) is None or slot.robots_state is not HostRobots.GIVEN_UP:
        wake = s.next_wakeup()
        assert wake is not None
        now = max(now, wake)
        job = s.next_job(now)
        assert job is not None
        if job.host == gone:
            assert job.kind is JobKind.ROBOTS
            s.robots_answer(gone, now, status=503, location=None, body=b"")


async def test_urls_found_for_a_host_given_up_in_the_same_commit_are_counted_once(
    tmp_path: Path,
) -> None:
    gone, other = "gone.test", "other.test"
    async with crawler_at(tmp_path) as c:
        c.seed([f"http://{gone}/", f"http://{other}/"])
        assert c.pending == 2
        give_up(c, gone)
        # In one commit: the host given up, and other.test's page, which links to a
        # new URL of gone.test.
        link = f"http://{gone}/found"
        c._commits.close_host(gone, "robots.txt unreachable")
        c._commits.answered(page(f"http://{other}/"), [NewURL(fingerprint(link), link, gone, 1)])
        assert c._flush() and c._flush()
        assert c._shard.pending_count(gone) == 0 and c._shard.pending_count(other) == 0
        assert c.pending == 0


async def test_a_page_of_a_host_given_up_before_its_commit_is_counted_once(
    tmp_path: Path,
) -> None:
    # A page answered, then its host given up (a later DNS lookup refused, say)
    # before the commit: the page settles its row, and closing the host counts off
    # only the rows nothing else settles.
    async with crawler_at(tmp_path) as c:
        c.seed(["http://h.test/", "http://h.test/next"])
        assert c.pending == 2
        c._commits.answered(page("http://h.test/"))
        c._commits.close_host("h.test", "dns: no such name")
        assert c._flush()
        assert c.pending == 0 and c._shard.counts().pending == 0
        assert (c._shard.counts().done, c._shard.counts().skipped) == (1, 1)


async def test_a_url_routed_to_a_host_given_up_before_the_commit_is_counted_once(
    tmp_path: Path,
) -> None:
    gone = "gone.test"
    async with crawler_at(tmp_path) as c:
        c.seed([f"http://{gone}/"])
        give_up(c, gone)
        c._commits.close_host(gone, "robots.txt unreachable")
        # Before the commit, another peer forwards a URL of the host.
        link = f"http://{gone}/found"
        assert c.admit_routed([NewURL(fingerprint(link), link, gone, 1)]) == 1
        assert c._flush() and c._flush()
        assert c.pending == 0 and c._shard.counts().pending == 0


async def test_a_url_of_a_host_given_up_is_closed_saying_why_and_counted(
    tmp_path: Path,
) -> None:
    async with crawler_at(tmp_path) as c:
        c.seed(["http://h.test/"])
        s = c.scheduler
        job = s.next_job(0.0)
        assert job is not None and job.kind is JobKind.ROBOTS
        slot = s.slot("h.test")
        assert slot is not None
        # As the DNS stage gives a host up whose name does not resolve.
        s.robots_answer("h.test", 0.0, status=404, location=None, body=b"")
        slot.in_flight, s.in_flight = True, s.in_flight + 1
        assert s.lookup_failed("h.test", 0.0, final=True)
        c._commits.close_host("h.test", "dns: no such name")
        assert c._flush()
        link = "http://h.test/later"
        assert c.admit_routed([NewURL(fingerprint(link), link, "h.test", 1)]) == 1
        assert c._flush()
        reasons = c._shard._conn.execute("SELECT url, reason FROM frontier ORDER BY url")
        assert reasons.fetchall() == [
            ("http://h.test/", "dns: no such name"),
            (link, "dns: no such name"),  # not "robots.txt unreachable"
        ]
        assert c.stats.skipped == {"dns: no such name": 2} and c.pending == 0


def test_closures_are_counted_by_kind_not_by_the_host_a_reason_names() -> None:
    # A certificate's or a refused address's reason names the host: counted so, the
    # figures (sent each second to the control centre) grew with the crawl.
    stats = CrawlStats()
    for i in range(100):
        stats.closed(f"certificate error: hostname mismatch, certificate is not valid for 'h{i}'")
        stats.closed(f"refused: not a public address: h{i}.test", 2)
    stats.closed("dns: no such name", 3)
    assert stats.skipped == {
        "certificate error": 100,
        "refused: not a public address": 200,
        "dns: no such name": 3,
    }


@pytest.mark.parametrize(
    ("body", "headers", "followed"),
    [
        (b"<title>x</title>", {}, "/en/"),
        (b"", {}, "/en/"),  # PHP's header("Refresh: ...") and nothing after it
        (b"", {b"content-type": b"text/plain"}, "/en/"),  # a type not kept
        (b"", {b"refresh": b"0; url=/caf\xc3\xa9/"}, "/caf%C3%A9/"),
        (b"", {b"refresh": b"0; url=/caf\xe9/"}, "/caf%E9/"),
        (b'<meta name="robots" content="nofollow">', {}, None),
        (b"", {b"x-robots-tag": b"nofollow"}, None),
    ],
)
async def test_a_refresh_header_is_followed_as_a_meta_refresh_is(
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    body: bytes,
    headers: dict[bytes, bytes],
    followed: str | None,
) -> None:
    """Browsers follow a Refresh header as they follow <meta http-equiv=refresh>, whatever
    the body (often none): a site whose home page only said it there was crawled to its
    seed alone (QA); its URL in UTF-8 or not, as a Location's (a review)."""
    asked: list[str] = []

    def site(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        asked.append(request.url.raw_path.decode("ascii"))
        if request.url.path == "/":
            sent = {b"content-type": b"text/html", b"refresh": b"0; url=/en/", **headers}
            return httpx2.Response(200, headers=list(sent.items()), content=body)
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=b"<p>x</p>")

    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=0.1))
    await crawl_until_idle(config, Shard.open(tmp_path), site, ["http://site.test/"], within=60)
    assert [path for path in asked if path not in ("/", "/sitemap.xml")] == (
        [followed] if followed else []
    )
