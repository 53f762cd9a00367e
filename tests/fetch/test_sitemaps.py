"""Reading sitemaps: whole ones, indexes, gzipped ones, and hostile ones (over the
limits, malformed, entities, bombs); robots.txt's Sitemap lines; a sitemap entry
through the politeness scheduler."""

from __future__ import annotations

import gc
import gzip
import resource
import time
import tracemalloc
import types
import zlib
from collections.abc import Callable

import pytest
from lxml import etree

from ubipy.fetch import sitemaps
from ubipy.fetch.politeness import Entry, JobKind, Scheduler
from ubipy.fetch.robots import MAX_SITEMAPS, RobotsFetch, RobotsRules
from ubipy.fetch.sitemaps import (
    INDEXED_SITEMAP_DEPTH,
    SITEMAP_DEPTH,
    SITEMAP_MAX_BYTES,
    Listed,
    SitemapKind,
    is_sitemap,
    read_sitemap,
)
from ubipy.fetch.xmlamps import bare_amps_escaped
from ubipy.wire.payloads import MAX_DEPTH

NS = 'xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"'


def urlset(*entries: str, ns: str = NS) -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<urlset {ns}>{"".join(entries)}</urlset>'.encode()
    )


def url(loc: str, lastmod: str | None = None, extra: str = "") -> str:
    mod = f"<lastmod>{lastmod}</lastmod>" if lastmod is not None else ""
    return f"<url><loc>{loc}</loc>{mod}{extra}</url>"


def many(n: int) -> bytes:
    return (
        b"<urlset>"
        + b"".join(b"<url><loc>http://a.test/%d</loc></url>" % i for i in range(n))
        + b"</urlset>"
    )


# -- whole sitemaps ---------------------------------------------------------------------


def test_a_sitemap_lists_its_urls_with_their_lastmod() -> None:
    body = urlset(
        url(" http://a.test/x?a=1&amp;b=2\n ", "2024-01-02", "<changefreq>daily</changefreq>"),
        url("http://a.test/y", "2024-05-06T07:08:09.123+02:00", "<priority>0.5</priority>"),
        url("http://a.test/z", "yesterday"),  # not a W3C datetime: dropped
        url("http://a.test/n", "2024-05-06 07:08:09"),  # no zone, a space: as sites write
        url("http://a.test/i", "2024-13-45"),  # no date: dropped
        "<url><lastmod>2024</lastmod></url>",  # no loc: nothing
        "<other><loc>http://a.test/not-an-entry</loc></other>",
    )
    assert read_sitemap(body) == read_sitemap(gzip.compress(body))
    sitemap = read_sitemap(body)
    assert sitemap.kind is SitemapKind.URLSET
    assert sitemap.entries == (
        Listed("http://a.test/x?a=1&b=2", "2024-01-02"),
        Listed("http://a.test/y", "2024-05-06T07:08:09.123+02:00"),
        Listed("http://a.test/z", None),
        Listed("http://a.test/n", "2024-05-06 07:08:09"),
        Listed("http://a.test/i", None),
    )
    assert (sitemap.over_limit, sitemap.cut, sitemap.error) == (0, False, None)


RSS = b"""<?xml version="1.0"?>
<rss version="2.0" xmlns:atom="http://www.w3.org/2005/Atom"><channel>
<title>A blog</title><link>http://a.test/</link>
<atom:link href="http://a.test/feed" rel="self"/>
<item><title>One</title><link>http://a.test/one</link>
<pubDate>Sat, 07 Sep 2002 09:42:31 GMT</pubDate></item>
<item><title>Two</title><link> http://a.test/two?a=1&amp;b=2 </link>
<pubDate>Sun, 08 Sep 2002 10:00:00 +0200</pubDate><category>x</category></item>
<item><link>http://a.test/three</link><pubDate>yesterday</pubDate></item>
<item><title>No link, no page</title><guid>tag:a.test,2002:4</guid></item>
</channel></rss>"""

ATOM = b"""<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>A blog</title>
<link href="http://a.test/" /><updated>2024-01-02T03:04:05Z</updated>
<entry><title>One</title><link rel="replies" href="http://a.test/one/comments"/>
<link href="http://a.test/one"/><link rel="alternate" href="http://a.test/one-again"/>
<updated>2024-01-02T03:04:05Z</updated><published>2023-01-01T00:00:00Z</published></entry>
<entry><link rel="alternate" type="text/html" href="http://a.test/two"/>
<updated>2024-05-06T07:08:09+02:00</updated></entry>
<entry><title>No link</title><updated>2024-01-01T00:00:00Z</updated></entry>
</feed>"""


