"""Sitemaps in one crawler, against a web in a mock transport on the autojump clock:
what robots.txt names and /sitemap.xml are fetched once each, through the host's
politeness slot, and what they list is admitted like links; lastmod is kept; what is
past the protocol's limits is counted and logged once."""

from __future__ import annotations

import gzip
import itertools
import logging
import re
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, FetchConfig, PolitenessConfig, Scope
from ubipy.fetch import (
    LISTED_DEPTH,
    SITEMAP_DEPTH,
    SITEMAP_MAX_BYTES,
    Entry,
    FetchOutcome,
    FetchResult,
    Filtered,
    fingerprint,
    sitemaps,
)
from ubipy.fetch.sitemaps import Sitemap
from ubipy.peer import pageanswers
from ubipy.peer.commits import Found
from ubipy.peer.crawler import Crawler
from ubipy.peer.crawlstats import CrawlStats
from ubipy.peer.pageanswers import SITEMAP_READS
from ubipy.peer.reading import MAX_REDIRECTS
from ubipy.peer.sitemapping import Sitemapping, read_as
from ubipy.statustable import format_cluster
from ubipy.steps import Steps, in_slices
from ubipy.store import NewURL, Shard

DELAY = 1.0
WWW, MAPS = "www.a.test", "maps.a.test"
HTML = {"content-type": "text/html"}
XML = {"content-type": "application/xml"}


def urlset(*locs: str, lastmod: dict[str, str] | None = None) -> bytes:
    mods = lastmod or {}
    entries = "".join(
        f"<url><loc>{loc}</loc>{f'<lastmod>{mods[loc]}</lastmod>' if loc in mods else ''}</url>"
        for loc in locs
    )
    ns = "http://www.sitemaps.org/schemas/sitemap/0.9"
    return f'<?xml version="1.0"?><urlset xmlns="{ns}">{entries}</urlset>'.encode()


def index(*locs: str) -> bytes:
    entries = "".join(f"<sitemap><loc>{loc}</loc></sitemap>" for loc in locs)
    return f"<sitemapindex>{entries}</sitemapindex>".encode()


def w(path: str) -> str:
    return f"http://{WWW}{path}"


ROBOTS = (
    "User-agent: *\nDisallow: /private/\n"
    f"Sitemap: {w('/maps/listed.xml')}\n"
    f"Sitemap: http://{MAPS}/cross.xml\n"
    "Sitemap: http://elsewhere.example/out.xml\n"
)
# URL -> (status, headers, body as sent)
WEB: dict[str, tuple[int, dict[str, str], bytes]] = {
    w("/robots.txt"): (200, {}, ROBOTS.encode()),
    w("/"): (200, HTML, b"<title>home</title>no links"),
    w("/maps/listed.xml"): (
        200,
        XML,
        urlset(
            w("/p1"),
            "/p2",  # relative: resolved against the sitemap
            w("/private/p3"),  # robots.txt says no
            "http://elsewhere.example/x",  # out of scope
            w("/p1"),
            lastmod={w("/p1"): "2024-01-02"},
        ),
    ),
    w("/sitemap.xml"): (
        200,
        XML,
        index(
            w("/maps/child.xml.gz"),
            w("/maps/moved.xml"),
            w("/maps/nested.xml"),
            w("/private/hidden.xml"),
        ),
    ),
    w("/maps/child.xml.gz"): (
        200,
        {"content-type": "application/x-gzip"},
        gzip.compress(urlset(w("/p4"), w("/p5"), lastmod={w("/p5"): "2025-03"})),
    ),
    w("/maps/moved.xml"): (301, {"location": "/maps/here.xml"}, b""),
    w("/maps/here.xml"): (
        200,
        {**XML, "content-encoding": "gzip"},
        gzip.compress(urlset(w("/p6"))),
    ),
    w("/maps/nested.xml"): (200, XML, index(w("/maps/deep.xml"))),
    w("/maps/deep.xml"): (200, XML, urlset(w("/never"))),
    f"http://{MAPS}/cross.xml": (200, XML, urlset(w("/p7"))),
    # Out of scope, named by robots.txt (cross-submission): read, and what it lists
    # scope-checked.
    "http://elsewhere.example/out.xml": (
        200,
        XML,
        urlset(w("/p8"), "http://elsewhere.example/y"),
    ),
}
SITEMAPS = {
    w("/maps/listed.xml"),
    w("/sitemap.xml"),
    w("/maps/child.xml.gz"),
    w("/maps/moved.xml"),
    w("/maps/here.xml"),
    w("/maps/nested.xml"),
    f"http://{MAPS}/cross.xml",
    f"http://{MAPS}/sitemap.xml",  # a 404
    "http://elsewhere.example/out.xml",  # not elsewhere.example/sitemap.xml: out of scope
}
PAGES = {w("/"), *(w(f"/p{i}") for i in (1, 2, 4, 5, 6, 7, 8))}


async def crawl(
    tmp: Path,
    bounds: BoundsConfig | None = None,
    web: dict[str, tuple[int, dict[str, str], bytes]] = WEB,
    seeds: Sequence[str] = (w("/"),),
    fetch: FetchConfig | None = None,
) -> tuple[Crawler, list[tuple[float, str]]]:
    """Crawl ``web`` from ``seeds`` (www.a.test/) to the end; the crawler and each
    request (time, URL)."""
    asked: list[tuple[float, str]] = []

    async def serve(request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        asked.append((trio.current_time(), url))
        await trio.sleep(0.1)
        status, headers, body = web.get(url, (404, HTML, b"not here"))
        return httpx2.Response(status, headers=headers, content=body)

    shard = Shard.open(tmp)
    config = CrawlConfig(
        data_dir=tmp,
        politeness=PolitenessConfig(delay=DELAY),
        fetch=fetch or FetchConfig(max_retries=0),
        bounds=bounds or BoundsConfig(),
    )
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(serve)) as client:
        crawler = Crawler(config, shard, client)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(crawler.run)
                crawler.seed(seeds)
                await crawler.wait_idle()
                crawler.stop()
        finally:
            shard.close()
    return crawler, asked


