"""Sitemaps (the sitemaps.org protocol, 0.9): a sitemap or a sitemap index read safely.

What a sitemap lists, and nothing else: ``<loc>`` and ``<lastmod>`` of each ``<url>``
of a ``<urlset>``, or of each ``<sitemap>`` of a ``<sitemapindex>``; of a feed given
as a sitemap (the protocol's readers take RSS 2.0 and Atom), each item's ``<link>`` and
``<pubDate>``, or each entry's alternate ``<link href>`` and ``<updated>``. Names are
matched without their namespace (sitemaps in the wild often get it wrong); any other
root is not a sitemap. A body that is not XML is read as the protocol's text sitemap: one
absolute URL a line (lines that are not http or https URLs are skipped; a body with
none is not a sitemap).

Hostile input is bounded everywhere:

* the XML parser resolves no external entity, loads no DTD and touches no network
  (``resolve_entities=False, no_network=True, load_dtd=False``), and keeps libxml2's
  limits on text sizes and entity amplification (``huge_tree`` off): an internal
  DTD's entities are expanded within those limits (a ``<loc>`` may come of one);
* the body is fed to the parser in chunks, and the parser builds no tree: its target
  keeps the entries alone, so memory holds them, never the document. Each element
  costs a Python call, so a document of more than thirty elements per entry allowed
  is cut there (a flood of empty elements costs under a second);
* a gzipped body (a ``.gz`` file, or gzip left over after the ``Content-Encoding``)
  is inflated in chunks, and nothing past :data:`SITEMAP_MAX_BYTES` uncompressed is
  read: a bomb costs 50 MB of work and no memory; of a body of many gzip members, the
  first 10,000 are read;
* at most :data:`SITEMAP_MAX_URLS` entries are kept; those past it are counted.

A bare "&" in a URL (sites write them so; XML wants "&amp;") stopped the parser and
lost the rest of the file: such a file is read again, each bare "&" written "&amp;"
(references and CDATA sections left as they are).

Malformed XML ends the reading: what came before the error is kept, and the error
is said. No I/O here: the caller fetches the body.

A sitemap in the crawl is a frontier entry like a page, told apart by its depth (see
:data:`SITEMAP_DEPTH`), so that every path a URL takes between peers (forwarding,
outboxes, hand-offs, replicas) carries the mark with no change to the wire or the
frontier's table.
"""

from __future__ import annotations

import calendar
import contextlib
import datetime
import email.utils
import enum
import itertools
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from lxml import etree

from ubipy.fetch.xmlamps import bare_amps_escaped
from ubipy.steps import Steps, finished

__all__ = [
    "INDEXED_SITEMAP_DEPTH",
    "LISTED_DEPTH",
    "SITEMAP_DEPTH",
    "SITEMAP_MAX_BYTES",
    "SITEMAP_MAX_URLS",
    "SITEMAP_PATH",
    "Listed",
    "Sitemap",
    "SitemapKind",
    "is_sitemap",
    "parse_w3c",
    "read_sitemap",
    "sitemap_reading",
]

# The protocol's limits, per file: 50,000 URLs and 50 MB (52,428,800 bytes) uncompressed.
SITEMAP_MAX_URLS: Final = 50_000
SITEMAP_MAX_BYTES: Final = 50 * 1024 * 1024
# Where a host's sitemap is looked for when its robots.txt names none (and besides).
SITEMAP_PATH: Final = "/sitemap.xml"

#: The depth of a sitemap's frontier entry: the deepest the wire carries (its
#: MAX_DEPTH), which no chain of links reaches. A sitemap named by robots.txt or found
#: at /sitemap.xml has this depth...
SITEMAP_DEPTH: Final = 1_000_000
#: ...and one listed in a sitemap index this one: the protocol forbids an index in an
#: index, so what such a sitemap lists is read only if it is a plain sitemap (a
#: hostile host cannot nest indexes without end).
INDEXED_SITEMAP_DEPTH: Final = SITEMAP_DEPTH - 1
#: The depth of the URLs a sitemap lists: one hop from the site, like its root's links.
LISTED_DEPTH: Final = 1