@pytest.mark.parametrize(
    ("feed", "kind", "entries"),
    [
        (
            RSS,
            SitemapKind.RSS,
            (
                Listed("http://a.test/one", "2002-09-07T09:42:31+00:00"),
                Listed("http://a.test/two?a=1&b=2", "2002-09-08T10:00:00+02:00"),
                Listed("http://a.test/three", None),
            ),
        ),
        (
            ATOM,
            SitemapKind.ATOM,
            (
                Listed("http://a.test/one", "2024-01-02T03:04:05Z"),
                Listed("http://a.test/two", "2024-05-06T07:08:09+02:00"),
            ),
        ),
    ],
)
def test_a_feed_named_as_a_sitemap_lists_its_items_pages(
    feed: bytes, kind: SitemapKind, entries: tuple[Listed, ...]
) -> None:
    """RSS 2.0 and Atom, as the protocol's readers take them (a blog's robots.txt names
    its feed): the channel's own link and the comments' are no items'. Read whole, one
    byte at a time, and gzipped, the same."""
    sitemap = read_sitemap(feed)
    assert (sitemap.kind, sitemap.entries, sitemap.error) == (kind, entries, None)
    assert read_sitemap(gzip.compress(feed)) == sitemap
    target = sitemaps._Target(100)
    parser = etree.XMLParser(target=target, resolve_entities=False, no_network=True)
    for i in range(len(feed)):
        parser.feed(feed[i : i + 1])
    parser.close()
    assert tuple(target.entries) == entries


@pytest.mark.parametrize("ns", [NS, "", 'xmlns="http://www.google.com/schemas/sitemap/0.84"'])
def test_the_namespace_is_not_required(ns: str) -> None:
    assert read_sitemap(urlset(url("http://a.test/"), ns=ns)).entries == (Listed("http://a.test/"),)


def test_a_sitemap_index_lists_sitemaps() -> None:
    body = (
        f"<sitemapindex {NS}><sitemap><loc>http://a.test/s1.xml.gz</loc>"
        "<lastmod>2024-07-01T10:00Z</lastmod></sitemap>"
        "<sitemap><loc>http://a.test/s2.xml</loc></sitemap></sitemapindex>"
    ).encode()
    sitemap = read_sitemap(body)
    assert sitemap.kind is SitemapKind.INDEX
    assert sitemap.entries == (
        Listed("http://a.test/s1.xml.gz", "2024-07-01T10:00Z"),
        Listed("http://a.test/s2.xml"),
    )


def test_gzip_files_of_several_members_are_read_whole() -> None:
    body = urlset(url("http://a.test/1"), url("http://a.test/2"))
    half = len(body) // 2
    two = gzip.compress(body[:half]) + gzip.compress(body[half:])
    assert read_sitemap(two) == read_sitemap(body)


def test_another_root_is_not_a_sitemap() -> None:
    for body in (b"<html><body><a href='http://a.test/'>x</a></body></html>", b"<rdf/>"):
        sitemap = read_sitemap(body)
        assert sitemap.kind is None and sitemap.entries == ()
        assert sitemap.error is not None and "not a sitemap" in sitemap.error


@pytest.mark.parametrize("wrap", [bytes, gzip.compress], ids=["plain", "gzipped"])
@pytest.mark.parametrize("whole", [True, False], ids=["whole", "in pieces"])
def test_a_text_sitemap_lists_a_url_a_line(wrap: Callable[[bytes], bytes], whole: bool) -> None:
    # sitemaps.org's text format: one absolute URL a line, UTF-8; lines that are no
    # URL are skipped. Read in pieces, a line may straddle two chunks.
    body = b"http://a.test/1\r\n\nhttps://a.test/\xc3\xa9\n  not a URL\nhttp://a.test/3"
    if not whole:
        body = b"\n" * (sitemaps._CHUNK - 5) + body
    body = b"\xef\xbb\xbf" + body
    sitemap = read_sitemap(wrap(body))
    assert sitemap.kind is SitemapKind.URLSET and sitemap.error is None
    assert [e.loc for e in sitemap.entries] == [
        "http://a.test/1",
        "https://a.test/\u00e9",
        "http://a.test/3",
    ]


