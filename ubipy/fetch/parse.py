"""HTML parsing: title, outgoing links and robots meta, via lxml.

One parse and one walk over the interesting elements per page; the hrefs are
gathered first and resolved afterwards, because `<base href>` and
`<meta name=robots>` govern links that may precede them in the document.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Final

import lxml.etree
import xxhash

from ubipy.fetch.urls import BadURL, normalize, normalize_reporting

__all__ = ["MAX_TITLE_LENGTH", "ParsedPage", "content_digest", "parse_html"]

MAX_TITLE_LENGTH: Final = 1000

# Meta names whose content is read as robots directives: the generic one and
# the one addressed to us by product token.
_ROBOTS_META_NAMES: Final = frozenset({"robots", "ubipy"})
_LINK_ATTRIBUTE: Final = {"a": "href", "area": "href", "frame": "src", "iframe": "src"}
_TAGS: Final = ("a", "area", "frame", "iframe", "base", "meta", "title")

# Only consulted for non-ASCII pages with no charset from the caller: does the
# page declare one itself (which libxml2 then honours)?
_META_CHARSET = re.compile(rb"<meta[^>]{0,512}?charset", re.IGNORECASE)
_SNIFF_BYTES: Final = 64 * 1024
_BOMS: Final = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
# The WHATWG Encoding standard reads these labels as windows-1252, as every
# browser does; libxml2 would map bytes 0x80-0x9F to C1 controls instead.
_WHATWG_LABELS: Final = dict.fromkeys(
    ("iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1", "us-ascii", "ascii", "cp1252"),
    "windows-1252",
)


@dataclass(frozen=True, slots=True)
class ParsedPage:
    title: str | None
    # Normalised absolute http(s) URLs, deduplicated, in first-seen order.
    links: tuple[str, ...]
    nofollow: bool
    noindex: bool
    # hrefs that failed normalisation (bad syntax, mailto:, javascript:, ...)
    # plus those beyond the per-page cap.
    links_refused: int
    # Links skipped for nofollow: rel="nofollow", or all of them under a
    # meta robots nofollow.
    links_nofollow: int
    # Distinct hrefs whose userinfo (``user:pass@``) was stripped.
    links_stripped: int = 0


_EMPTY = ParsedPage(
    title=None, links=(), nofollow=False, noindex=False, links_refused=0, links_nofollow=0
)

# lxml parsers must not be shared between threads, and callers may parse in
# worker threads; parsers are cheap but not free, so each thread keeps its own.
_local = threading.local()


def _parser(encoding: str | None) -> Any:
    cache: dict[str | None, Any] | None = getattr(_local, "parsers", None)
    if cache is None:
        cache = _local.parsers = {}
    parser = cache.get(encoding)
    if parser is None:
        parser = lxml.etree.HTMLParser(
            encoding=encoding,
            remove_comments=True,
            remove_pis=True,
            collect_ids=False,
            no_network=True,
            # Without it libxml2 stops at 256 levels of nesting (sloppy pages reach
            # that with unclosed tags) and at 10 MB text nodes, and every link past
            # that point is lost without a trace; with it, 2048 levels. Bodies are
            # capped by max_body_bytes, and HTML has no entities to expand.
            huge_tree=True,
        )
        cache[encoding] = parser
    return parser


def _sniff_encoding(body: bytes) -> str | None:
    """The encoding to force on libxml2, or None to let it decide.

    libxml2 reads an unlabelled page as Latin-1, which turns every non-ASCII
    UTF-8 title and href into mojibake; most of today's unlabelled pages are
    UTF-8. So: ASCII, a BOM or a <meta charset> → libxml2 decides correctly;
    otherwise UTF-8 if the bytes are valid UTF-8, else windows-1252 (what
    browsers assume for unlabelled legacy pages).
    """
    if body.isascii() or body.startswith(_BOMS) or _META_CHARSET.search(body, 0, _SNIFF_BYTES):
        return None
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return "windows-1252"
    return "utf-8"


def _parse_tree(body: bytes, encoding: str | None) -> Any:
    if encoding is None:
        encoding = _sniff_encoding(body)
    else:
        encoding = encoding.strip().lower()
        encoding = _WHATWG_LABELS.get(encoding, encoding)
    try:
        parser = _parser(encoding)
    except LookupError:
        # A charset libxml2 does not know (from a Content-Type header, so
        # attacker-chosen): fall back to what the bytes say.
        parser = _parser(_sniff_encoding(body))
    return lxml.etree.fromstring(body, parser)


def _first_title(element: Any) -> str | None:
    text = " ".join("".join(element.itertext()).split())
    return text[:MAX_TITLE_LENGTH] if text else None


def _resolve_base(base_href: str, url: str) -> str:
    try:
        return normalize(base_href, url)
    except BadURL:
        return url  # browsers ignore an unusable <base href>; so do we


def _meta_directives(content: str) -> set[str]:
    # Commas are the standard separator, but spaces are common in the wild.
    return set(content.lower().replace(",", " ").split())


def parse_html(
    body: bytes, url: str, *, encoding: str | None = None, max_links: int = 10_000
) -> ParsedPage:
    """Parse an HTML page fetched from `url` (a normalised URL). Never raises.

    `encoding` is the charset from the Content-Type header, if any; it takes
    precedence over the document's own declaration, as in browsers.
    """
    if not body:
        return _EMPTY
    try:
        root = _parse_tree(body, encoding)
    except (lxml.etree.LxmlError, ValueError):
        return _EMPTY
    if root is None:
        return _EMPTY

    title: str | None = None
    title_seen = False
    base_href: str | None = None
    nofollow = noindex = False
    links_nofollow = 0
    hrefs: list[str] = []

    try:
        for element in root.iter(*_TAGS):
            tag = element.tag
            attribute = _LINK_ATTRIBUTE.get(tag)
            if attribute is not None:
                href = element.get(attribute)
                if href is None:
                    continue
                if attribute == "href":
                    rel = element.get("rel")
                    if rel and "nofollow" in rel.lower().split():
                        links_nofollow += 1
                        continue
                hrefs.append(href)
            elif tag == "meta":
                name = element.get("name")
                if name and name.strip().lower() in _ROBOTS_META_NAMES:
                    directives = _meta_directives(element.get("content") or "")
                    if "none" in directives:
                        nofollow = noindex = True
                    else:
                        nofollow = nofollow or "nofollow" in directives
                        noindex = noindex or "noindex" in directives
            elif tag == "title":
                if not title_seen:
                    title_seen = True
                    title = _first_title(element)
            elif base_href is None:  # tag == "base"
                base_href = element.get("href")
    except (lxml.etree.LxmlError, ValueError):
        # Defensive: a tree lxml built should always be walkable, but this
        # function's contract is to never raise on web input.
        return _EMPTY

    if nofollow:
        return ParsedPage(
            title=title,
            links=(),
            nofollow=True,
            noindex=noindex,
            links_refused=0,
            links_nofollow=links_nofollow + len(hrefs),
        )

    base = url if base_href is None else _resolve_base(base_href, url)
    links: dict[str, None] = {}
    # Pages repeat hrefs (navigation, pagination), and resolution costs a
    # parse each; raw → result (None when refused) skips the repeats.
    resolved: dict[str, str | None] = {}
    refused = stripped = 0
    for href in hrefs:
        if href in resolved:
            link = resolved[href]
        else:
            if len(links) >= max_links:
                refused += 1  # over the cap: not worth resolving
                continue
            try:
                link, had_userinfo = normalize_reporting(href, base)
                stripped += had_userinfo
            except BadURL:
                link = None
            resolved[href] = link
        if link is None:
            refused += 1
        elif link not in links:
            if len(links) >= max_links:
                refused += 1
            else:
                links[link] = None

    return ParsedPage(
        title=title,
        links=tuple(links),
        nofollow=False,
        noindex=noindex,
        links_refused=refused,
        links_nofollow=links_nofollow,
        links_stripped=stripped,
    )


def content_digest(body: bytes) -> str:
    """xxh3-128 hex digest of the body, for spotting duplicate content."""
    return xxhash.xxh3_128_hexdigest(body)