_CHUNK = 64 * 1024
# A <loc> or <lastmod> longer than this is no URL (see ubipy.fetch.urls) or date.
_MAX_TEXT = 8 * 1024
# Elements read per entry allowed, on average: a document with more is cut there.
# 1.5 million in all: a sitemap within 50 MB holds fewer, however many alternates
# (hreflang links, 80 bytes or more each) or video fields its entries carry (10 a URL
# cut one of 20,000 URLs with 30 alternates each to 15,624); a flood of empty elements
# costs 0.7 s of CPU.
_ELEMENTS_PER_URL = 30
_GZIP_MAGIC = b"\x1f\x8b"
# A gzip member's first slice of input (see _Source._gunzip); the next ones double, up
# to _CHUNK.
_FIRST_SLICE = 1024
# Members read in one gzip body: tools that write several (bgzip's 64 KiB blocks) need
# about 800 for 50 MB; each costs a fresh inflater, so half a million empty ones in a body
# of 10 MiB are cut here, in a few tens of milliseconds.
_MAX_MEMBERS = 10_000
# W3C Datetime, as the protocol asks: YYYY, YYYY-MM, YYYY-MM-DD, or a date with a time
# (minutes, seconds or fractions) and a zone.
# A W3C datetime (the protocol's lastmod), and the forms sites write beside it: a
# space for the T, a zone without its colon, a time with no zone.
_W3C: Final = re.compile(
    r"(\d{4})(?:-(\d\d)(?:-(\d\d)(?:[T ](\d\d):(\d\d)(?::(\d\d)(\.\d{1,9})?)?"
    r"(Z|[+-]\d\d:?\d\d)?)?)?)?"
)
# A time with no zone is one of the world's, from UTC-12 to UTC+14.
_EAST, _WEST = 14 * 3600, 12 * 3600


def parse_w3c(text: str) -> tuple[float, float] | None:
    """A lastmod as (its first instant, Unix seconds; its span: how long what is
    written leaves open: its precision, and the day's zones for a time without one),
    or None for what is no date (a 13th month, a 25th hour)."""
    m = _W3C.fullmatch(text.strip())
    if m is None:
        return None
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    y, mo, d = int(year), int(month or 1), int(day or 1)
    h, mi, sec = int(hour or 0), int(minute or 0), int(second or 0)
    if not (y >= 1 and 1 <= mo <= 12 and 1 <= d <= calendar.monthrange(y, mo)[1]):
        return None
    if h > 23 or mi > 59 or sec > 60:  # 60: a leap second
        return None
    start = float(calendar.timegm((y, mo, d, h, mi, sec)))
    if fraction:
        start, span = start + float(fraction), 10.0 ** -(len(fraction) - 1)
    elif second:
        span = 1.0
    elif minute:
        span = 60.0
    elif day:
        span = 86400.0
    elif month:
        span = calendar.monthrange(y, mo)[1] * 86400.0
    else:
        span = (366.0 if calendar.isleap(y) else 365.0) * 86400.0
    if hour is not None and zone is None:
        start, span = start - _EAST, span + _EAST + _WEST
    elif zone and zone != "Z":
        zh, zm = int(zone[1:3]), int(zone[-2:])
        if zh > 14 or zm > 59:
            return None
        start -= (1 if zone[0] == "+" else -1) * (zh * 3600 + zm * 60)
    return start, span


def is_sitemap(depth: int) -> bool:
    """Whether a frontier entry of this depth is a sitemap (see :data:`SITEMAP_DEPTH`)."""
    return depth >= INDEXED_SITEMAP_DEPTH


class SitemapKind(enum.Enum):
    URLSET = "urlset"  # lists pages
    INDEX = "sitemapindex"  # lists sitemaps
    # Feeds the protocol's readers take as sitemaps (Google's, Bing's): each item's or
    # entry's link is a page, its pubDate or updated its lastmod. A robots.txt's
    # Sitemap: line often names one (a blog's).
    RSS = "rss"
    ATOM = "feed"


# Each kind's entry element, its depth (an RSS item is in its channel), and the fields
# read of it: their names, and what they are read as.
_ENTRY: Final = {
    SitemapKind.URLSET: ("url", 2),
    SitemapKind.INDEX: ("sitemap", 2),
    SitemapKind.RSS: ("item", 3),
    SitemapKind.ATOM: ("entry", 2),
}
_FIELDS: Final = {
    SitemapKind.URLSET: {"loc": "loc", "lastmod": "lastmod"},
    SitemapKind.INDEX: {"loc": "loc", "lastmod": "lastmod"},
    SitemapKind.RSS: {"link": "loc", "pubDate": "lastmod"},
    # An Atom entry's page is its link's href (below); <updated> is RFC 3339's.
    SitemapKind.ATOM: {"updated": "lastmod"},
}