def test_a_text_sitemaps_line_too_long_is_skipped_to_its_end() -> None:
    # Cut by the reading's chunks, its tail was read as a line of its own.
    body = b"\n" * (sitemaps._CHUNK - 9000) + b"x" * 9000 + b"http://b.test/x\nhttp://a.test/1\n"
    assert [e.loc for e in read_sitemap(body).entries] == ["http://a.test/1"]
    endless = b"\n" * (sitemaps._CHUNK - 9000) + b"x" * 200_000 + b"http://b.test/x\n"
    assert read_sitemap(endless + b"http://a.test/2").entries == (Listed("http://a.test/2"),)


def test_text_that_lists_no_url_is_not_a_sitemap() -> None:
    sitemap = read_sitemap(b"Not Found\n")
    assert sitemap.kind is None and sitemap.error is not None
    # A body cut by the fetch's cap: its last line may be a URL cut short.
    cut = read_sitemap(b"http://a.test/1\nhttp://a.test/lo", truncated=True)
    assert [e.loc for e in cut.entries] == ["http://a.test/1"] and cut.cut


def test_a_text_sitemap_past_50000_urls_is_counted() -> None:
    body = b"".join(b"http://a.test/%d\n" % i for i in range(50_002))
    sitemap = read_sitemap(body)
    assert (len(sitemap.entries), sitemap.over_limit) == (50_000, 2)


# -- limits ----------------------------------------------------------------------------


def test_urls_past_50000_are_counted_and_skipped() -> None:
    sitemap = read_sitemap(many(50_003))
    assert len(sitemap.entries) == 50_000 and sitemap.over_limit == 3
    assert sitemap.entries[-1] == Listed("http://a.test/49999")
    assert not sitemap.cut and sitemap.error is None


def test_nothing_past_50_mb_uncompressed_is_read() -> None:
    head = urlset(url("http://a.test/1"))[: -len(b"</urlset>")]
    body = head + b" " * SITEMAP_MAX_BYTES + url("http://a.test/after").encode() + b"</urlset>"
    sitemap = read_sitemap(gzip.compress(body))
    assert sitemap.entries == (Listed("http://a.test/1"),) and sitemap.cut
    assert sitemap.error is None
    assert read_sitemap(body, max_bytes=len(head) + 10).cut


