"""HTML parsing: title, outgoing links and robots meta, via lxml.

One parse per page, read as libxml2's events rather than a tree (see
:class:`_Extract`); the hrefs are gathered first and resolved afterwards, because
`<base href>` and `<meta name=robots>` govern links that may precede them in the
document.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import lxml.etree
import xxhash

from ubipy.fetch.encoding import (
    EncodingSource,
    Sniffed,
    ascii_compatible,
    decode,
    sniff,
)
from ubipy.fetch.labels import query_codec
from ubipy.fetch.legacyquery import query_in
from ubipy.fetch.robots import PRODUCT_TOKEN
from ubipy.fetch.urls import BadURL, host_key, normalize, resolve_link
from ubipy.steps import Steps, finished

__all__ = [
    "MAX_LINKS",
    "MAX_TITLE_LENGTH",
    "ParsedPage",
    "content_digest",
    "header_directives",
    "parse_html",
    "parse_html_steps",
]

MAX_TITLE_LENGTH: Final = 1000
#: Links followed from one page at most (a hostile page has millions; Heritrix keeps 6,000).
MAX_LINKS: Final = 10_000
# Hrefs resolved in one step of a page parsed in steps (about 10 ms of the loop).
_RESOLVED_A_STEP: Final = 1_000

# The meta name whose content is read as robots directives beside the one addressed
# to this crawler by its product token (robots.robots_token).
_ROBOTS_META: Final = "robots"
# X-Robots-Tag directives written "name: value", not for an agent.
_VALUED_DIRECTIVES: Final = frozenset(
    {"unavailable_after", "max-snippet", "max-image-preview", "max-video-preview"}
)
# The elements a parse looks at: a link's attribute, or "" for the others. libxml2
# starts every document it finds anything in with <html>.
_LOOKED_AT: Final = {
    **{"a": "href", "area": "href", "frame": "src", "iframe": "src"},
    **dict.fromkeys(("base", "meta", "title", "html", "svg", "link"), ""),
}
# The <link> relations that lead to other pages of the site: the next and previous
# pages of a series (pagination often has no <a> beside it) and the page in another
# language or for another medium (hreflang alternates, often listed nowhere else).
# An alternate that is a style sheet or an icon is none.
_PAGE_RELS: Final = frozenset({"next", "prev", "previous", "alternate"})
_NOT_PAGE_RELS: Final = frozenset({"stylesheet", "icon"})


# A refresh's content (WHATWG, "shared declarative refresh steps"): a time, then
# maybe ";" or ",", maybe "url=", and the URL, quoted or not.
# HTML's declarative refresh steps: the time, then ";", "," or white space, or nothing
# more (browsers follow no "5abc", "0url=/x" or "0x; url=/y").
_REFRESH = re.compile(
    r"[\t\n\f\r ]*(?:[0-9]+(?:\.[0-9.]*)?|\.[0-9.]*)(?=[;,\t\n\f\r ]|\Z)"
    r"[\t\n\f\r ]*(?:[;,][\t\n\f\r ]*)?"
    r"(?:url[\t\n\f\r ]*=[\t\n\f\r ]*)?(.*)",
    re.IGNORECASE | re.DOTALL,
)


def refresh_target(content: str) -> str | None:
    """Where a ``<meta http-equiv="refresh" content=...>`` sends the browser (None:
    nowhere, or the page itself again)."""
    match = _REFRESH.match(content)
    if match is None:
        return None
    rest = match.group(1)
    if rest[:1] in ("'", '"'):
        end = rest.find(rest[0], 1)
        rest = rest[1:] if end < 0 else rest[1:end]
    return rest.strip() or None


@dataclass(frozen=True, slots=True)
class ParsedPage:
    title: str | None
    # Normalised absolute http(s) URLs, deduplicated, in first-seen order.
    links: tuple[str, ...]
    nofollow: bool
    noindex: bool
    # hrefs that failed normalisation (bad syntax, mailto:, javascript:, ...).
    links_refused: int
    # Links skipped for nofollow: rel="nofollow", or all of them under a
    # meta robots nofollow.
    links_nofollow: int
    # Distinct hrefs whose userinfo (``user:pass@``) was stripped.
    links_stripped: int = 0
    # The encoding the page was read in (WHATWG name: utf-8, gbk, shift_jis, ...) and
    # what decided it; None for an empty body.
    encoding: str | None = None
    encoding_source: EncodingSource | None = None
    # The host key of each link, in the same order (found as each link was resolved).
    hosts: tuple[str, ...] = ()
    # hrefs past the page's cap (MAX_LINKS links), not followed.
    links_cut: int = 0


_EMPTY = ParsedPage(
    title=None, links=(), nofollow=False, noindex=False, links_refused=0, links_nofollow=0
)


class _AnyTag(dict[str, str]):
    """Any element at all: the first to start after a title ends it (a title holds
    text only)."""

    def get(self, tag: str, default: object = None) -> str:
        return _TITLE_ENDS


_XML_DECLARATION: Final = re.compile(r"\A\s*<\?xml[^>]*>")
_TITLE_ENDS: Final = "\0title ends"
_ANY_TAG: Final = _AnyTag()

# SVG's elements as libxml2's HTML parser names them (lower case). Inside an inline
# <svg>, a <title> is the drawing's tooltip, not the page's (WHATWG: the document's
# title is its first title element in the HTML namespace); an <a> is still a link.
_SVG_ELEMENTS: Final = frozenset(
    """a animate animatemotion animatetransform circle clippath defs desc discard ellipse
    feblend fecolormatrix fecomponenttransfer fecomposite feconvolvematrix
    fediffuselighting fedisplacementmap fedistantlight fedropshadow feflood fefunca
    fefuncb fefuncg fefuncr fegaussianblur feimage femerge femergenode femorphology
    feoffset fepointlight fespecularlighting fespotlight fetile feturbulence filter
    foreignobject g image line lineargradient marker mask metadata mpath path pattern
    polygon polyline radialgradient rect script set stop style svg switch symbol text
    textpath title tspan use view""".split()  # noqa: SIM905 (a list of 64 words)
)
_SVG_ENDS: Final = "\0svg ends"
# An SVG link's attribute: href, or (SVG 1.1, still common) xlink:href.
_SVG_HREF: Final = "\0svg href"


class _InSvg(dict[str, str]):
    """Inside an inline <svg>: its elements are passed over (links but for), and the
    first element SVG does not have means the drawing has ended (the parse gives no
    element ends: a <title> right after the drawing, no other element between, is
    taken for the drawing's)."""

    def get(self, tag: str, default: object = None) -> str | None:  # type: ignore[override]
        if tag in _SVG_ELEMENTS:
            return _SVG_HREF if tag == "a" else None
        return _SVG_ENDS


_IN_SVG: Final = _InSvg()


class _Extract:
    """What one parse finds, as libxml2 reads the page (lxml's parser target
    interface): events, not a tree. A tree costs libxml2 time quadratic in the
    attributes of one element (each is appended at the end of the element's list): a
    0.9 MB page of one tag with 100,000 distinct attributes held the crawl's loop for
    10.8 s, a 1.9 MB one for a minute. The events come in linear time, and no tree of
    the page is built only to be walked once.

    Only elements' starts reach Python: the text goes to a list's ``append`` (no
    Python frame a piece of text), and the first title is the text between its start
    and the next element's. The list is emptied once the title is taken and after
    each parse: a page of 10 MB in tiny text nodes holds 100 MB of them while it is
    read (about what libxml2's tree of it took before), none after."""

    __slots__ = (
        "_agent",
        "_look",
        "_text",
        "_title_from",
        "_title_seen",
        "base_href",
        "data",
        "empty",
        "hrefs",
        "links_nofollow",
        "nofollow",
        "noindex",
        "title",
    )

    def __init__(self) -> None:
        self._text: list[str] = []
        self.data = self._text.append
        self.reset(PRODUCT_TOKEN)

    def reset(self, agent: str) -> None:
        """Ready for a document; ``agent``: the product token meta robots may name."""
        self._agent = agent
        self.empty = True
        self.hrefs: list[str] = []
        self.base_href: str | None = None
        self.nofollow = self.noindex = False
        self.links_nofollow = 0
        self.release()
        self._look: dict[str, str] = _LOOKED_AT
        self.title: str | None = None
        self._title_seen = False
        # Where the first title's text begins in the buffer, while it is open.
        self._title_from: int | None = None

    def release(self) -> None:
        """Let go of the text read so far."""
        self._text.clear()

    def _take_title(self) -> None:
        assert self._title_from is not None
        text = " ".join("".join(self._text[self._title_from :]).split())
        self.title = text[:MAX_TITLE_LENGTH] if text else None
        self._title_from = None
        self.release()  # what came before the title's end is of no more use

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        attribute = self._look.get(tag)
        if attribute is _TITLE_ENDS or attribute is _SVG_ENDS:
            if attribute is _TITLE_ENDS:
                self._take_title()
            self._look = _LOOKED_AT
            attribute = _LOOKED_AT.get(tag)
        if attribute is None:
            return
        if attribute:
            if attribute is _SVG_HREF:
                attribute = "href"
                href = attrib.get("href") or attrib.get("xlink:href")
            else:
                href = attrib.get(attribute)
            if href is None:
                return
            if attribute == "href":
                rel = attrib.get("rel")
                if rel and "nofollow" in rel.lower().split():
                    self.links_nofollow += 1
                    return
            self.hrefs.append(href)
        elif tag == "meta":
            equiv = attrib.get("http-equiv")
            if equiv and equiv.strip().lower() == "refresh":
                target = refresh_target(attrib.get("content") or "")
                if target:
                    self.hrefs.append(target)  # a link like any other (base, nofollow)
                return
            name = attrib.get("name")
            if name and name.strip().lower() in (_ROBOTS_META, self._agent):
                directives = _meta_directives(attrib.get("content") or "")
                if "none" in directives:
                    self.nofollow = self.noindex = True
                else:
                    self.nofollow = self.nofollow or "nofollow" in directives
                    self.noindex = self.noindex or "noindex" in directives
        elif tag == "title":
            if not self._title_seen:  # the first title only
                self._title_seen = True
                self._title_from = len(self._text)
                self._look = _ANY_TAG
        elif tag == "base":
            if self.base_href is None:
                self.base_href = attrib.get("href")
        elif tag == "svg":
            self._look = _IN_SVG
        elif tag == "link":
            self._link(attrib)
        else:
            self.empty = False  # <html>

    def _link(self, attrib: dict[str, str]) -> None:
        rel, href = attrib.get("rel"), attrib.get("href")
        if not rel or href is None:
            return
        kinds = set(rel.lower().split())
        if kinds.isdisjoint(_PAGE_RELS) or not kinds.isdisjoint(_NOT_PAGE_RELS):
            return
        if "nofollow" in kinds:
            self.links_nofollow += 1
        else:
            self.hrefs.append(href)

    def close(self) -> _Extract:
        if self._title_from is not None:  # the title ran to the end of the page
            self._take_title()
        return self


# A page parsed in steps is fed this much at a time (about 25 ms of nested tags).
_FEED = 256 * 1024

# lxml parsers must not be shared between threads, and callers may parse in
# worker threads; parsers are cheap but not free, so each thread keeps its own,
# with the target it hands its events to.
_local = threading.local()


def _parser(encoding: str | None) -> tuple[Any, _Extract]:
    cache: dict[str | None, tuple[Any, _Extract]] | None = getattr(_local, "parsers", None)
    if cache is None:
        cache = _local.parsers = {}
    made = cache.get(encoding)
    if made is None:
        made = cache[encoding] = _new_parser(encoding)
    return made


def _new_parser(encoding: str | None) -> tuple[Any, _Extract]:
    target = _Extract()
    parser = lxml.etree.HTMLParser(
        encoding=encoding,
        target=target,
        no_network=True,
        # Without it libxml2 stops at 256 levels of nesting (sloppy pages reach
        # that with unclosed tags) and at 10 MB text nodes, and every link past
        # that point is lost without a trace; with it, 2048 levels. Bodies are
        # capped by max_body_bytes, and HTML has no entities to expand.
        huge_tree=True,
    )
    return parser, target


def _extract(
    body: bytes, header_charset: str | None, url: str, agent: str
) -> tuple[_Extract, Sniffed]:
    """What the document holds, and the encoding it was read in (see :func:`_document`)."""
    document, sniffed, key = _document(body, header_charset, url)
    parser, target = _parser(key)
    target.reset(agent)
    try:
        lxml.etree.fromstring(document, parser)
    finally:
        target.release()
    return target, sniffed


def _extract_steps(
    body: bytes, header_charset: str | None, url: str, agent: str
) -> Steps[tuple[_Extract, Sniffed]]:
    """:func:`_extract` in steps, a slice of the document fed at a time to a parser of
    its own (the thread's is for whole documents, read between two of these steps)."""
    document, sniffed, key = _document(body, header_charset, url)
    parser, target = _new_parser(key)
    target.reset(agent)
    try:
        for at in range(0, len(document), _FEED):
            parser.feed(document[at : at + _FEED])
            yield
        parser.close()
    finally:
        target.release()
        with contextlib.suppress(Exception):  # what libxml2 holds, let go now
            parser.close()
    return target, sniffed


def _document(
    body: bytes, header_charset: str | None, url: str
) -> tuple[bytes | str, Sniffed, str | None]:
    """The document to parse, the encoding it is read in (``url``'s top-level domain
    may settle what its bytes leave open), and the parser's encoding.

    UTF-8 (and ASCII-only bytes in any ASCII-compatible encoding, which read the
    same) goes to libxml2 as bytes, the fast way. Anything else is decoded here:
    libxml2's own converters stop at the first invalid byte and drop the rest of the
    page, where a browser (and Python's codecs, with "replace") reads on.
    """
    try:
        host: str | None = host_key(url)
    except BadURL:
        host = None  # not an http(s) URL: no domain to ask
    sniffed = sniff(body, header_charset, host=host)
    name = sniffed.name
    document: bytes | str
    if name == "utf-8" or (ascii_compatible(name) and body.isascii()):
        document = body[3:] if sniffed.source is EncodingSource.BOM else body
        # A NUL is a character HTML ignores (WHATWG's tree builder drops it), and
        # libxml2 reports each one alone: a page of 10 MB of them (UTF-16 without
        # its BOM, a binary file served as HTML) held the loop for 1.7 s and took
        # 900 MB while it was read (QA). No encoding read here has a NUL byte within
        # a character.
        if b"\0" in document:
            document = document.replace(b"\0", b"")
        return document, sniffed, "utf-8"
    # A str carries its own encoding: libxml2 ignores the document's declarations,
    # but lxml refuses a str that opens with an XML declaration (XHTML pages do, in
    # Shift_JIS, GBK, ISO-8859-1...), and such a page came out empty: it goes.
    document = decode(body, sniffed)
    if "\0" in document:
        document = document.replace("\0", "")
    if document.lstrip().startswith("<?xml"):
        document = _XML_DECLARATION.sub("", document, count=1)
    return document, sniffed, None


def _resolve_base(base_href: str, url: str) -> str:
    try:
        return normalize(base_href, url)
    except BadURL:
        return url  # browsers ignore an unusable <base href>; so do we


def _meta_directives(content: str) -> set[str]:
    # Commas are the standard separator, but spaces are common in the wild.
    return set(content.lower().replace(",", " ").split())


# The robots directives that say each ("none" is both).
_NOFOLLOW: Final = frozenset({"nofollow", "none"})
_NOINDEX: Final = frozenset({"noindex", "none"})


def refresh_link(refresh: str, robots_headers: Sequence[str], agent: str) -> str | None:
    """Where an answer's Refresh header sends a browser (as a meta refresh: browsers
    follow both, whatever the body, often none), unless its X-Robots-Tag says nofollow."""
    if header_directives(robots_headers, agent) & _NOFOLLOW:
        return None
    return refresh_target(refresh)


def header_noindex(robots_headers: Sequence[str], agent: str) -> bool:
    """Whether an answer's X-Robots-Tag headers say noindex to the crawler ``agent``
    (for an answer that is not HTML: a PDF's, an image's)."""
    return bool(header_directives(robots_headers, agent) & _NOINDEX)


def header_directives(values: Sequence[str], agent: str) -> set[str]:
    """The robots directives of X-Robots-Tag headers for the crawler ``agent``: those
    for every crawler, and those after ``agent:`` ("otherbot: noindex" is another's;
    "unavailable_after: ..." is a directive, not an agent)."""
    directives: set[str] = set()
    for value in values:
        name, colon, rest = value.partition(":")
        name = name.strip().lower()
        if colon and name not in _VALUED_DIRECTIVES and " " not in name and "," not in name:
            if name == agent:
                directives |= _meta_directives(rest)
            continue
        directives |= _meta_directives(value)
    return directives


def parse_html(
    body: bytes,
    url: str,
    *,
    encoding: str | None = None,
    max_links: int = MAX_LINKS,
    agent: str = PRODUCT_TOKEN,
    robots_headers: Sequence[str] = (),
) -> ParsedPage:
    """Parse an HTML page fetched from `url` (a normalised URL). Never raises.

    `encoding` is the charset from the Content-Type header, if any; it takes
    precedence over the document's own declaration, as in browsers (the whole order
    is in ubipy.fetch.encoding). The result says which encoding was used, and why.
    `agent`: the crawler's robots product token (meta robots may name it);
    `robots_headers`: the answer's X-Robots-Tag values, read as a meta robots is.
    """
    if not body:
        return _EMPTY
    try:
        found, sniffed = _extract(body, encoding, url, agent)
    except (lxml.etree.LxmlError, ValueError):
        return _EMPTY
    return finished(_page_steps(found, sniffed, url, max_links, agent, robots_headers))


def parse_html_steps(
    body: bytes,
    url: str,
    *,
    encoding: str | None = None,
    max_links: int = MAX_LINKS,
    agent: str = PRODUCT_TOKEN,
    robots_headers: Sequence[str] = (),
) -> Steps[ParsedPage]:
    """:func:`parse_html` in steps (:mod:`ubipy.steps`), a slice of the document at a
    time: a 10 MiB page of nested tags takes a second to parse (QA)."""
    if not body:
        return _EMPTY
    try:
        found, sniffed = yield from _extract_steps(body, encoding, url, agent)
    except (lxml.etree.LxmlError, ValueError):
        return _EMPTY
    return (yield from _page_steps(found, sniffed, url, max_links, agent, robots_headers))


def _page_steps(
    found: _Extract,
    sniffed: Sniffed,
    url: str,
    max_links: int,
    agent: str,
    robots_headers: Sequence[str],
) -> Steps[ParsedPage]:
    """The page a parse found: its title, its links resolved (to ``max_links``), a
    step every ``_RESOLVED_A_STEP`` hrefs (20,000 took 100-230 ms, a review)..."""
    if found.empty:
        return _EMPTY
    title, base_href, hrefs = found.title, found.base_href, found.hrefs
    nofollow, noindex, links_nofollow = found.nofollow, found.noindex, found.links_nofollow
    if robots_headers:
        said = header_directives(robots_headers, agent)
        nofollow = nofollow or bool(said & _NOFOLLOW)
        noindex = noindex or bool(said & _NOINDEX)

    if nofollow:
        return ParsedPage(
            title=title,
            links=(),
            nofollow=True,
            noindex=noindex,
            links_refused=0,
            links_nofollow=links_nofollow + len(hrefs),
            encoding=sniffed.name,
            encoding_source=sniffed.source,
        )

    base = url if base_href is None else _resolve_base(base_href, url)
    legacy = query_codec(sniffed.name)
    links: dict[str, str] = {}  # link -> its host key
    # Pages repeat hrefs (navigation, pagination), and resolution costs a
    # parse each; raw → result (None when refused) skips the repeats.
    resolved: dict[str, tuple[str, str] | None] = {}
    refused = stripped = cut = 0
    # A step a slice of hrefs (a modulo an href cost the usual page a microsecond).
    for start in range(0, len(hrefs), _RESOLVED_A_STEP):
        if start:
            yield
        for href in hrefs[start : start + _RESOLVED_A_STEP]:
            if href in resolved:
                link = resolved[href]
            else:
                if len(links) >= max_links or len(resolved) >= 2 * max_links:
                    # Over the cap: not worth resolving. Nor past twice as many tried: a
                    # page of 300,000 distinct hrefs refused (mailto:, bad hosts) kept
                    # none, and resolved them all, seconds of the peer's loop (a review).
                    cut += 1
                    continue
                try:
                    written = href if legacy is None or href.isascii() else query_in(href, legacy)
                    absolute, host, had_userinfo = resolve_link(written, base)
                    link = absolute, host
                    stripped += had_userinfo
                except BadURL:
                    link = None
                resolved[href] = link
            if link is None:
                refused += 1
            elif link[0] not in links:
                if len(links) >= max_links:
                    cut += 1
                else:
                    links[link[0]] = link[1]

    return ParsedPage(
        title=title,
        links=tuple(links),
        hosts=tuple(links.values()),
        nofollow=False,
        noindex=noindex,
        links_refused=refused,
        links_nofollow=links_nofollow,
        links_stripped=stripped,
        encoding=sniffed.name,
        encoding_source=sniffed.source,
        links_cut=cut,
    )


def content_digest(body: bytes) -> str:
    """xxh3-128 hex digest of the body, for spotting duplicate content."""
    return xxhash.xxh3_128_hexdigest(body)