@dataclass(frozen=True, slots=True)
class Listed:
    """One entry: its ``<loc>`` as written (stripped), and its ``<lastmod>`` if it is
    a W3C datetime (anything else is dropped)."""

    loc: str
    lastmod: str | None = None


@dataclass(frozen=True, slots=True)
class Sitemap:
    # None: not a sitemap (another root element, or nothing readable).
    kind: SitemapKind | None
    entries: tuple[Listed, ...]
    # Entries past SITEMAP_MAX_URLS: counted, not kept.
    over_limit: int = 0
    # The document went on past SITEMAP_MAX_BYTES uncompressed or past its elements'
    # budget, or its body was cut before its end (the fetch's cap): what followed was
    # not read.
    cut: bool = False
    # Why reading stopped before the end (malformed XML or gzip), if it did; the
    # entries before that are kept.
    error: str | None = None


def read_sitemap(
    body: bytes,
    *,
    truncated: bool = False,
    max_urls: int = SITEMAP_MAX_URLS,
    max_bytes: int = SITEMAP_MAX_BYTES,
) -> Sitemap:
    """Read a sitemap or a sitemap index from ``body`` (gzipped or not); never raises on
    hostile bytes. ``truncated``: the body is a prefix, cut by the fetch's cap."""
    return finished(
        sitemap_reading(body, truncated=truncated, max_urls=max_urls, max_bytes=max_bytes)
    )


def sitemap_reading(
    body: bytes,
    *,
    truncated: bool = False,
    max_urls: int = SITEMAP_MAX_URLS,
    max_bytes: int = SITEMAP_MAX_BYTES,
) -> Steps[Sitemap]:
    """:func:`read_sitemap` in steps, for a caller that lets others run between two: it
    yields after each chunk of the body read (64 KiB, inflated), and returns the sitemap.
    One of 50 MB and 50,000 URLs takes seconds (11 s, a QA's, on a 2-core machine)."""
    source = _Source(body, max_bytes)
    chunks = iter(source)
    first = next(chunks, b"")
    if not (first.lstrip(_XML_LEAD).startswith(b"<") or first.startswith(_UTF16_BOMS)):
        text = itertools.chain([first.removeprefix(b"\xef\xbb\xbf")], chunks)
        return (yield from _read_text(text, source, max_urls, truncated))
    sitemap = yield from _read_xml(itertools.chain([first], chunks), source, max_urls, truncated)
    utf16 = first.startswith(_UTF16_BOMS)  # an "&" is no byte of its own there
    if sitemap.error is not None and "EntityRef" in sitemap.error and not utf16:
        # A bare "&" (sites write URLs' "&" so): the parser stopped there, and the
        # rest of the file was lost. Read again, each written "&amp;".
        again = _Source(body, max_bytes)
        sitemap = yield from _read_xml(bare_amps_escaped(iter(again)), again, max_urls, truncated)
    return sitemap


def _read_xml(
    chunks: Iterator[bytes], source: _Source, max_urls: int, truncated: bool
) -> Steps[Sitemap]:
    target = _Target(max_urls)
    parser = etree.XMLParser(
        target=target, resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False
    )
    try:
        return (yield from _fed(parser, target, chunks, source, truncated))
    finally:
        # A parser with a Python target is in a reference cycle of lxml's own that
        # only the garbage collector frees (rarely, in a peer: collector.py), and what
        # libxml2 had buffered stayed with it: all of a 50 MB comment cut at the limit
        # (QA: 40 hosts' gzip bombs held 1.2-2 GB). A close lets it go; what it reads
        # of the buffer comes after the sitemap is made (a second close, or that of a
        # document cut short, raises: nothing to say).
        with contextlib.suppress(Exception):
            parser.close()


