"""--include / --exclude on URLs and --accept on response types: which are kept, and
what the crawler does with a seed, a link and an answer that the filters drop."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import httpx2

from tests.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, FetchConfig, PolitenessConfig, Scope
from ubipy.fetch import Filtered, MediaTypes, ScopeFilter, UrlFilter, fetch, type_family
from ubipy.peer.crawler import Crawler
from ubipy.peer.crawlstats import CrawlStats
from ubipy.peer.discovery import candidates, seed_candidates
from ubipy.store.shard import Shard


def test_a_url_is_kept_when_an_include_matches_and_no_exclude_does() -> None:
    f = UrlFilter(include=(r"\.example/", "/docs/"), exclude=(r"/private/", r"\?print"))
    assert f.verdict("http://a.example/x") is None
    assert f.verdict("http://b.test/docs/y") is None
    assert f.verdict("http://b.test/blog/") is Filtered.NOT_INCLUDED
    assert f.verdict("http://a.example/private/z") is Filtered.EXCLUDED
    assert f.verdict("http://a.example/x?print=1") is Filtered.EXCLUDED
    # Searched, not matched from the start.
    assert UrlFilter(exclude=("login",)).verdict("http://a.test/user/login") is Filtered.EXCLUDED


def test_no_pattern_keeps_everything() -> None:
    f = UrlFilter()
    assert not f and f.verdict("http://anything.test/") is None
    assert UrlFilter(exclude=("x",))


def test_html_is_always_accepted_and_others_only_when_asked() -> None:
    html = MediaTypes()
    assert html.allows("text/html") and html.allows("application/xhtml+xml")
    assert not html.allows("application/pdf") and not html.allows(None)
    more = MediaTypes(["application/pdf", "Image/*"])
    assert more.allows("text/html") and more.allows("application/pdf")
    assert more.allows("image/png") and more.allows("image/svg+xml")
    assert not more.allows("application/zip") and not more.allows("text/plain")
    assert MediaTypes(["*/*"]).allows(None)


def test_types_are_counted_by_family() -> None:
    assert type_family("image/png") == "image"
    assert type_family("application/pdf") == "application"
    assert type_family(None) == "none" and type_family("garbage") == "none"


def test_links_are_filtered_after_scope_and_counted() -> None:
    scope = ScopeFilter(Scope.ANY, (), UrlFilter(include=("/docs/",), exclude=("/docs/old/",)))
    stats = CrawlStats()
    links = [
        "http://a.test/docs/new.html",
        "http://b.test/docs/old/x.html",
        "http://a.test/blog/",
        "http://c.test/docs/",
    ]
    kept = candidates(links, None, 1, scope=scope, max_path_repeats=3, stats=stats)
    assert [u.url for u in kept] == ["http://a.test/docs/new.html", "http://c.test/docs/"]
    assert stats.filtered == {Filtered.EXCLUDED: 1, Filtered.NOT_INCLUDED: 1}


def test_an_excluded_seed_is_refused_with_the_reason_and_widens_no_scope() -> None:
    scope = ScopeFilter.of(BoundsConfig(scope=Scope.HOST, exclude=("/private",)))
    stats = CrawlStats()
    offered, found, refused = seed_candidates(
        ["http://a.test/", "http://b.test/private/"], scope=scope, stats=stats
    )
    assert offered == 2 and [u.url for u in found] == ["http://a.test/"]
    assert refused == [("http://b.test/private/", "excluded by --exclude")]
    assert scope.roots == {"a.test"}
    assert stats.filtered == {Filtered.EXCLUDED: 1}


# -- answers of other types --------------------------------------------------------------

PDF = b"%PDF-1.4 " + b"x" * 5000


def _web(asked: list[str]) -> httpx2.MockTransport:
    def serve(request: httpx2.Request) -> httpx2.Response:
        asked.append(request.url.path)
        path = request.url.path
        if path == "/":
            body = b'<a href="/a.pdf">pdf</a><a href="/logo.png">png</a><a href="/z">z</a>'
            return httpx2.Response(200, headers={"content-type": "text/html"}, content=body)
        if path == "/a.pdf":
            # A PDF with an href in it: were it parsed, /from-pdf would be asked too.
            return httpx2.Response(
                200,
                headers={"content-type": "application/pdf"},
                content=PDF + b'<a href="/from-pdf">',
            )
        if path == "/logo.png":
            return httpx2.Response(200, headers={"content-type": "image/png"}, content=b"\x89PNG")
        if path == "/z":
            return httpx2.Response(200, content=b"no type")
        return httpx2.Response(404)

    return httpx2.MockTransport(serve)


async def _crawl(tmp: Path, accept: Sequence[str]) -> tuple[Crawler, dict[str, dict[str, object]]]:
    config = CrawlConfig(
        data_dir=tmp,
        politeness=PolitenessConfig(delay=0.0),
        fetch=FetchConfig(accept=tuple(accept)),
    )
    shard = Shard.open(tmp)
    asked: list[str] = []
    try:
        async with httpx2.AsyncClient(transport=_web(asked)) as client:
            crawler = await crawl_until_idle(config, shard, client, ["http://a.test/"])
        pages = {
            str(r["url"]).removeprefix("http://a.test"): {**r, "body": shard.page_body(r["fp"])}
            for r in shard.iter_pages()
            if not str(r["url"]).endswith("/sitemap.xml")  # whatever a crawler makes of it
        }
    finally:
        shard.close()
    assert "/from-pdf" not in asked  # never parsed for links
    return crawler, pages


async def test_other_types_are_skipped_by_default_and_counted_by_family(tmp_path: Path) -> None:
    crawler, pages = await _crawl(tmp_path, ())
    assert set(pages) == {"/", "/a.pdf", "/logo.png", "/z"}
    pdf = pages["/a.pdf"]
    assert (pdf["status"], pdf["content_type"], pdf["body"]) == (200, "application/pdf", None)
    assert pdf["error"] == "type not accepted: application/pdf"
    assert pages["/z"]["error"] == "type not accepted: none given"
    assert pages["/"]["error"] is None
    stats = crawler.stats
    assert stats.skipped_types == {"application": 1, "image": 1, "none": 1}
    assert stats.pages == 4 and stats.errors == 0


async def test_an_accepted_type_is_stored_but_not_parsed(tmp_path: Path) -> None:
    crawler, pages = await _crawl(tmp_path, ("application/pdf",))
    pdf = pages["/a.pdf"]
    assert pdf["error"] is None and pdf["body"] is not None and pdf["length"] > 5000  # type: ignore[operator]
    assert pages["/logo.png"]["error"] == "type not accepted: image/png"
    assert crawler.stats.skipped_types == {"image": 1, "none": 1}


async def test_a_skipped_body_is_not_read() -> None:
    read: list[int] = []

    async def body() -> object:
        for _ in range(100):
            read.append(1)
            yield b"x" * 1000

    def serve(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "video/mp4"}, content=body())  # type: ignore[arg-type]

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(serve)) as client:
        r = await fetch(client, "http://a.test/v", max_bytes=10**6, accept=MediaTypes().allows)
    assert r.ok and not r.accepted and r.body == b"" and r.content_type == "video/mp4"
    assert read == []
