"""What a refresh's answer does to the page kept (--recrawl), judged by what the server
is asked: validators follow the server's, a failed answer is no visit of the page's
history and backs it off (a page missing three times in a row is retired), a page is
never asked twice for one due time, and a clock that ran ahead does not hold a page
back."""

from __future__ import annotations

import dataclasses
import itertools
import math
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing
from warcio.archiveiterator import ArchiveIterator

from tests.cluster.harness import wall_clock_on_trio_time
from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig, RecrawlConfig, RefreshPolicy
from ubipy.fetch import UrlFilter, content_digest, fingerprint
from ubipy.peer.hints import LastmodHints
from ubipy.peer.refreshing import Refresher
from ubipy.store import Lastmod, RefreshRow, Shard
from ubipy.store.shard import SHARD_FILE

BODY = b"<html><title>x</title>the same body</html>"


def _config(data: Path) -> CrawlConfig:
    return CrawlConfig(
        data_dir=data,
        politeness=PolitenessConfig(delay=1.0, concurrency=2),
        bounds=BoundsConfig(sitemaps=False),
        recrawl=RecrawlConfig(
            recrawl=True, policy=RefreshPolicy.UNIFORM, rate=1 / 60, min_interval=60, replan=30
        ),
    )


class _Site:
    """One page, its answers logged: (time, status, If-None-Match asked with). From
    ``switch`` on, its ETag is "v2" (the same body: a redeploy), or, with ``gone``,
    it answers 404."""

    def __init__(self, switch: float, *, gone: bool = False) -> None:
        self.switch, self.gone = switch, gone
        self.log: list[tuple[float, int, str | None]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        now = trio.current_time()
        asked = request.headers.get("if-none-match")
        etag = '"v1"' if now < self.switch else '"v2"'
        if self.gone and now >= self.switch:
            status = 404
        elif asked == etag:
            status = 304
        else:
            status = 200
        self.log.append((now, status, asked))
        if status == 200:
            headers = {"content-type": "text/html", "etag": etag}
            return httpx2.Response(200, headers=headers, content=BODY)
        return httpx2.Response(status, headers={"etag": etag} if status == 304 else {})


async def _crawl(
    site: Callable[[httpx2.Request], httpx2.Response],
    config: CrawlConfig,
    seconds: float,
    *,
    seed: str = "http://site.test/",
    clear: Callable[[str], Awaitable[bool]] | None = None,
) -> Refresher:
    """A crawl of ``site`` from ``seed`` for ``seconds`` (``clear``: what clears a
    request, an address's lease say); its refresher."""
    with wall_clock_on_trio_time():
        async with running_crawler(config, site) as crawler:
            if clear is not None:
                crawler.clear_to_fetch = clear
            crawler.seed([seed])
            await trio.sleep(seconds)
            assert crawler.refresher is not None
            return crawler.refresher


async def test_new_validators_for_the_same_body_are_asked_with_from_then_on(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Kept from the first fetch, "v1" was asked with for ever after the server's ETag
    # became "v2": a full answer at every visit (15 of them), no 304 again.
    site = _Site(300)
    refresher = await _crawl(site, _config(tmp_path), 1200)
    after = [(status, asked) for t, status, asked in site.log if t > 300]
    assert after[0] == (200, '"v1"')
    assert after[1:] and set(after[1:]) == {(304, '"v2"')}
    assert refresher.stats.changed == 0


async def test_a_page_missing_three_times_in_a_row_is_retired(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Before: asked at its interval (a minute) for as long as the crawl ran, and under
    # the history policy its history, standing still, took more and more of the budget
    # (tests/peer/test_refresh_gone.py).
    site = _Site(300, gone=True)
    refresher = await _crawl(site, _config(tmp_path), 3600)
    gone = [t for t, status, _ in site.log if status == 404]
    # Each wait twice the one before, then never asked again.
    assert len(gone) == 3
    waits = [b - a for a, b in itertools.pairwise(gone)]
    assert 120 <= waits[0] < 130 and 240 <= waits[1] < 250, waits
    assert refresher._pages == {} and refresher.stats.retired == 1
    assert refresher.stats.failed == 3 and refresher.stats.unchanged == 0


class _Outage:
    """One page answering 503 from ``start`` until ``end``, else 200 or 304 (by its
    ETag). Each request is logged as (its first try, its last, the last status): the
    fetcher's tries of one, 45 s apart at most, are one request."""

    def __init__(self, start: float, end: float) -> None:
        self.start, self.end = start, end
        self.asks: list[tuple[float, float, int]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        now = trio.current_time()
        if self.start <= now < self.end:
            status = 503
        else:
            status = 304 if request.headers.get("if-none-match") == '"v1"' else 200
        if self.asks and now - self.asks[-1][1] <= 45:
            self.asks[-1] = (self.asks[-1][0], now, status)
        else:
            self.asks.append((now, now, status))
        if status == 200:
            headers = {"content-type": "text/html", "etag": '"v1"'}
            return httpx2.Response(200, headers=headers, content=BODY)
        return httpx2.Response(status, headers={"etag": '"v1"'} if status == 304 else {})


async def test_a_page_missing_twice_is_retired_at_its_third_404_across_a_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Before: a restart counted its 404s from 0 again, and it was asked three more times.
    site = _Site(300, gone=True)
    config = _config(tmp_path)
    second = trio.Event()

    def answer(request: httpx2.Request) -> httpx2.Response:
        response = site(request)
        if sum(1 for _, status, _ in site.log if status == 404) == 2:
            second.set()
        return response

    with wall_clock_on_trio_time():
        async with running_crawler(config, answer) as crawler:
            crawler.seed(["http://site.test/"])
            with trio.fail_after(3600):
                await second.wait()
        async with running_crawler(config, site) as crawler:
            await trio.sleep(3600)
            assert crawler.refresher is not None
            assert crawler.refresher._pages == {} and crawler.refresher.stats.retired == 1
    assert sum(1 for _, status, _ in site.log if status == 404) == 3


async def test_a_failing_page_backs_off_and_a_restart_keeps_its_wait(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A page failing (503) is asked again after twice its last wait each time, and
    the failures are no visits of its history; once it answers again it is asked at
    its interval (a minute). A restart keeps its due time and its failures in a row
    (the next wait is twice the last). Before: asked every minute through the outage,
    and at once after a restart; then, the failures counted from 0 again after it."""
    site = _Outage(300, 3000)
    config = _config(tmp_path)
    with wall_clock_on_trio_time():
        async with running_crawler(config, site) as crawler:
            crawler.seed(["http://site.test/"])
            await trio.sleep(900)
            assert crawler.refresher is not None
            [fp] = crawler.refresher._pages
            page = crawler.refresher.page(fp)
            assert page is not None
            answered = sum(1 for _, _, status in site.asks if status in (200, 304))
            assert page.visits == answered
            due = page.due - time.time()
        restart = trio.current_time()
        failed = [(a, b) for a, b, status in site.asks if status == 503]
        # From its last try's answer to the next request.
        waits = [round(c - b) for (_, b), (c, _) in itertools.pairwise(failed)]
        assert len(failed) == 3 and waits == [120, 240], site.asks
        assert due > 120
        async with running_crawler(config, site) as crawler:
            await trio.sleep(3600)
    after = [(a, b) for a, b, _ in site.asks if a >= restart]
    # Not asked before its due time (its third failure's wait, 480 s, ahead at the
    # restart); then failing a fourth time in a row, it waits twice that.
    assert after[0][0] >= restart + due - 1
    assert round(after[1][0] - after[0][1]) == 960
    back = [(a, status) for a, _, status in site.asks if a >= 3000]
    assert back and {status for _, status in back} == {304}
    assert all(60 <= b - a < 62 for (a, _), (b, _) in itertools.pairwise(back)), back


async def test_a_failing_page_is_asked_once_at_each_backed_off_ask(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Its first failing ask is retried as any request is (a blip may pass); once it
    is backed off, each ask is one request. Before: three at every ask (the fetcher's
    two retries): 15 requests in five asks of a server down for 45 minutes, now 7."""
    site = _Outage(300, 3000)
    requests: list[tuple[float, int]] = []

    def counted(request: httpx2.Request) -> httpx2.Response:
        response = site(request)
        if request.url.path != "/robots.txt":
            requests.append((trio.current_time(), response.status_code))
        return response

    await _crawl(counted, _config(tmp_path), 3600)
    failed = [t for t, status in requests if status == 503]
    asks = [a for a, _, status in site.asks if status == 503]
    assert len(asks) >= 4
    assert len(failed) == len(asks) + 2  # the first ask's two retries, no more


async def test_a_page_is_not_asked_again_for_a_plan_made_while_its_request_waits(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The request waits 2 s to be cleared (an address's lease asked of another peer):
    # a plan meanwhile gave the page back as due now, and it was asked again 3 s
    # after, nine times in half an hour (found by a review).
    site = _Site(10**9)

    async def slow_clear(host: str) -> bool:
        await trio.sleep(2)
        return True

    await _crawl(site, _config(tmp_path), 1800, clear=slow_clear)
    times = [t for t, _, _ in site.log]
    assert len(times) >= 20
    assert min(b - a for a, b in itertools.pairwise(times)) >= 60


async def test_a_visit_stamped_while_the_clock_ran_ahead_does_not_hold_its_page_back(
    tmp_path: Path,
) -> None:
    now = time.time()
    year = 365 * 86400.0
    shard = Shard.open(tmp_path)
    ahead = RefreshRow(1, "http://a.test/p", "a.test", 1, 5, 2, 3600.0, now + year,
                       now + year + 600, 0.0, None, None, "d1")  # fmt: skip
    shard.save_refresh([ahead], [])
    config = CrawlConfig(data_dir=tmp_path, recrawl=RecrawlConfig(recrawl=True))
    refresher, due = _refresher_alone(config, shard)
    refresher.load()
    [(at, _)] = due["a.test"]
    # Due within its interval from now (at most the longest), not a year from now.
    assert at - trio.current_time() <= config.recrawl.max_interval
    refresher.plan()
    [(at, _)] = due["a.test"]
    assert at - trio.current_time() <= config.recrawl.max_interval
    shard.close()


def test_a_lastmod_in_the_future_is_held_against_its_host_once_a_reading() -> None:
    # A typo's year, or a post scheduled: read once, it counted against the host at
    # every visit of the unchanged page until the clock passed it.
    hints = LastmodHints()
    now = 1_700_000_000.0
    for fp in range(5):
        hints.read(fp, "a.test", "2023-11-14T00:00:00Z", now - 86400)
        hints.visited(fp, "a.test", now - 2 * 86400, changed=True)
    assert hints.trusted("a.test")
    hints.read(99, "a.test", "2033-11-14T00:00:00Z", now)
    checks = [hints.visited(99, "a.test", now + 600 * k, changed=False) for k in range(10)]
    assert checks == [False] + [None] * 9
    assert hints.trusted("a.test")
    # A new reading of a date still to come is one more claim.
    hints.read(99, "a.test", "2034-01-01T00:00:00Z", now + 7000)
    assert hints.visited(99, "a.test", now + 7200, changed=False) is False


DISALLOWED = (62.5, 150.0)  # when robots.txt forbids /p (_banned_for_a_while)


def _banned_for_a_while(
    log: list[tuple[float, str]],
) -> Callable[[httpx2.Request], httpx2.Response]:
    """A site of /p that robots.txt forbids during DISALLOWED; each request logged."""

    def site(request: httpx2.Request) -> httpx2.Response:
        now = trio.current_time()
        log.append((now, request.url.path))
        if request.url.path == "/robots.txt":
            rules = "Disallow: /p" if DISALLOWED[0] <= now < DISALLOWED[1] else "Disallow:"
            return httpx2.Response(200, content=f"User-agent: *\n{rules}\n".encode())
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=BODY)

    return site


async def test_a_refresh_refused_its_address_then_barred_is_asked_again_later(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A page due again is handed out, its address's lease refused (put back), and
    robots.txt, read again meanwhile, now forbids it: barred, it was left marked
    asked, and no plan gave it out again for the rest of the run (found by a
    review). Once robots.txt allows it again it is asked at its interval."""
    log: list[tuple[float, str]] = []
    site = _banned_for_a_while(log)

    config = _config(tmp_path)
    config = dataclasses.replace(
        config,
        politeness=dataclasses.replace(config.politeness, robots_ttl=1.5),
        recrawl=dataclasses.replace(config.recrawl, max_interval=120),
    )
    cleared: list[float] = []

    async def clear(host: str) -> bool:
        now = trio.current_time()
        if 55.0 <= now < 70.0:
            cleared.append(now)
            return len(cleared) != 2  # the second request then: refused
        return True

    refresher = await _crawl(site, config, 900, seed="http://site.test/p", clear=clear)
    assert refresher.stats.barred >= 1  # again at each reading of robots.txt while barred
    asked = [t for t, path in log if path == "/p"]
    assert [t for t in asked if t > 300], asked


async def test_a_page_barred_for_a_while_is_asked_again_once_robots_txt_allows_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """robots.txt forbids the page for a minute and a half, then allows it again: the
    page was put off for the longest interval (30 days), and not asked again."""
    log: list[tuple[float, str]] = []
    site = _banned_for_a_while(log)

    config = _config(tmp_path)
    config = dataclasses.replace(
        config, politeness=dataclasses.replace(config.politeness, robots_ttl=30.0)
    )
    refresher = await _crawl(site, config, 600, seed="http://site.test/p")
    assert refresher.stats.barred >= 1
    asked = [t for t, path in log if path == "/p"]
    # Within a robots.txt reading and an interval of the end of the ban, and on.
    assert [t for t in asked if DISALLOWED[1] < t <= DISALLOWED[1] + 30 + 60 + 1], asked
    assert len([t for t in asked if t > DISALLOWED[1]]) >= 5


async def test_a_page_whose_history_died_with_its_peer_is_kept_here_as_a_first_fetch(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Taken over from a dead peer's replica copy, a page fetched there starts again
    here as never visited (Refresher.history_lost): asked in full, then with the
    validators of its copy, and stored as a page of this shard (its page row died
    with the other's, and a later visit without one is in no JSONL export)."""
    site = _Site(10**9)
    url = "http://site.test/"
    fp = fingerprint(url)
    with wall_clock_on_trio_time():
        async with running_crawler(_config(tmp_path), site) as crawler:
            refresher = crawler.refresher
            assert refresher is not None
            lost = refresher.history_lost("site.test", [(fp, url, 0)])
            crawler.take_over("site.test", [], [fp], None, lost)
            await trio.sleep(600)
            page = refresher.page(fp)
    asked = [(status, etag) for _, status, etag in site.log]
    assert asked[0] == (200, None) and len(asked) >= 3 and set(asked[1:]) == {(304, '"v1"')}
    assert page is not None and page.visits == len(asked) and page.etag == '"v1"'
    shard = Shard.open(tmp_path)
    try:
        assert [(p["url"], p["status"]) for p in shard.iter_pages()] == [(url, 200)]
    finally:
        shard.close()


async def test_a_304_visit_names_the_version_held(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Every 304's visit was stored with the digest of its empty body, not of the copy
    it showed unchanged (the shard's visits and the JSON Lines export; QA)."""
    site = _Site(math.inf)
    await _crawl(site, _config(tmp_path), 600)
    assert {status for _, status, _ in site.log[1:]} == {304}
    with sqlite3.connect(tmp_path / SHARD_FILE) as conn:
        [page_digest] = conn.execute("SELECT digest FROM pages").fetchone()
        visits = conn.execute("SELECT status, digest FROM visits").fetchall()
    assert len(visits) >= 5 and set(visits) == {(304, page_digest)}


@pytest.mark.parametrize("then", ["answered", "failed once", "restarted"])
async def test_a_page_whose_304_was_in_flight_at_a_relink_is_asked_again_in_full(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, then: str
) -> None:
    """A dead peer's hosts lost (relink): a page whose conditional request was already
    out answered 304, no links, and was asked with validators from then on: its links
    waited for its next change (a review). It is asked again at once, in full; still so
    after that ask failed, or the peer restarted before it (a review)."""
    site = _Site(math.inf)
    out, answer = trio.Event(), trio.Event()
    failed: list[float] = []

    async def slow_refresh(request: httpx2.Request) -> httpx2.Response:
        if request.headers.get("if-none-match") and not answer.is_set():
            out.set()
            await answer.wait()
        elif (
            then == "failed once"
            and answer.is_set()
            and not failed
            and request.url.path == "/"
            and not request.headers.get("if-none-match")
        ):
            failed.append(trio.current_time())
            return httpx2.Response(404)
        return site(request)

    with wall_clock_on_trio_time():
        async with running_crawler(_config(tmp_path), slow_refresh) as crawler:
            crawler.seed(["http://site.test/"])
            with trio.fail_after(600):
                await out.wait()
            assert crawler.refresher is not None
            crawler.refresher.relink()
            ended = crawler.request_ended
            answer.set()
            relinked_at = trio.current_time()
            if then == "restarted":
                with trio.fail_after(10):
                    await ended.wait()  # the 304 read; stopped before the next ask
            else:
                # Well within the page's interval (a minute); a failure is backed off.
                await trio.sleep(1200 if then == "failed once" else 30)
        if then == "restarted":
            async with running_crawler(_config(tmp_path), site):
                await trio.sleep(30)
    after = [(status, asked) for t, status, asked in site.log if t >= relinked_at]
    assert after[0] == (304, '"v1"')
    assert (200, None) in after[1:], after
    assert bool(failed) is (then == "failed once")


async def test_a_hint_has_a_page_asked_no_sooner_than_the_shortest_interval(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A trusted sitemap read two seconds after a visit, saying the page changed since:
    it was made due at once, asked twice within --min-interval (QA)."""
    now = time.time()
    shard = Shard.open(tmp_path)
    visited = RefreshRow(1, "http://a.test/p", "a.test", 1, 5, 2, 3600.0, now - 2,
                         now + 3000, 0.0, None, None, "d1")  # fmt: skip
    shard.save_refresh([visited], [])
    recrawl = RecrawlConfig(recrawl=True, min_interval=60)
    config = CrawlConfig(data_dir=tmp_path, recrawl=recrawl)
    refresher, due = _refresher_alone(config, shard)
    refresher.load()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 1.5 * 86400))
    for fp in range(10, 15):  # a.test's sitemap earns trust
        refresher.hints.read(fp, "a.test", stamp, now - 86400)
        refresher.hints.visited(fp, "a.test", now - 2 * 86400, changed=True)
    assert refresher.hints.trusted("a.test")
    said = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now - 1))
    refresher.lastmods([Lastmod(1, "http://a.test/p", "a.test", said)])
    [(at, _)] = due["a.test"]
    # Sooner than planned (3,000 s), but a minute after its last ask at the soonest.
    assert 57 <= at - trio.current_time() <= 60
    shard.close()


def _refresher_alone(
    config: CrawlConfig, shard: Shard
) -> tuple[Refresher, dict[str, list[tuple[float, object]]]]:
    """A refresher over ``shard`` with no crawl: the pages it gives each host, due when."""
    due: dict[str, list[tuple[float, object]]] = {}

    class _Scheduler:
        def refreshes(self, host: str, pages: list[tuple[float, object]]) -> None:
            due[host] = pages

        def slot(self, host: str) -> None:
            return None

    refresher = Refresher(config, shard, lambda: _Scheduler(), UrlFilter())  # type: ignore[arg-type,return-value]
    return refresher, due


async def test_a_page_handed_over_is_asked_in_full_once_for_a_response_in_its_warc_files(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A page handed over by another peer is refreshed here, and the response its
    revisits would refer to is in the other's WARC files: its 304s were written in
    none, and this peer's files had nothing of it (QA). Its first ask here is in full,
    its answer a response, and the 304s after it revisits referring to it."""
    site = _Site(math.inf)
    url = "http://site.test/"
    now = time.time()
    row = RefreshRow(
        fingerprint(url), url, "site.test", 0, 3, 0, 900.0, now - 100, now, 0.0, '"v1"', None,
        content_digest(BODY),
    )  # fmt: skip
    shard = Shard.open(tmp_path, warc_size=1 << 30)
    with wall_clock_on_trio_time():
        async with running_crawler(_config(tmp_path), site, shard) as crawler:
            assert crawler.refresher is not None
            crawler.take_over("site.test", [], [row.fp], None, [row])
            await trio.sleep(600)
    asked = [(status, etag) for _, status, etag in site.log]
    assert asked[0] == (200, None) and len(asked) >= 3 and set(asked[1:]) == {(304, '"v1"')}
    records: list[tuple[str, str | None, str | None]] = []
    for warc in sorted((tmp_path / "warc").glob("ubipy-*.warc.gz")):
        with warc.open("rb") as f:
            for r in ArchiveIterator(f):
                h = r.rec_headers
                robots = (h.get_header("WARC-Target-URI") or "").endswith("/robots.txt")
                if r.rec_type in ("response", "revisit") and not robots:
                    records.append(
                        (r.rec_type, h.get_header("WARC-Record-ID"), h.get_header("WARC-Refers-To"))
                    )
    assert [kind for kind, _, _ in records] == ["response"] + ["revisit"] * (len(asked) - 1)
    assert {refers for _, _, refers in records[1:]} == {records[0][1]}


async def test_a_sitemap_read_again_is_not_counted_among_the_pages_refreshed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Status said "145 refreshes of pages fetched before" beside 133 pages: its
    # refreshes counted the sitemaps read again, its pages did not (QA).
    asked: list[str] = []
    sitemap = (
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        "<url><loc>http://site.test/</loc></url></urlset>"
    )

    def site(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        if path == "/robots.txt":
            return httpx2.Response(404)
        asked.append(path)
        if path == "/sitemap.xml":
            return httpx2.Response(200, headers={"content-type": "application/xml"}, text=sitemap)
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=BODY)

    config = dataclasses.replace(_config(tmp_path), bounds=BoundsConfig())
    with wall_clock_on_trio_time():
        async with running_crawler(config, site) as crawler:
            crawler.seed(["http://site.test/"])
            await trio.sleep(1200)
            pages, sitemaps = crawler.stats.pages, crawler.stats.sitemaps
            assert crawler.refresher is not None
            refreshes = crawler.refresher.stats.refreshes
    assert asked.count("/sitemap.xml") == sitemaps >= 3  # read again too
    assert asked.count("/") == pages >= 3
    assert refreshes == pages - 1