def test_a_gzip_bomb_costs_no_memory() -> None:
    # 60 MB of blanks inflated from 60 KB: made a megabyte at a time.
    deflate = zlib.compressobj(9, wbits=31)
    blanks = b" " * (1024 * 1024)
    bomb = deflate.compress(b"<urlset>") + b"".join(deflate.compress(blanks) for _ in range(60))
    bomb += deflate.compress(b"</urlset>") + deflate.flush()
    assert len(bomb) < 100_000
    tracemalloc.start()
    try:
        sitemap = read_sitemap(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sitemap.cut and sitemap.entries == ()
    assert peak < 4 * 1024 * 1024


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def test_a_comment_cut_at_50_mb_leaves_no_buffer_behind() -> None:
    """libxml2 buffers a comment whole until its end; cut at the limit, those 50 MB
    stayed with the parser until the garbage collector ran, which a peer seldom does
    (QA: 40 hosts' gzip bombs held 1.2-2 GB)."""
    deflate = zlib.compressobj(1, wbits=31)
    blanks = b" " * (1024 * 1024)
    bomb = deflate.compress(b"<urlset><!--") + b"".join(deflate.compress(blanks) for _ in range(60))
    bomb += deflate.flush()
    gc.collect()
    gc.disable()
    try:
        before = _resident_bytes()
        for _ in range(4):
            sitemap = read_sitemap(bomb)
            assert sitemap.cut and sitemap.entries == ()
        grown = _resident_bytes() - before
    finally:
        gc.enable()
    assert grown < 40 * 1024 * 1024, grown


@pytest.mark.parametrize("gzipped", [False, True])
def test_bare_ampersands_are_read_as_sites_mean_them(gzipped: bool) -> None:
    # One "&" written bare stopped the parser: 3 of 1,004 entries were kept (a review).
    # Read again with each written "&amp;"; references and CDATA stand as they are,
    # across the reader's 64 KiB chunks too.
    many = "".join(url(f"http://a.test/p?x={i}&y=2") for i in range(3_000))
    body = urlset(
        url("<![CDATA[http://a.test/c?x=1&y=2]]>"),
        many,
        url("http://a.test/q?a=1&amp;b=2&#38;c=3&d"),
    )
    sitemap = read_sitemap(gzip.compress(body) if gzipped else body)
    assert sitemap.error is None and len(sitemap.entries) == 3_002
    assert sitemap.entries[0].loc == "http://a.test/c?x=1&y=2"
    assert {e.loc for e in sitemap.entries[1:-1]} == {
        f"http://a.test/p?x={i}&y=2" for i in range(3_000)
    }
    assert sitemap.entries[-1].loc == "http://a.test/q?a=1&b=2&c=3&d"


def test_bare_ampersands_are_escaped_alike_whole_and_a_byte_at_a_time() -> None:
    # What a chunk's end cuts (a reference, a section's start or end) waits for the
    # next chunk: fed a byte at a time, the same bytes come out. In a comment a CDATA
    # start is text: taken for one, every "&" after it went unescaped (a review).
    doc = (
        b"<urlset><url><loc>http://a.test/?a=1&b=2&amp;c=3&#38;d&#x26;e&</loc></url>"
        b"<url><loc><![CDATA[http://a.test/?x=1&y=]]]]></loc></url><!-- a <![CDATA[ & b -->"
        b"&averyveryveryveryveryveryverylongname; & ]]> &"
    )
    whole = b"".join(bare_amps_escaped(iter([doc])))
    assert whole == (
        b"<urlset><url><loc>http://a.test/?a=1&amp;b=2&amp;c=3&#38;d&#x26;e&amp;</loc></url>"
        b"<url><loc><![CDATA[http://a.test/?x=1&y=]]]]></loc></url><!-- a <![CDATA[ & b -->"
        b"&amp;averyveryveryveryveryveryverylongname; &amp; ]]> &amp;"
    )
    assert b"".join(bare_amps_escaped(doc[i : i + 1] for i in range(len(doc)))) == whole


def test_unclosed_cdata_sections_cost_a_pass_not_a_pass_each() -> None:
    # A bare "&", then chunks of unclosed CDATA starts (in comments: well formed). A
    # regex read each start to its chunk's end: 23 s for this megabyte (a review), some
    # 20 minutes of the event loop for a 50 MB sitemap, 99 KB gzipped.
    unit = b"<!--" + b"<![CDATA[" * 7000 + b"-->\n"
    body = b"<urlset><url><loc>http://a.test/?a=1&b=2</loc></url>" + unit * 16
    body += b"<url><loc>http://a.test/?c=3&d=4</loc></url></urlset>"
    started = time.monotonic()
    sitemap = read_sitemap(gzip.compress(body))
    assert time.monotonic() - started < 5
    assert sitemap.error is None
    assert [e.loc for e in sitemap.entries] == ["http://a.test/?a=1&b=2", "http://a.test/?c=3&d=4"]


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_a_sitemap_in_utf16_is_read(encoding: str) -> None:
    # Its first byte is no "<": it was read as a text sitemap, and nothing found.
    bom = "\ufeff".encode(encoding)
    many = "".join(url(f"http://a.test/é{i}") for i in range(3_000))  # past one chunk
    body = bom + urlset(many).decode().replace("UTF-8", "UTF-16").encode(encoding)
    sitemap = read_sitemap(body)
    assert sitemap.error is None and len(sitemap.entries) == 3_000
    assert sitemap.entries[-1].loc == "http://a.test/é2999"


def test_entries_with_many_alternates_are_read_whole() -> None:
    # A multilingual site's sitemap: each URL with its 25 languages' alternates (a
    # review's 20,000 URLs with 30 each, 42 MB, were cut to 15,624 at 10 elements a URL).
    alternates = "".join(
        f'<xhtml:link rel="alternate" hreflang="l{i}" href="https://a.test/l{i}/p"/>'
        for i in range(25)
    )
    urls = "".join(f"<url><loc>https://a.test/p{n}</loc>{alternates}</url>" for n in range(2_000))
    body = (
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
        f'xmlns:xhtml="http://www.w3.org/1999/xhtml">{urls}</urlset>'
    ).encode()
    sitemap = read_sitemap(body, max_urls=2_000)
    assert not sitemap.cut and len(sitemap.entries) == 2_000


def test_a_flood_of_elements_is_cut_in_reasonable_time() -> None:
    # 4 bytes an element: 12 million of them fit in 50 MB.
    flood = gzip.compress(b"<urlset><url>" + b"<x/>" * (12 * 1024 * 1024) + b"</url></urlset>")
    started = time.monotonic()
    sitemap = read_sitemap(flood)
    assert sitemap.cut and sitemap.entries == ()
    assert time.monotonic() - started < 10  # 1.5 million elements read, not 12


class _Inflater:
    """zlib's inflater, noting the most input it was handed at once and the most it
    kept past a member's end."""

    most_in = 0
    most_unused = 0

    def __init__(self, wbits: int) -> None:
        self._inflate = zlib.decompressobj(wbits=wbits)

    def decompress(self, data: bytes | memoryview, max_length: int = 0) -> bytes:
        _Inflater.most_in = max(_Inflater.most_in, len(data))
        out = self._inflate.decompress(data, max_length)
        _Inflater.most_unused = max(_Inflater.most_unused, len(self._inflate.unused_data))
        return out

    @property
    def eof(self) -> bool:
        return self._inflate.eof

    @property
    def unused_data(self) -> bytes:
        return self._inflate.unused_data

    @property
    def unconsumed_tail(self) -> bytes:
        return self._inflate.unconsumed_tail


def test_many_small_gzip_members_are_inflated_a_slice_at_a_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each member was handed the whole rest of the body, which the inflater copied
    # into unused_data: 10 MiB of small members took a minute of a frozen trio loop.
    monkeypatch.setattr(_Inflater, "most_in", 0)
    monkeypatch.setattr(_Inflater, "most_unused", 0)
    fake = types.SimpleNamespace(decompressobj=_Inflater, error=zlib.error)
    monkeypatch.setattr(sitemaps, "zlib", fake)
    body = many(1000)
    members = b"".join(gzip.compress(body[i : i + 8], mtime=0) for i in range(0, len(body), 8))
    assert len(members) > 2 * 64 * 1024
    assert read_sitemap(members) == read_sitemap(body)
    assert len(read_sitemap(members).entries) == 1000
    assert 0 < _Inflater.most_in <= 64 * 1024
    assert _Inflater.most_unused <= 64 * 1024


def test_a_flood_of_gzip_members_is_cut() -> None:
    head = gzip.compress(urlset(url("http://a.test/1"))[: -len(b"</urlset>")])
    flood = head + gzip.compress(b"", mtime=0) * 50_000
    started = time.monotonic()
    sitemap = read_sitemap(flood)
    assert sitemap.entries == (Listed("http://a.test/1"),)
    assert sitemap.cut and sitemap.error is None
    assert time.monotonic() - started < 5


def test_a_body_cut_by_the_fetch_keeps_what_came_and_says_so() -> None:
    body = urlset(url("http://a.test/1"), url("http://a.test/2"), url("http://a.test/3"))
    cut_at = body.index(b"http://a.test/3")
    sitemap = read_sitemap(body[:cut_at], truncated=True)
    assert [e.loc for e in sitemap.entries] == ["http://a.test/1", "http://a.test/2"]
    assert sitemap.cut and sitemap.error is None
    zipped = gzip.compress(body)
    assert read_sitemap(zipped[:-12], truncated=True).error is None
    assert read_sitemap(zipped[:-12]).error == "bad gzip: the stream ends early"


def test_an_overlong_loc_is_dropped() -> None:
    sitemap = read_sitemap(urlset(url("http://a.test/" + "x" * 20_000), url("http://a.test/ok")))
    assert sitemap.entries == (Listed("http://a.test/ok"),)


# -- hostile XML -----------------------------------------------------------------------


def test_malformed_xml_keeps_what_came_before() -> None:
    body = b"<urlset><url><loc>http://a.test/1</loc></url><url><loc>http://a.test/2</lo"
    sitemap = read_sitemap(body + b"c></url><url></urlset>")
    assert sitemap.entries == (Listed("http://a.test/1"), Listed("http://a.test/2"))
    assert sitemap.error is not None and sitemap.error.startswith("malformed XML")
    assert not sitemap.cut
    for junk in (b"", b"\x00\xff\xfe garbage", b"\x1f\x8b not gzip at all"):
        assert read_sitemap(junk).entries == () and read_sitemap(junk).error is not None


def test_entities_are_not_expanded() -> None:
    laughs = (
        b'<?xml version="1.0"?><!DOCTYPE u [<!ENTITY a "aaaaaaaaaa">'
        + b"".join(
            b'<!ENTITY %s "%s">' % (bytes([98 + i]), b"&%s;" % bytes([97 + i]) * 10)
            for i in range(8)
        )
        + b"]><urlset><url><loc>http://a.test/&i;</loc></url></urlset>"
    )
    started = time.monotonic()
    sitemap = read_sitemap(laughs)
    assert time.monotonic() - started < 1
    assert all(len(e.loc) < 100 for e in sitemap.entries)


def test_external_entities_and_dtds_are_not_fetched(tmp_path: object) -> None:
    body = (
        b'<?xml version="1.0"?><!DOCTYPE urlset SYSTEM "http://dtd.invalid/x.dtd" '
        b'[<!ENTITY secret SYSTEM "file:///etc/passwd">]>'
        b"<urlset><url><loc>http://a.test/&secret;</loc></url></urlset>"
    )
    sitemap = read_sitemap(body)
    assert all("root:" not in e.loc for e in sitemap.entries)
    assert [e.loc for e in sitemap.entries] in ([], ["http://a.test/"])


# -- robots.txt and the depth mark ------------------------------------------------------


def test_robots_txt_names_its_sitemaps_in_any_group() -> None:
    rules = RobotsRules.parse(
        b"Sitemap: http://a.test/one.xml\nUser-agent: other\nDisallow: /\n"
        b"sitemap: /relative.xml\nUser-agent: *\nDisallow: /private/\n"
    )
    assert rules.sitemaps == ("http://a.test/one.xml", "/relative.xml")
    assert rules.sitemaps_over == 0
    assert RobotsRules.allow_all().sitemaps == ()
    lots = b"".join(b"Sitemap: http://a.test/%d.xml\n" % i for i in range(MAX_SITEMAPS + 7))
    rules = RobotsRules.parse(lots)
    assert len(rules.sitemaps) == MAX_SITEMAPS and rules.sitemaps_over == 7


def test_a_robots_fetch_remembers_where_it_started() -> None:
    fetch = RobotsFetch("http://a.test/robots.txt")
    assert fetch.on_response(301, "http://b.test/robots.txt", b"") is None
    assert (fetch.start, fetch.url) == ("http://a.test/robots.txt", "http://b.test/robots.txt")


def test_the_sitemap_depths_travel_on_the_wire_and_no_link_reaches_them() -> None:
    assert SITEMAP_DEPTH == MAX_DEPTH  # the deepest a URL_BATCH may carry
    assert is_sitemap(SITEMAP_DEPTH) and is_sitemap(INDEXED_SITEMAP_DEPTH)
    assert not is_sitemap(INDEXED_SITEMAP_DEPTH - 1) and not is_sitemap(0)


def test_a_sitemap_entry_waits_its_turn_in_the_host_slot() -> None:
    s = Scheduler(delay=2.0, window=8, loader=lambda host, after, limit: [])
    s.add("a.test", Entry(1, 1, "http://a.test/", 0))
    s.add("a.test", Entry(2, 2, "http://a.test/sitemap.xml", SITEMAP_DEPTH))
    job = s.next_job(0.0)
    assert job is not None and job.kind is JobKind.ROBOTS
    s.robots_answer("a.test", 0.5, status=200, location=None, body=b"User-agent: *\nDisallow:\n")
    page = s.next_job(2.5)
    assert page is not None and page.kind is JobKind.PAGE
    assert s.next_job(10.0) is None  # one request at a time
    s.finished("a.test", 3.0)
    assert s.next_job(4.9) is None  # the host's delay holds for sitemaps too
    sitemap = s.next_job(5.0)
    assert sitemap is not None and sitemap.kind is JobKind.SITEMAP
    assert sitemap.url == "http://a.test/sitemap.xml"
    # The page spent one of the host's budget, the sitemap none.
    assert s.slot("a.test") is not None and s.slot("a.test").pages == 1  # type: ignore[union-attr]


def test_robots_txt_rules_sitemaps_too() -> None:
    s = Scheduler(delay=0.0, window=8, loader=lambda host, after, limit: [])
    s.add("a.test", Entry(1, 1, "http://a.test/private/sitemap.xml", SITEMAP_DEPTH))
    assert (job := s.next_job(0.0)) is not None and job.kind is JobKind.ROBOTS
    s.robots_answer(
        "a.test", 0.0, status=200, location=None, body=b"User-agent: *\nDisallow: /private/\n"
    )
    skip = s.next_job(0.0)
    assert skip is not None and (skip.kind, skip.reason) == (JobKind.SKIP, "robots")