def _fed(
    parser: etree.XMLParser,
    target: _Target,
    chunks: Iterator[bytes],
    source: _Source,
    truncated: bool,
) -> Steps[Sitemap]:
    """The sitemap ``parser`` reads into ``target`` from ``chunks``, a step a chunk."""
    error: str | None = None
    cut = truncated
    try:
        for chunk in chunks:
            parser.feed(chunk)
            yield
        # A document cut short has no end to check.
        if not (source.cut or source.short or source.error or truncated):
            parser.close()
    except _TooMany:
        cut = True
    except _NotASitemap as exc:
        error = str(exc)
    except etree.LxmlError as exc:
        error = f"malformed XML: {exc}"[:300]
    if source.short and not truncated:
        # A cut body's gzip stream ends early, as expected; a whole one's should not.
        error = error or "bad gzip: the stream ends early"
    return Sitemap(
        target.kind,
        tuple(target.entries),
        over_limit=target.over_limit,
        cut=cut or source.cut,
        error=source.error or error,
    )


# What may come before a document's first "<": white space, a UTF-8 byte order mark.
_XML_LEAD = b" \t\r\n\xef\xbb\xbf"
# A document in UTF-16 begins with its byte order mark (the parser reads it).
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
# A text sitemap's line that is a URL.
_URL_LINE = re.compile(rb"https?://\S+", re.IGNORECASE)


def _read_text(
    chunks: Iterator[bytes], source: _Source, max_urls: int, truncated: bool
) -> Steps[Sitemap]:
    """A text sitemap: a URL a line, in UTF-8 (sitemaps.org), a step a chunk."""
    entries: list[Listed] = []
    over = 0
    rest = b""
    skipping = False  # through the rest of a line too long to be a URL
    whole = False
    while not whole:
        chunk = next(chunks, None)
        if chunk is None:  # the last line, unless the body was cut inside it
            whole = True
            lines = [rest] if not (truncated or source.cut or source.short) else []
        else:
            if skipping:
                end = chunk.find(b"\n")
                skipping, chunk = end < 0, chunk[end + 1 :] if end >= 0 else b""
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            if len(rest) > _MAX_TEXT:
                # No URL is that long: the line is skipped to its end, not read from
                # the next chunk on as a line of its own.
                rest, skipping = b"", True
        for line in lines:
            line = line.strip()
            if len(line) > _MAX_TEXT or _URL_LINE.fullmatch(line) is None:
                continue
            if len(entries) < max_urls:
                entries.append(Listed(line.decode("utf-8", "replace")))
            else:
                over += 1
        yield
    if not entries and not over:
        return Sitemap(None, (), error=source.error or "not a sitemap: neither XML nor URL lines")
    return Sitemap(
        SitemapKind.URLSET,
        tuple(entries),
        over_limit=over,
        cut=truncated or source.cut,
        error=source.error,
    )


class _Source:
    """The body's bytes, inflated if gzipped, in chunks, up to ``limit``: ``cut`` once
    there was more, ``short`` if a gzip stream ended before its end, ``error`` if it
    was not gzip after all."""

    def __init__(self, body: bytes, limit: int) -> None:
        self._body = body
        self._limit = limit
        self.cut = False
        self.short = False
        self.error: str | None = None

    def __iter__(self) -> Iterator[bytes]:
        chunks = self._gunzip() if self._body[:2] == _GZIP_MAGIC else self._plain()
        left = self._limit
        for chunk in chunks:
            if len(chunk) > left:
                if left:
                    yield chunk[:left]
                self.cut = True
                return
            left -= len(chunk)
            yield chunk

    def _plain(self) -> Iterator[bytes]:
        body = self._body
        for start in range(0, len(body), _CHUNK):
            yield body[start : start + _CHUNK]

    def _gunzip(self) -> Iterator[bytes]:
        body = self._body
        view = memoryview(body)
        start = 0
        members = 0
        # A gzip file may hold several members, one after another.
        while body.startswith(_GZIP_MAGIC, start):
            members += 1
            if members > _MAX_MEMBERS:
                self.cut = True
                return
            inflate = zlib.decompressobj(wbits=31)
            # The member is fed in slices, small ones first: the inflater copies what
            # follows a member's end into unused_data, so the whole rest of the body
            # made each of many small members cost the body's size (quadratic, and a
            # frozen trio loop); a slice bounds the copy by the member's own size.
            end = start
            size = _FIRST_SLICE
            try:
                while end < len(body) and not inflate.eof:
                    pending: bytes | memoryview = view[end : end + size]
                    end += len(pending)
                    size = min(2 * size, _CHUNK)
                    while pending and not inflate.eof:
                        chunk = inflate.decompress(pending, _CHUNK)
                        pending = inflate.unconsumed_tail
                        if chunk:
                            yield chunk
                # The member's last bytes may still be in the inflater's window.
                while not inflate.eof and (chunk := inflate.decompress(b"", _CHUNK)):
                    yield chunk
            except zlib.error as exc:
                self.error = f"bad gzip: {exc}"
                return
            if not inflate.eof:
                self.short = True
                return
            start = end - len(inflate.unused_data)