def gaps(asked: Iterable[tuple[float, str]]) -> list[float]:
    """Between one request's start and the next's, host by host."""
    by_host: dict[str, list[float]] = {}
    for at, url in asked:
        by_host.setdefault(httpx2.URL(url).host, []).append(at)
    return [b - a for times in by_host.values() for a, b in itertools.pairwise(times)]


async def test_sitemaps_are_fetched_once_politely_and_their_urls_admitted(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    crawler, asked = await crawl(tmp_path)
    urls = [url for _, url in asked]
    assert len(urls) == len(set(urls))  # each URL once
    robots = {w("/robots.txt"), f"http://{MAPS}/robots.txt", "http://elsewhere.example/robots.txt"}
    assert set(urls) == robots | SITEMAPS | PAGES
    # Every request to a host, sitemaps included, a request's time plus the delay apart.
    assert min(gaps(asked)) >= DELAY + 0.1 - 1e-9
    stats = crawler.stats
    assert (stats.sitemaps, stats.pages) == (len(SITEMAPS), len(PAGES))
    assert stats.sitemap_urls == 5 + 2 + 1 + 1 + 2  # listed, child, here, cross, out
    assert stats.sitemap_skipped == 1  # the index in the index: its one entry
    assert stats.robots_disallowed == 2  # /private/p3 and /private/hidden.xml
    assert stats.out_of_scope >= 2 and crawler.pending == 0
    conn = sqlite3.connect(tmp_path / "shard.sqlite3")
    lastmods = set(conn.execute("SELECT url, host, lastmod FROM lastmod"))
    depths = dict(conn.execute("SELECT url, depth FROM pages"))
    conn.close()
    assert lastmods == {(w("/p1"), WWW, "2024-01-02"), (w("/p5"), WWW, "2025-03")}
    # Stored as page rows at a sitemap's depth; the URLs they list at depth 1.
    assert depths[w("/sitemap.xml")] == SITEMAP_DEPTH
    assert depths[w("/maps/child.xml.gz")] == SITEMAP_DEPTH - 1
    assert {depths[w(f"/p{i}")] for i in (1, 2, 4, 5, 6, 7, 8)} == {1}


async def test_a_sitemap_is_read_to_the_protocols_limit_not_the_pages_max_body(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A page body's cap (--max-body, 10 MiB by default) is not a sitemap's: the
    # protocol allows 50 MB, and a cut sitemap loses the URLs past the cut.
    locs = [w(f"/listed/{i:04d}") for i in range(200)]
    big = urlset(*locs)
    web = {**WEB, w("/sitemap.xml"): (200, XML, big)}
    fetch = FetchConfig(max_retries=0, max_body_bytes=len(big) // 4)
    crawler, asked = await crawl(tmp_path, web=web, fetch=fetch)
    assert set(locs) <= {url for _, url in asked}
    assert crawler.stats.sitemaps_cut == 0


async def test_no_sitemaps_or_max_depth_0_reads_none(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    for n, bounds in enumerate((BoundsConfig(sitemaps=False), BoundsConfig(max_depth=0))):
        crawler, asked = await crawl(tmp_path / str(n), bounds)
        assert [url for _, url in asked] == [w("/robots.txt"), w("/")]
        assert crawler.stats.sitemaps == 0


async def test_under_opic_a_sitemap_and_what_it_lists_hold_cash(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A sitemap robots.txt names holds a seed's cash and splits it over what it lists:
    # at 0, both went after every link of the seed's page (a host always richer,
    # for ever; a review). The seed's page splits its 1 over its ten links.
    links = "".join(f'<a href="/l{i}">l</a>' for i in range(10))
    web = {
        w("/robots.txt"): (200, {}, f"Sitemap: {w('/maps/s.xml')}\n".encode()),
        w("/"): (200, HTML, f"<title>home</title>{links}".encode()),
        w("/maps/s.xml"): (200, XML, urlset(w("/only"))),
    }
    # And another host's (in scope, found by a link) holds none: each host's robots.txt
    # minting cash, a farm of subdomains outranked the seeds (a review).
    web[w("/l9")] = (200, HTML, f'<a href="http://{MAPS}/x">x</a>'.encode())
    web[f"http://{MAPS}/robots.txt"] = (200, {}, f"Sitemap: http://{MAPS}/m.xml\n".encode())
    _, asked = await crawl(tmp_path, BoundsConfig(scope=Scope.DOMAIN), web)
    urls = [url for _, url in asked]
    assert urls[:6] == [
        w("/robots.txt"), w("/"), w("/maps/s.xml"), w("/sitemap.xml"), w("/only"), w("/l0")
    ]  # fmt: skip
    with sqlite3.connect(tmp_path / "shard.sqlite3") as conn:
        scores = dict(conn.execute("SELECT url, score FROM frontier WHERE url LIKE '%.xml'"))
    assert scores == {
        w("/maps/s.xml"): 1.0, w("/sitemap.xml"): 1.0,
        f"http://{MAPS}/m.xml": 0.0, f"http://{MAPS}/sitemap.xml": 0.0,
    }  # fmt: skip


async def test_max_depth_0_fetches_the_seeds_alone(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # "0 or inf" read 0 as no bound: the seed's links were followed, and theirs (a review).
    web = {**WEB, w("/"): (200, HTML, b'<title>home</title><a href="/p1">p1</a>')}
    crawler, asked = await crawl(tmp_path, BoundsConfig(max_depth=0), web)
    assert [url for _, url in asked] == [w("/robots.txt"), w("/")]
    assert crawler.stats.too_deep == 1


async def test_the_readme_example_reads_its_sitemaps_whatever_the_filters(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # README's "Crawling real sites": an --include naming the documentation trees,
    # which names no sitemap. The sitemaps are read all the same; what they list is
    # filtered (was: /sitemap.xml "matches no --include", never asked, /3/only.html
    # never found).
    docs, pg = "https://docs.test", "https://pg.test"
    web: dict[str, tuple[int, dict[str, str], bytes]] = {
        f"{docs}/robots.txt": (200, {}, f"Sitemap: {docs}/maps/sm.xml\n".encode()),
        f"{docs}/3/": (200, HTML, b"<title>docs</title>no links"),
        f"{docs}/maps/sm.xml": (
            200,
            XML,
            urlset(f"{docs}/3/only.html", f"{docs}/2/old.html", f"{docs}/3/search.html"),
        ),
        f"{pg}/docs/current/": (200, HTML, b"<title>pg</title>no links"),
        f"{pg}/sitemap.xml": (200, XML, index(f"{pg}/sitemap-0.xml")),
        f"{pg}/sitemap-0.xml": (200, XML, urlset(f"{pg}/docs/current/sql.html", f"{pg}/about/")),
    }
    bounds = BoundsConfig(
        scope=Scope.HOST,
        exclude=(r"/search\.html",),
        include=(r"^https://(docs\.test/3/|pg\.test/docs/current/)",),
    )
    crawler, asked = await crawl(tmp_path, bounds, web, [f"{docs}/3/", f"{pg}/docs/current/"])
    urls = {url for _, url in asked}
    assert {f"{docs}/maps/sm.xml", f"{docs}/sitemap.xml", f"{pg}/sitemap.xml"} <= urls
    assert {f"{docs}/3/only.html", f"{pg}/docs/current/sql.html"} <= urls
    assert not urls & {f"{docs}/2/old.html", f"{docs}/3/search.html", f"{pg}/about/"}
    assert crawler.stats.filtered == {Filtered.NOT_INCLUDED: 2, Filtered.EXCLUDED: 1}
    assert crawler.stats.sitemaps == 4  # sm.xml, docs' /sitemap.xml (a 404), pg's two


async def test_a_sitemap_robots_txt_names_on_another_host_is_read_whatever_the_scope(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # --scope host: www.a.test's robots.txt names an index on a CDN (cross-submission),
    # which was dropped as out of scope (was: www.a.test/p1 never found).
    cdn = "http://cdn.test"
    web: dict[str, tuple[int, dict[str, str], bytes]] = {
        w("/robots.txt"): (
            200,
            {},
            f"Sitemap: {cdn}/index.xml\nSitemap: {cdn}/private/sm.xml\n".encode(),
        ),
        w("/"): (200, HTML, b"<title>home</title>no links"),
        # The CDN's robots.txt still rules its files, and names sitemaps of its own
        # that are not taken: the CDN is out of scope.
        f"{cdn}/robots.txt": (
            200,
            {},
            b"User-agent: *\nDisallow: /private/\nSitemap: http://cdn.test/own.xml\n",
        ),
        f"{cdn}/index.xml": (
            200,
            XML,
            index(f"{cdn}/moved.xml", "http://other.test/sm.xml"),
        ),
        f"{cdn}/moved.xml": (301, {"location": f"{cdn}/pages.xml"}, b""),
        f"{cdn}/pages.xml": (200, XML, urlset(w("/p1"), f"{cdn}/page.html")),
        f"{cdn}/private/sm.xml": (200, XML, urlset(w("/p2"))),
        f"{cdn}/own.xml": (200, XML, urlset(w("/p3"))),
    }
    bounds = BoundsConfig(scope=Scope.HOST)
    crawler, asked = await crawl(tmp_path, bounds, web)
    urls = [url for _, url in asked]
    assert set(urls) == {
        w("/robots.txt"),
        w("/"),
        w("/sitemap.xml"),
        f"{cdn}/robots.txt",
        f"{cdn}/index.xml",
        f"{cdn}/moved.xml",
        f"{cdn}/pages.xml",
        w("/p1"),
    }
    assert len(urls) == len(set(urls))
    # other.test's sitemap, cdn.test's /sitemap.xml and own.xml, cdn.test/page.html
    assert crawler.stats.out_of_scope == 4 and crawler.stats.robots_disallowed == 1


def _mapping(stats: CrawlStats) -> Sitemapping:
    """Sitemaps read on their own, what they list taken as it is (on WWW)."""

    def candidates(
        links: Sequence[str], base: str | None, depth: int, /, *, beyond_scope: object = None
    ) -> list[NewURL]:
        return [NewURL(fingerprint(u), u, WWW, depth) for u in links]

    return Sitemapping(BoundsConfig(), candidates, stats, keep_bodies=False, in_scope=bool)


def test_entries_past_the_limit_are_counted_and_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stats = CrawlStats()
    mapping = _mapping(stats)
    body = urlset(*(w(f"/{i}") for i in range(50_002)))
    entry = Entry(1, 1, w("/big.xml"), SITEMAP_DEPTH)
    result = FetchResult(
        w("/big.xml"), 200, "application/xml", None, None, None, None, None, body, False,
        FetchOutcome.OK, None,
    )  # fmt: skip
    with caplog.at_level(logging.DEBUG, logger="ubipy.peer.sitemapping"):
        for _ in range(3):
            page, found, _ = mapping.answered(WWW, entry, result)
            assert len(found) == 50_000 and page.depth == SITEMAP_DEPTH and page.body is None
    assert (stats.sitemaps, stats.sitemap_urls, stats.sitemap_skipped) == (3, 150_000, 6)
    warned = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 1 and "2 entries past the first 50000" in warned[0].getMessage()


def test_sitemaps_read_up_to_a_fault_are_counted_and_said_in_status() -> None:
    """A "billion laughs" sitemap was dropped whole, logged at info only, and counted
    nowhere (QA); malformed XML is read up to its fault, and counted too."""
    stats = CrawlStats()
    mapping = _mapping(stats)
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "aaaaaaaaaa">'
        + b"".join(
            b'<!ENTITY %s "%s">' % (bytes([98 + i]), b"&%s;" % bytes([97 + i]) * 10)
            for i in range(8)
        )
        + b"]><urlset><url><loc>" + w("/1").encode() + b"</loc></url>"
        + b"<url><loc>http://a.test/&i;</loc></url></urlset>"
    )  # fmt: skip
    cut = urlset(w("/2"), w("/3"))[:-40]  # malformed: ends inside an element
    found = []
    for body in (laughs, cut, urlset(w("/4"))):
        entry = Entry(1, 1, w("/s.xml"), SITEMAP_DEPTH)
        result = FetchResult(
            w("/s.xml"), 200, "application/xml", None, None, None, None, None, body, False,
            FetchOutcome.OK, None,
        )  # fmt: skip
        found += [u.url for u in mapping.answered(WWW, entry, result)[1]]
    assert stats.sitemaps_faulty == 2
    assert {w("/1"), w("/2"), w("/4")} <= set(found)  # what came before each fault
    # A host's /sitemap.xml answered with a page (a "not found" served with a 200, as
    # many sites do): no sitemap there, not a faulty one.
    for ctype, counted in (("text/html", 0), ("application/xml", 1)):
        entry = Entry(1, 1, w("/sitemap.xml"), SITEMAP_DEPTH)
        result = FetchResult(
            w("/sitemap.xml"), 200, ctype, None, None, None, None, None,
            b"<html><body><a href='/x'>x</a></body></html>", False, FetchOutcome.OK, None,
        )  # fmt: skip
        assert mapping.answered(WWW, entry, result)[1] == []
        assert stats.sitemaps_faulty == 2 + counted
    report = {
        "members": [{"id": "p0", "address": "127.0.0.1:7000", "state": "alive"}],
        "peers": [{"peer_id": "p0", "uptime": 1.0, "pages": 0, "sitemaps_faulty": 2}],
    }
    assert format_cluster(report).splitlines()[-1] == (
        "p0: 2 sitemaps read up to a fault (malformed; -v says which)"
    )


async def test_a_sitemap_that_is_an_html_page_is_read_as_a_page(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A site sends its missing /sitemap.xml to its home page: the home page, admitted
    as a sitemap first, used to be read as one (and failed), its links lost, and the
    real link to it dropped as a URL already seen."""
    web = {
        w("/robots.txt"): (200, {}, b"User-agent: *\nDisallow:\n"),
        w("/sitemap.xml"): (302, {"location": "/"}, b""),
        w("/"): (200, HTML, b'<title>home</title><a href="/from-home">x</a>'),
        w("/from-home"): (200, HTML, b"<title>x</title>"),
    }
    _, asked = await crawl(tmp_path, web=web, seeds=[w("/robots-first")])
    assert w("/from-home") in {url for _, url in asked}
    with sqlite3.connect(tmp_path / "shard.sqlite3") as db:
        row = db.execute("SELECT depth, title FROM pages WHERE url = ?", (w("/"),)).fetchone()
    assert row == (LISTED_DEPTH, "home")


async def test_a_seeded_sitemap_is_read_as_a_sitemap(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A sitemap given as a seed was fetched as a page (its XML not kept), and the
    one robots.txt names was then a URL already seen: what it lists was never found.
    Then it was asked again as a sitemap (QA: twice); its body is now read the first
    time, a seed's answer of a sitemap's type being kept whatever --accept says."""
    web = {
        w("/robots.txt"): (200, {}, b"User-agent: *\nDisallow:\n"),
        w("/"): (200, HTML, b"<title>home</title>no links"),
        w("/sitemap.xml"): (200, XML, urlset(w("/only-in-sitemap"))),
        w("/only-in-sitemap"): (200, HTML, b"<title>x</title>"),
    }
    crawler, asked = await crawl(tmp_path, web=web, seeds=[w("/sitemap.xml"), w("/")])
    assert w("/only-in-sitemap") in {url for _, url in asked}
    assert (crawler.stats.sitemaps, crawler.stats.sitemap_urls) == (1, 1)
    assert [url for _, url in asked].count(w("/sitemap.xml")) == 1


async def test_a_sitemap_listed_by_a_sitemap_is_not_read_as_one(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Only a seed is read as a sitemap when its answer is one: what a sitemap lists
    (or a page links to), read so, would let a host nest sitemaps without end."""
    web = {
        w("/robots.txt"): (200, {}, b"User-agent: *\nDisallow:\n"),
        w("/"): (200, HTML, b"<title>home</title>no links"),
        w("/sitemap.xml"): (200, XML, urlset(w("/sitemap-2.xml"))),
        w("/sitemap-2.xml"): (200, XML, urlset(w("/deeper"))),
        w("/deeper"): (200, HTML, b"<title>x</title>"),
    }
    _, asked = await crawl(tmp_path, web=web, seeds=[w("/")])
    urls = [url for _, url in asked]
    assert urls.count(w("/sitemap-2.xml")) == 1 and w("/deeper") not in urls


async def test_an_html_page_where_a_sitemap_was_looked_for_is_read_cut_at_max_body(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Fetched to a sitemap's limit (50 MB), an HTML page that large would be parsed
    # on the event loop (a second for 50 MB): it is read cut, as a page fetch is.
    home = (
        b'<title>home</title><a href="/from-home">x</a>'
        + b" " * 2000
        + b'<a href="/past-the-cut">y</a>'
    )
    web = {
        w("/robots.txt"): (200, {}, b"User-agent: *\nDisallow:\n"),
        w("/sitemap.xml"): (302, {"location": "/"}, b""),
        w("/"): (200, HTML, home),
        w("/from-home"): (200, HTML, b"<title>x</title>"),
        w("/past-the-cut"): (200, HTML, b"<title>y</title>"),
    }
    fetch = FetchConfig(max_retries=0, max_body_bytes=1000)
    _, asked = await crawl(tmp_path, web=web, seeds=[w("/robots-first")], fetch=fetch)
    urls = {url for _, url in asked}
    assert w("/from-home") in urls and w("/past-the-cut") not in urls
    with sqlite3.connect(tmp_path / "shard.sqlite3") as db:
        row = db.execute("SELECT depth, title FROM pages WHERE url = ?", (w("/"),)).fetchone()
    assert row == (LISTED_DEPTH, "home")


async def test_a_hosts_sitemap_a_link_found_first_is_read_as_a_sitemap(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A page of one host links to another's /sitemap.xml: admitted as a page first,
    it was then a URL already seen when robots.txt named it, and never read."""

    def m(path: str) -> str:
        return f"http://{MAPS}{path}"

    web = {
        w("/robots.txt"): (200, {}, b"User-agent: *\nDisallow:\n"),
        w("/"): (200, HTML, f'<title>home</title><a href="{m("/sitemap.xml")}">x</a>'.encode()),
        m("/robots.txt"): (200, {}, b"User-agent: *\nDisallow:\n"),
        m("/sitemap.xml"): (200, XML, urlset(m("/only-in-sitemap"))),
        m("/only-in-sitemap"): (200, HTML, b"<title>x</title>"),
    }
    bounds = BoundsConfig(scope=Scope.DOMAIN)
    _, asked = await crawl(tmp_path, web=web, seeds=[w("/")], bounds=bounds)
    assert m("/only-in-sitemap") in {url for _, url in asked}


async def test_a_seeded_sitemap_asked_again_is_one_page_of_the_hosts_budget(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    web = {
        w("/robots.txt"): (200, {}, b"User-agent: *\nDisallow:\n"),
        w("/sitemap.xml"): (200, XML, urlset(w("/only-in-sitemap"))),
        w("/only-in-sitemap"): (200, HTML, b"<title>x</title>"),
    }
    bounds = BoundsConfig(max_pages_per_host=2)
    crawler, asked = await crawl(tmp_path, web=web, seeds=[w("/sitemap.xml")], bounds=bounds)
    assert w("/only-in-sitemap") in {url for _, url in asked}
    assert not crawler.stats.skipped


class _EndlessRedirects(dict[str, tuple[int, dict[str, str], bytes]]):
    """WEB, and /sitemap.xml?n=k redirecting to n=k+1 up to 500, then a sitemap."""

    def get(  # type: ignore[override]
        self, url: str, default: tuple[int, dict[str, str], bytes]
    ) -> tuple[int, dict[str, str], bytes]:
        if url in self:
            return self[url]
        found = re.fullmatch(re.escape(w("/sitemap.xml")) + r"(?:\?n=(\d+))?", url)
        if found is None:
            return default
        n = int(found.group(1) or 0)
        if n >= 500:
            return (200, XML, urlset(w("/end")))
        return (301, {"location": f"/sitemap.xml?n={n + 1}"}, b"")


async def test_a_sitemaps_redirects_are_followed_twenty_in_a_row_at_most(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """/sitemap.xml?n=k redirecting to n=k+1: followed for ever (501 requests here, a
    review found), as pages' redirects were before they were bounded."""
    web = _EndlessRedirects(
        {
            w("/robots.txt"): (200, {}, b"User-agent: *\nAllow: /\n"),
            w("/"): (200, HTML, b"<title>home</title>"),
        }
    )
    crawler, asked = await crawl(tmp_path, web=web)
    chain = [url for _, url in asked if "/sitemap.xml" in url]
    assert len(chain) == MAX_REDIRECTS + 1  # the first, and its 20 redirects
    assert crawler.stats.refused["redirect chain"] == 1


@pytest.mark.parametrize(
    ("path", "ctype", "body"),
    [
        ("/sitemap.xml.gz", "application/octet-stream", gzip.compress(urlset(w("/only")))),
        ("/sitemap.txt", "text/plain", (w("/only") + "\n").encode()),
        ("/sm.gz", "application/gzip", gzip.compress(urlset(w("/only")))),
    ],
)
async def test_a_seeded_sitemap_served_as_bytes_or_text_is_read(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, path: str, ctype: str, body: bytes
) -> None:
    # Only XML and gzip types were asked again as a sitemap: these brought nothing.
    web = {
        w("/robots.txt"): (200, {}, b"User-agent: *\nAllow: /\n"),
        w(path): (200, {"content-type": ctype}, body),
        w("/only"): (200, HTML, b"<title>x</title>"),
    }
    crawler, asked = await crawl(tmp_path, web=web, seeds=[w(path)])
    urls = [url for _, url in asked]
    assert w("/only") in urls and urls.count(w(path)) == 1
    assert crawler.stats.sitemap_urls == 1


@pytest.mark.parametrize(
    ("ctype", "body"),
    [
        # An RSS feed's root is a sitemap's since feeds are read as sitemaps.
        ("application/xml", b"<catalog><book><title>news</title></book></catalog>"),
        ("text/plain", b"Just some words, no URL first.\nhttp://www.a.test/not-followed\n"),
    ],
)
async def test_a_seed_of_a_sitemap_s_type_that_is_none_is_a_type_not_accepted(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, ctype: str, body: bytes
) -> None:
    """Its body is read in case it is a sitemap (asked once: QA); when it is not one,
    --accept (HTML alone here) judges it as it would have: counted, no body kept."""
    web = {
        w("/robots.txt"): (200, {}, b"User-agent: *\nAllow: /\n"),
        w("/feed"): (200, {"content-type": ctype}, body),
    }
    crawler, asked = await crawl(tmp_path, web=web, seeds=[w("/feed")])
    assert [url for _, url in asked].count(w("/feed")) == 1
    assert w("/not-followed") not in {url for _, url in asked}
    assert crawler.stats.sitemap_urls == 0
    assert crawler.stats.skipped_types.total() == 1
    with sqlite3.connect(tmp_path / "shard.sqlite3") as db:
        kept = db.execute("SELECT length, error FROM pages WHERE url = ?", (w("/feed"),)).fetchall()
    assert kept == [(0, f"type not accepted: {ctype}")]


async def test_a_gzipped_sitemap_served_as_html_is_read(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Its compressed bytes hold no sitemap's root: it was read as a page, URLs lost.
    web = {
        w("/robots.txt"): (200, {}, f"Sitemap: {w('/s.xml.gz')}\n".encode()),
        w("/s.xml.gz"): (200, HTML, gzip.compress(urlset(w("/only")))),
        w("/only"): (200, HTML, b"<title>x</title>"),
    }
    _, asked = await crawl(tmp_path, web=web, seeds=[w("/")])
    assert w("/only") in {url for _, url in asked}


def test_a_sitemap_gives_lastmods_for_its_own_sites_pages_only() -> None:
    # other.test's sitemap listed www.a.test's pages with lastmods (in scope, say):
    # they moved www.a.test's recrawls and its trust. A sibling's (blog.a.test) speaks
    # for its own site.
    def candidates(
        links: Sequence[str], base: str | None, depth: int, /, *, beyond_scope: object = None
    ) -> list[NewURL]:
        return [NewURL(fingerprint(u), u, httpx2.URL(u).host, depth) for u in links]

    stats = CrawlStats()
    mapping = Sitemapping(BoundsConfig(), candidates, stats, keep_bodies=False, in_scope=bool)
    body = urlset(w("/p"), lastmod={w("/p"): "2024-01-02"})
    for host, kept in (("other.test", 0), ("blog.a.test", 1), (WWW, 1)):
        url = f"http://{host}/sitemap.xml"
        result = FetchResult(
            url, 200, "application/xml", None, None, None, None, None, body, False,
            FetchOutcome.OK, None,
        )  # fmt: skip
        _, found, lastmods = mapping.answered(host, Entry(1, 1, url, SITEMAP_DEPTH), result)
        assert [u.url for u in found] == [w("/p")]  # its URL stands (scope judges it)
        assert len(lastmods) == kept, host


def _html(url: str) -> FetchResult:
    return FetchResult(
        url, 200, "text/html", None, None, None, None, None, b'<a href="/x">x</a>', False,
        FetchOutcome.OK, None,
    )  # fmt: skip


def test_a_sitemap_that_is_an_html_page_is_read_as_one_only_if_the_filters_take_it() -> None:
    # The filters judge what a sitemap lists, not the sitemap: one answered with a page
    # (a redirect's target) was read as a page whatever --include said (QA).
    entry = Entry(1, 1, w("/landing"), SITEMAP_DEPTH)
    taken = read_as(entry, _html(entry.url), sitemaps=True, page=lambda url: True)
    assert taken.depth == LISTED_DEPTH
    refused = read_as(entry, _html(entry.url), sitemaps=True, page=lambda url: False)
    assert refused.depth == SITEMAP_DEPTH


async def test_a_hosts_sitemap_xml_answered_with_a_page_is_no_page(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A site that answers any path with a page ("not found", with a 200) put that page
    in the export as the host's /sitemap.xml, its links followed (QA): it is kept as a
    sitemap that is none, and read no further."""
    web = {
        w("/robots.txt"): (200, {}, b"User-agent: *\nDisallow:\n"),
        w("/"): (200, HTML, b"<title>home</title>"),
        w("/sitemap.xml"): (200, HTML, b'<title>Not found</title><a href="/from-404">x</a>'),
        w("/from-404"): (200, HTML, b"<title>x</title>"),
    }
    _, asked = await crawl(tmp_path, web=web)
    urls = {url for _, url in asked}
    assert w("/sitemap.xml") in urls and w("/from-404") not in urls
    with sqlite3.connect(tmp_path / "shard.sqlite3") as db:
        row = db.execute("SELECT depth FROM pages WHERE url = ?", (w("/sitemap.xml"),)).fetchone()
    assert row == (SITEMAP_DEPTH,)


async def _crawled(
    config: CrawlConfig,
    serve: Callable[[httpx2.Request], Coroutine[None, None, httpx2.Response]],
    seeds: list[str],
) -> Crawler:
    """A crawl of ``seeds`` against ``serve`` (an httpx2 mock's handler), to its end."""
    shard = Shard.open(config.data_dir)
    try:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(serve)) as client:
            return await crawl_until_idle(config, shard, client, seeds, patience=3000)
    finally:
        shard.close()


async def test_a_few_large_sitemaps_are_read_at_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Each sitemap may be read to 50 MB, held twice while it is: 40 hosts' gzip bombs
    at /sitemap.xml took 3.4 GB (QA). Past its first megabyte a sitemap waits for one
    of SITEMAP_READS turns; each is read all the same."""
    hosts = [f"h{i}.test" for i in range(12)]
    past = most = 0
    sitemaps: list[str] = []
    piece = b"<!--" + b"x" * (600 * 1024) + b"-->"

    async def body(host: str) -> AsyncIterator[bytes]:
        nonlocal past, most
        yield b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        yield piece
        yield piece  # 1.2 MB read: the next is asked for only with a turn
        past += 1
        most = max(most, past)
        yield f"<url><loc>http://{host}/listed</loc></url></urlset>".encode()
        await trio.sleep(5)
        past -= 1
        sitemaps.append(host)

    async def serve(request: httpx2.Request) -> httpx2.Response:
        path, host = request.url.path, request.url.host
        if path == "/robots.txt":
            return httpx2.Response(200, content=b"User-agent: *\nAllow: /\n")
        if path == "/sitemap.xml":
            return httpx2.Response(200, headers=XML, content=body(host))
        return httpx2.Response(200, headers=HTML, content=b"<title>x</title>")

    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=0.5))
    crawler = await _crawled(config, serve, [f"http://{h}/" for h in hosts])
    assert sorted(sitemaps) == sorted(hosts) and most == SITEMAP_READS
    assert crawler.stats.sitemap_urls == len(hosts)


@pytest.mark.parametrize("how", ["robots.txt's", "gzipped", "a seed", "a gzipped seed"])
async def test_a_large_sitemap_is_read_beside_the_event_loop(
    how: str,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A sitemap of 50,000 URLs in 50 MB held the event loop 11 s while it was read,
    and with it the peer's answers to the pings that tell the others it lives (QA). A
    large one is read in slices, other tasks running between two: here a task that
    waits for the reading to begin runs before it ends. Its URLs are crawled as before.
    Gzipped, it is a few kilobytes on the wire; a seed is asked as a page, and read as
    a sitemap once it is one (a review: at once, on the loop)."""
    started, ran = trio.Event(), trio.Event()
    ran_within: list[bool] = []
    real = sitemaps.sitemap_reading

    def sitemap_reading(body: bytes, *, truncated: bool = False) -> Steps[Sitemap]:
        started.set()
        sitemap = yield from real(body, truncated=truncated)
        if sitemap.entries:  # not the host's /sitemap.xml of a seed: a page
            ran_within.append(ran.is_set())
        return sitemap

    monkeypatch.setattr("ubipy.peer.sitemapping.sitemap_reading", sitemap_reading)
    monkeypatch.setattr(pageanswers, "READ_SLICE", 0.0)  # a step a slice
    listed = [f"http://big.test/p{i}" for i in range(200)]
    padding = b"<!--" + b"x" * 300_000 + b"-->"  # five of the reader's chunks
    sitemap = urlset(*listed).replace(b"<url>", padding + b"<url>", 1)
    if "gzipped" in how:
        sitemap = gzip.compress(sitemap)
    path, seed = ("/s.xml", "http://big.test/s.xml") if "seed" in how else ("/sitemap.xml", "")

    async def serve(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(200, content=b"User-agent: *\nAllow: /\n")
        if request.url.path == path:
            return httpx2.Response(200, headers=XML, content=sitemap)
        return httpx2.Response(200, headers=HTML, content=b"<title>x</title>")

    async def loop_runs() -> None:
        await started.wait()
        ran.set()

    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=0.0))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(loop_runs)
        crawler = await _crawled(config, serve, [seed or "http://big.test/"])
    assert ran_within == [True]
    home = 0 if seed else 1
    assert crawler.stats.sitemap_urls == len(listed) and crawler.stats.pages == home + len(listed)


async def test_large_sitemaps_are_read_whatever_gzipped_ones_wait(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One large sitemap is read at a time, holding its turn, and one gzipped one beside
    it. In one queue, the few holding a turn waited behind every gzipped one (a read of
    50,000 URLs takes 11 s on a 2-core machine: QA), and the large ones waiting for a
    turn timed out and were lost (a review: 4 of 8)."""
    real = in_slices

    async def slow(reading: Steps[Found], seconds: float) -> Found:
        await trio.sleep(11.0)  # what a reading of 50,000 URLs takes
        return await real(reading, seconds)

    monkeypatch.setattr(pageanswers, "in_slices", slow)
    gzipped = [f"g{i}.test" for i in range(40)]
    large = [f"b{i}.test" for i in range(8)]
    piece = b"<!--" + b"x" * (600 * 1024) + b"-->"
    asked: Counter[str] = Counter()

    async def serve(request: httpx2.Request) -> httpx2.Response:
        path, host = request.url.path, request.url.host
        if path == "/robots.txt":
            return httpx2.Response(200, content=b"User-agent: *\nAllow: /\n")
        if path == "/sitemap.xml":
            asked[host] += 1
            body = urlset(f"http://{host}/listed")
            if host in gzipped:
                return httpx2.Response(200, headers=XML, content=gzip.compress(body))
            body = body.replace(b"<url>", piece + piece + b"<url>", 1)  # 1.2 MB: a turn
            return httpx2.Response(200, headers=XML, content=body)
        return httpx2.Response(200, headers=HTML, content=b"<title>x</title>")

    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=0.5))
    crawler = await _crawled(config, serve, [f"http://{h}/" for h in gzipped + large])
    assert crawler.stats.sitemap_urls == len(gzipped + large)
    assert set(asked.values()) == {1}


async def test_a_sitemap_whose_reading_breaks_is_stored_as_failed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bad sitemap, not a dead peer: a reading that raises (a bug a hostile body
    finds) is logged and the sitemap stored as an error, as a page that breaks the
    parser is; read in the request's task, it ended the crawl (a review)."""

    def sitemap_reading(body: bytes, *, truncated: bool = False) -> Steps[Sitemap]:
        yield
        raise ValueError("a bug")

    monkeypatch.setattr("ubipy.peer.sitemapping.sitemap_reading", sitemap_reading)

    async def serve(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(200, content=b"User-agent: *\nAllow: /\n")
        if request.url.path == "/sitemap.xml":
            return httpx2.Response(200, headers=XML, content=urlset("http://big.test/a"))
        return httpx2.Response(200, headers=HTML, content=b'<a href="/b">b</a>')

    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=0.0))
    crawler = await _crawled(config, serve, ["http://big.test/"])
    assert crawler.stats.pages == 2  # / and /b
    with sqlite3.connect(tmp_path / "shard.sqlite3") as db:
        error = db.execute(
            "SELECT error FROM pages WHERE url = ?", ("http://big.test/sitemap.xml",)
        ).fetchone()
    assert error is not None and error[0]


async def test_a_sitemap_past_the_protocol_s_50_mb_is_asked_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A /sitemap.xml that decodes past 50 MB (a large one, or a gzip bomb) is read in
    part and counted; it was asked again at once, for as long as the crawl ran."""
    bomb = gzip.compress(b"<urlset>" + b" " * (SITEMAP_MAX_BYTES + 1024) + b"</urlset>", 9)
    asked: list[str] = []

    async def serve(request: httpx2.Request) -> httpx2.Response:
        asked.append(request.url.path)
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        if request.url.path == "/sitemap.xml":
            return httpx2.Response(200, headers={**XML, "Content-Encoding": "gzip"}, content=bomb)
        return httpx2.Response(200, headers=HTML, content=b"<title>x</title>")

    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=1.0))
    crawler = await _crawled(config, serve, ["http://big.test/"])
    assert sorted(asked) == ["/", "/robots.txt", "/sitemap.xml"]
    assert crawler.stats.sitemaps_cut == 1


async def test_a_sitemap_s_turn_does_not_lengthen_its_request_past_the_deadline(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """An address's lease and a hand-off's hold count on a request ending within the
    fetch deadline: a sitemap's turn, taken 100 s into its body, gave it 120 s more (a
    review: read whole after 200 s)."""
    read_whole: list[str] = []
    piece = b"<!--" + b"x" * (600 * 1024) + b"-->"

    async def body(host: str) -> AsyncIterator[bytes]:
        yield b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        yield piece
        await trio.sleep(100)
        yield piece  # past 1 MB: the turn
        await trio.sleep(100)
        yield f"<url><loc>http://{host}/listed</loc></url></urlset>".encode()
        read_whole.append(host)

    async def serve(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        if request.url.path == "/sitemap.xml":
            return httpx2.Response(200, headers=XML, content=body(request.url.host))
        return httpx2.Response(200, headers=HTML, content=b"<title>x</title>")

    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=0.5))
    assert config.fetch.fetch_deadline < 200
    crawler = await _crawled(config, serve, ["http://slow.test/"])
    assert read_whole == [] and crawler.stats.retries >= 1  # cut at the deadline, asked again


async def test_small_sitemaps_take_no_turn_and_hold_no_page_back(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A broad crawl: every host's /sitemap.xml comes up after its home page. Turns
    taken before the request held the peer to 4 requests at a time while pages
    waited (QA: 10,000 hosts, 40 s); a small sitemap (a 404, most of them) takes none."""
    hosts = [f"h{i}.test" for i in range(40)]
    sitemaps_reading = most_sitemaps = 0
    pages_done: list[float] = []

    async def serve(request: httpx2.Request) -> httpx2.Response:
        nonlocal sitemaps_reading, most_sitemaps
        path, host = request.url.path, request.url.host
        if path == "/robots.txt":
            return httpx2.Response(200, content=b"User-agent: *\nAllow: /\n")
        if path == "/sitemap.xml":
            sitemaps_reading += 1
            most_sitemaps = max(most_sitemaps, sitemaps_reading)
            await trio.sleep(5)
            sitemaps_reading -= 1
            return httpx2.Response(200, headers=XML, content=urlset(f"http://{host}/listed"))
        await trio.sleep(1)
        if path != "/listed":
            pages_done.append(trio.current_time())
        links = "".join(f'<a href="/{n}">{n}</a>' for n in "abc") if path == "/" else ""
        return httpx2.Response(200, headers=HTML, content=f"<title>x</title>{links}".encode())

    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=0.5, concurrency=16))
    start = trio.current_time()
    crawler = await _crawled(config, serve, [f"http://{h}/" for h in hosts])
    took = trio.current_time() - start
    assert len(pages_done) == 4 * len(hosts) and crawler.stats.sitemap_urls == len(hosts)
    # 200 sitemaps' and pages' requests over 16 slots: 40 sitemaps of 5 s 4 at a time
    # took 50 s alone, and the pages behind them were done at 63 s.
    assert most_sitemaps > SITEMAP_READS and max(pages_done) - start < 30 and took < 40


async def test_a_feed_robots_txt_names_as_a_sitemap_has_its_items_crawled(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A blog's robots.txt names its RSS feed, and a seed is an Atom feed: their items'
    pages were not read at all (a feed is no urlset); the protocol's readers take both.
    A pubDate is kept as a lastmod. A feed met as a link is still a page's answer."""
    rss = (
        '<?xml version="1.0"?><rss version="2.0"><channel><link>' + w("/") + "</link>"
        f"<item><link>{w('/post/1')}</link><pubDate>Tue, 02 Jan 2024 03:04:05 GMT</pubDate>"
        f"</item><item><link>{w('/post/2')}</link></item></channel></rss>"
    ).encode()
    atom = (
        '<feed xmlns="http://www.w3.org/2005/Atom">'
        f'<entry><link href="{w("/post/3")}"/><updated>2024-02-03T00:00:00Z</updated></entry>'
        "</feed>"
    ).encode()
    web = {
        w("/robots.txt"): (200, {}, f"Sitemap: {w('/feed/')}\n".encode()),
        w("/"): (200, HTML, f'<title>home</title><a href="{w("/linked.rss")}">feed</a>'.encode()),
        w("/feed/"): (200, {"content-type": "application/rss+xml"}, rss),
        w("/atom.xml"): (200, {"content-type": "application/atom+xml"}, atom),
        w("/linked.rss"): (200, {"content-type": "application/rss+xml"}, rss),
    }
    for path in ("/post/1", "/post/2", "/post/3"):
        web[w(path)] = (200, HTML, b"<title>a post</title>")
    crawler, asked = await crawl(tmp_path, web=web, seeds=(w("/"), w("/atom.xml")))
    urls = [url for _, url in asked]
    assert {w("/post/1"), w("/post/2"), w("/post/3")} <= set(urls)
    assert len(urls) == len(set(urls))
    # The feed robots.txt names, the seed, /sitemap.xml (a 404); not the feed linked.
    assert crawler.stats.sitemaps == 3
    assert crawler.stats.skipped_types["application"] == 1
    with sqlite3.connect(tmp_path / "shard.sqlite3") as conn:
        lastmods = set(conn.execute("SELECT url, lastmod FROM lastmod"))
    assert lastmods == {
        (w("/post/1"), "2024-01-02T03:04:05+00:00"),
        (w("/post/3"), "2024-02-03T00:00:00Z"),
    }
