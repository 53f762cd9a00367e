"""Feeds read as sitemaps, from hostile hosts: any date an RSS item's pubDate may hold,
and feeds made of the format's own elements in any order. Nothing raises; a lastmod
kept is a W3C datetime the hints can read."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.common import fuzz
from ubipy.fetch.sitemaps import parse_w3c, read_sitemap

_DATES = ["Sat, 07 Sep 2002 09:42:31 GMT", "07 Sep 99999 00:00 GMT", "Mon, 31 Feb 2024 00:00 +0000",
          "Sun, 01 Jan 0000 00:00:00 -0000", "1 Jan 70 25:61:61 +9999", "", "  ", "GMT",
          "Fri, 13 Dec 1901 20:45:52 -1200", "Tue, 19 Jan 2038 03:14:08 +1400", "\x00"]  # fmt: skip
_ELEMENTS = ["<link>http://a.test/{}</link>", "<pubDate>{}</pubDate>", "<link/>", "<guid>{}</guid>",
             "<title>{}</title>", '<atom:link href="http://a.test/{}" rel="self"/>']  # fmt: skip


@fuzz(100)
@given(
    date=st.sampled_from(_DATES) | st.text(max_size=60),
    items=st.lists(st.lists(st.sampled_from(_ELEMENTS), max_size=5), max_size=5),
)
def test_any_feed_reads_without_raising(date: str, items: list[list[str]]) -> None:
    body = "".join("<item>" + "".join(e.format(date) for e in item) + "</item>" for item in items)
    feed = f'<rss xmlns:atom="http://www.w3.org/2005/Atom"><channel>{body}</channel></rss>'
    sitemap = read_sitemap(feed.encode("utf-8", "surrogatepass"))
    for listed in sitemap.entries:
        assert listed.lastmod is None or parse_w3c(listed.lastmod) is not None