class _TooMany(Exception):
    """More elements than any sitemap of SITEMAP_MAX_URLS entries needs."""


class _NotASitemap(Exception):
    """The root element is not a sitemap's."""


class _Target:
    """What the parser has read so far. It is the parser's target: no tree is built,
    so memory holds the entries alone, whatever the document."""

    def __init__(self, max_urls: int) -> None:
        self._max_urls = max_urls
        # Elements allowed (each costs a Python call): the entries, their children, and
        # the extensions' (images, news) with room to spare.
        self._elements_left = _ELEMENTS_PER_URL * max(max_urls, 1)
        self._depth = 0
        self._entry: str | None = None  # the entry element's name, once the root is known
        self._entry_depth = 2
        self._fields: dict[str, str] = {}
        self._in_entry = False
        self._field: str | None = None  # "loc" or "lastmod", while inside one
        self._text: list[str] = []
        self._text_size = 0
        self._values: dict[str, str] = {}
        self.kind: SitemapKind | None = None
        self.entries: list[Listed] = []
        self.over_limit = 0

    def start(self, tag: str, attrib: object, nsmap: object = None) -> None:
        self._elements_left -= 1
        if self._elements_left < 0:
            raise _TooMany
        depth = self._depth = self._depth + 1
        if depth == self._entry_depth + 1:
            if self._in_entry:
                name = _local(tag)
                self._field = self._fields.get(name)
                self._text = []
                self._text_size = 0
                if name == "link" and self.kind is SitemapKind.ATOM:
                    self._atom_link(attrib)
        elif depth == self._entry_depth:
            self._in_entry = _local(tag) == self._entry
            self._values = {}
        elif depth == 1:
            name = _local(tag)
            self.kind = next((k for k in SitemapKind if k.value == name), None)
            if self.kind is None:
                raise _NotASitemap(f"not a sitemap: the root element is <{name[:50]}>")
            self._entry, self._entry_depth = _ENTRY[self.kind]
            self._fields = _FIELDS[self.kind]

    def _atom_link(self, attrib: object) -> None:
        """An Atom entry's page: its first link to an alternate (a link's default rel),
        not one to its comments' feed or an enclosure."""
        get = getattr(attrib, "get", None)
        if get is None or "loc" in self._values or get("rel", "alternate") != "alternate":
            return
        href = get("href")
        if isinstance(href, str) and len(href) <= _MAX_TEXT:
            self._values["loc"] = href.strip()

    def data(self, text: str) -> None:
        if self._field is not None:
            self._text_size += len(text)
            if self._text_size <= _MAX_TEXT:
                self._text.append(text)

    def end(self, tag: str) -> None:
        depth = self._depth
        self._depth = depth - 1
        if depth == self._entry_depth + 1:
            field = self._field
            if field is not None:
                self._field = None
                value = "".join(self._text).strip()
                # Longer: no URL or date anyway. The first of its name counts (an RSS
                # item's <link> before an <atom:link> of its own, say).
                if value and self._text_size <= _MAX_TEXT:
                    self._values.setdefault(field, value)
        elif depth == self._entry_depth and self._in_entry:
            self._in_entry = False
            loc = self._values.get("loc")
            if not loc:
                return
            if len(self.entries) >= self._max_urls:
                self.over_limit += 1
                return
            lastmod = self._values.get("lastmod")
            if self.kind is SitemapKind.RSS and lastmod is not None:
                lastmod = _rfc822(lastmod)
            self.entries.append(Listed(loc, _lastmod(lastmod)))

    def close(self) -> None:
        pass


def _local(tag: str) -> str:
    return tag.rpartition("}")[2]


def _rfc822(text: str) -> str | None:
    """An RSS pubDate ("Sat, 07 Sep 2002 09:42:31 GMT") as a W3C datetime."""
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": a time in UTC, with nothing said of the place
        when = when.replace(tzinfo=datetime.UTC)
    return when.isoformat()


def _lastmod(text: str | None) -> str | None:
    if text and len(text) <= 40 and parse_w3c(text) is not None:
        return text
    return None
