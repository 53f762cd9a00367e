"""URL normalisation, host keys and fingerprints.

Parsing is delegated to ada (the WHATWG URL parser browsers use), so a link
resolves here exactly as it would in a browser; a plain path on a page's own site
(``/a/b.html?x=1``, most of a page's links), which the parser would keep as written,
is joined to the page's origin without it, 6 times faster. On top of ada we only add
what WHATWG leaves alone but RFC 3986 §6.2.2 calls equivalent: fragments dropped,
percent-encoded unreserved characters decoded and escape hex upper-cased.

Hosts come out of ada in the one form they take on the wire, so that a host has one
key for the ring, politeness, robots.txt and the connection: an internationalised
name in punycode after UTS #46 mapping (``http://网络爬虫.example/`` and
``http://XN--P0XP4Y9JAO6V.example/`` are both ``http://xn--p0xp4y9jao6v.example/``;
exports show the Unicode form beside it), an IPv6 literal compressed, lower-cased
and in brackets (``http://[0:0::1]:8080/`` is ``http://[::1]:8080/``, host key
``[::1]:8080``).

Everything but `normalize` assumes its argument is already normalised and works
by slicing the string: these run once per discovered link, and re-parsing a URL
that ada has just serialised would only repeat work.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import ipaddress
import re

import ada_url
import xxhash
from publicsuffixlist import PSLFILE, PublicSuffixList

from ubipy.errors import UbipyError

__all__ = [
    "MAX_URL_LENGTH",
    "BadURL",
    "URLRejection",
    "fingerprint",
    "host_key",
    "ip_literal",
    "normalize",
    "normalize_reporting",
    "origin",
    "path_and_query",
    "registered_domain",
    "resolve_link",
    "robots_url",
]

MAX_URL_LENGTH = 2048
# Inputs this long cannot shrink to MAX_URL_LENGTH by any normalisation we'd
# accept, so they are refused before paying for a parse.
_MAX_INPUT_LENGTH = 4 * MAX_URL_LENGTH


class URLRejection(enum.Enum):
    """Why `normalize` refused a URL; callers count refusals by this."""

    INVALID = "invalid"
    SCHEME = "scheme"
    TOO_LONG = "too_long"
    NO_HOST = "no_host"
    CONTROL_CHARS = "control_chars"


class BadURL(UbipyError, ValueError):
    """A URL `normalize` refuses, and why (callers count refusals by ``reason``)."""

    def __init__(self, reason: URLRejection, url: str = "") -> None:
        # Truncated: the offending input may be megabytes of hostile text.
        super().__init__(f"{reason.value}: {url[:200]!r}")
        self.reason = reason
        self.url = url


# Tab, LF and CR are not here: WHATWG parsers silently delete them, and HTML
# attributes are often wrapped across lines. Every other C0 control, DEL and
# the C1 controls mean the "link" is binary junk or an injection attempt.
_CONTROL_CHARS = frozenset(
    [chr(c) for c in range(0x20) if chr(c) not in "\t\n\r"]
    + [chr(0x7F)]
    + [chr(c) for c in range(0x80, 0xA0)]
)

# What is stripped from both ends of a link: HTML's ASCII whitespace, around a URL in
# an attribute (not every Unicode space: a link ending in U+00A0 is requested with
# it, percent-encoded, as browsers do). Other C0 controls are refused, see above.
_ASCII_WHITESPACE = "\t\n\x0c\r "

# A path-absolute link that WHATWG resolution keeps as written: segments of
# unreserved characters that do not begin with a dot (so no "." or ".." segment),
# and a query of unreserved characters, "=" and "&". Segments are joined by a "/"
# that must be there, so a string matches one way only: linear time whatever a
# hostile page writes.
_SEGMENT = r"[A-Za-z0-9_~-][A-Za-z0-9._~-]*"
_SEGMENTS = rf"{_SEGMENT}(?:/{_SEGMENT})*/?"
_QUERY = r"(?:\?[A-Za-z0-9._~=&-]*)?"
_PLAIN_PATH = re.compile(rf"/(?:{_SEGMENTS})?{_QUERY}")
# The same without the leading "/": a path relative to the page's directory. Its first
# segment has no ":" (it would be a scheme) and none begins with a dot.
_PLAIN_RELATIVE = re.compile(rf"{_SEGMENTS}{_QUERY}")
# An absolute http(s) URL that WHATWG parsing keeps as written: a lower-case scheme,
# no userinfo or port, a host of lower-case letters, digits and hyphens whose labels
# are not punycode ("xn--", which the parser checks) and whose last label begins with
# a letter (so it is not read as an IPv4 number, as "0x7f" or "1" would be), then a
# plain path as above. Labels end at a "." and the host at the "/": linear time.
_LABEL = r"(?!xn--)[a-z0-9-]+"
_PLAIN_URL = re.compile(rf"https?://(?:{_LABEL}\.)*(?!xn--)[a-z][a-z0-9-]*{_PLAIN_PATH.pattern}")
# The base _plain_origin saw last, and its answer.
_last_base: tuple[str, tuple[str, str] | None] = ("", None)
_HEX = "0123456789ABCDEFabcdef"
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")


def _build_escape_table() -> dict[str, str]:
    # Every two-hex-digit spelling mapped to its canonical form, so rewriting an
    # escape is one dict lookup rather than int() + chr() + a membership test.
    table: dict[str, str] = {}
    for hi in _HEX:
        for lo in _HEX:
            char = chr(int(hi + lo, 16))
            table[hi + lo] = char if char in _UNRESERVED else f"%{(hi + lo).upper()}"
    return table


_ESCAPES = _build_escape_table()


def _canonical_escapes(url: str) -> str:
    parts = url.split("%")
    out = [parts[0]]
    # Set after a stray "%" that has fewer than two characters after it: a hex
    # digit decoded next to it would form a new escape ("%a%41" → "%aA"), and
    # normalising the result again would change it.
    stray_open = False
    for part in parts[1:]:
        canonical = _ESCAPES.get(part[:2])
        if canonical is None:
            # A "%" not followed by two hex digits: WHATWG keeps it literally,
            # and so must we or the URL would change meaning.
            out.append("%")
            out.append(part)
            stray_open = not part or (len(part) == 1 and part in _HEX)
        else:
            if stray_open and canonical in _HEX:
                canonical = "%" + part[:2].upper()
            out.append(canonical)
            out.append(part[2:])
            stray_open = False
    return "".join(out)


def normalize(href: str, base: str | None = None) -> str:
    """Resolve `href` against `base` and return the canonical absolute URL.

    Userinfo (``user:pass@``) is stripped: credentials must never be stored or
    exported, and ``http://u:p@h/a`` and ``http://h/a`` must be one URL.
    Raises `BadURL` (a `ValueError`) with the reason for refusing it.
    """
    return normalize_reporting(href, base)[0]


def normalize_reporting(href: str, base: str | None = None) -> tuple[str, bool]:
    """`normalize`, and whether it stripped userinfo from the URL (for callers that
    count the strips)."""
    plain = _plain(href, base)
    if plain is not None:
        return plain[0], False
    return _resolve(href, base)


def resolve_link(href: str, base: str | None = None) -> tuple[str, str, bool]:
    """`normalize_reporting` with the URL's :func:`host_key`: the normalised URL, its
    host key, and whether userinfo was stripped. Most links take the host from what
    was matched (or from the page's own URL) instead of a second scan of the URL."""
    plain = _plain(href, base)
    if plain is not None:
        return plain[0], plain[1], False
    url, stripped = _resolve(href, base)
    return url, host_key(url), stripped


def _plain(href: str, base: str | None) -> tuple[str, str] | None:
    """The URL and host key of a link WHATWG would keep as written, without the
    parser; None for any other link (or one too long), which `_resolve` takes."""
    # Most links of a page are plain paths on its own site ("/a/b.html?x=1"): WHATWG
    # would change nothing in them, so the page's origin and the path are the URL,
    # and the page's host is its host.
    if href[:1] == "/":
        if base is None or not _PLAIN_PATH.fullmatch(href):
            return None
        site = _plain_origin(base)
        if site is None or len(site[0]) + len(href) > MAX_URL_LENGTH:
            return None
        return site[0] + href, site[1]
    # Most of the rest are plain absolute links to other sites: no userinfo or port,
    # and a path that begins with the "/" that ends the host.
    if href[:4] == "http" and len(href) <= MAX_URL_LENGTH and _PLAIN_URL.fullmatch(href):
        start = 8 if href[4] == "s" else 7
        return href, href[start : href.index("/", start)]
    # And plain relative paths ("b.html", "d/c.html?x=1"): the page's directory (its
    # path up to the last "/", before any query) and the path.
    if base is not None and _PLAIN_RELATIVE.fullmatch(href):
        site = _plain_origin(base)
        if site is None:
            return None
        page = base.partition("?")[0]
        url = page[: page.rindex("/") + 1] + href
        return (url, site[1]) if len(url) <= MAX_URL_LENGTH else None
    return None


def _plain_origin(base: str) -> tuple[str, str] | None:
    """``scheme://host[:port]`` of ``base`` and its host key, when ``base`` is already
    normalised (as a page's URL is) and has no userinfo; None otherwise. The last
    answer is kept: a page's links are resolved against one base, one after the other."""
    global _last_base
    if base == _last_base[0]:
        return _last_base[1]
    site = None
    with contextlib.suppress(BadURL):
        if _resolve(base, None)[0] == base:
            scheme_end, host_start, end = _authority(base)
            if host_start == scheme_end:  # no userinfo
                site = (base[:end], base[host_start:end])
    _last_base = (base, site)
    return site


def _resolve(href: str, base: str | None) -> tuple[str, bool]:
    """`normalize_reporting` through ada, for any link."""
    if len(href) > _MAX_INPUT_LENGTH:
        raise BadURL(URLRejection.TOO_LONG, href)
    href = href.strip(_ASCII_WHITESPACE)
    # isprintable() is a single C pass that is true for nearly every real link;
    # only the rare rest pays for the exact control-character test.
    if not href.isprintable() and not _CONTROL_CHARS.isdisjoint(href):
        raise BadURL(URLRejection.CONTROL_CHARS, href)
    try:
        url = ada_url.join_url(base, href) if base is not None else ada_url.normalize_url(href)
    except ValueError:
        raise BadURL(URLRejection.INVALID, href) from None

    # ada lower-cases the scheme, so two prefix tests decide it.
    if url.startswith("https://"):
        host_start = 8
    elif url.startswith("http://"):
        host_start = 7
    else:
        raise BadURL(URLRejection.SCHEME, href)
    # WHATWG gives special schemes a non-empty host or no URL at all; this is a
    # guard against a parser change, not an expected path.
    if host_start >= len(url) or url[host_start] == "/":
        raise BadURL(URLRejection.NO_HOST, href)

    # The first "#" in a serialised URL is always the fragment delimiter: a
    # literal "#" anywhere before it would have been percent-encoded.
    cut = url.find("#", host_start)
    if cut >= 0:
        url = url[:cut]
    stripped = False
    # Only a rare URL has an "@" at all; the authority is looked at only then.
    if "@" in url:
        path_start = url.find("/", host_start)
        if path_start < 0:
            path_start = len(url)
        # WHATWG percent-encodes "@" inside userinfo, and a host cannot hold one,
        # so an "@" in the authority is the one that ends the userinfo.
        at = url.find("@", host_start, path_start)
        if at >= 0:
            url = url[:host_start] + url[at + 1 :]
            stripped = True
    if "%" in url:
        url = _canonical_escapes(url)
    if len(url) > MAX_URL_LENGTH:
        raise BadURL(URLRejection.TOO_LONG, href)
    if "xn--" in url and not _punycode_valid(url):
        raise BadURL(URLRejection.INVALID, href)
    authority_end = url.find("/", host_start)
    authority_end = len(url) if authority_end < 0 else authority_end
    if url.endswith(":0", host_start, authority_end):
        # Port 0 names no service. Taken for the scheme's own port, it was a second
        # host key for the site: a politeness slot of its own, on any peer.
        raise BadURL(URLRejection.INVALID, href)
    if "." in url[host_start:authority_end]:
        url = _without_root_dot(url, href, host_start, authority_end)
    return url, stripped


def _without_root_dot(url: str, href: str, host_start: int, authority_end: int) -> str:
    """``a.test.`` (the DNS root's dot) is ``a.test``, as servers take it: kept, it was
    a host key of its own, and the site's pages were fetched twice."""
    host_end = url.rfind(":", host_start, authority_end)
    if host_end < 0 or url[host_end - 1] == "]":  # no port, or an IPv6 literal's colons
        host_end = authority_end
    if url[host_start] == "." or ".." in url[host_start : host_end - 1]:
        # An empty label ("a..b", ".a.b"): no name DNS holds, yet a host key of its
        # own and a lookup to fail ("a.test.." was refused already).
        raise BadURL(URLRejection.INVALID, href)
    if url[host_end - 1] != ".":
        return url
    if url[host_end - 2] in "./":  # "a.test.." or a host of dots: no name DNS holds
        raise BadURL(URLRejection.INVALID, href)
    return url[: host_end - 1] + url[host_end:]


def _punycode_valid(url: str) -> bool:
    """Whether each ``xn--`` label of the URL's host is punycode as UTS #46 takes it:
    it decodes, to something not all ASCII, that encodes back to it, and that ada
    maps back to the very label (its rules: no controls or spaces, normal form C,
    joiners only where a script joins, its own Unicode version). ada takes ``xn--a``
    (U+0080) or ``xn--zz`` as they are, names no DNS holds: each cost a lookup and a
    host given up, and showed half-decoded in exports. A check of Python's own
    (Unicode 14) refused Sinhala and Persian names with their joiners and scripts
    newer than it."""
    _, start, end = _authority(url)
    for label in url[start:end].rsplit(":", 1)[0].split("."):
        if label[:4] != "xn--":
            continue
        try:
            decoded = label[4:].encode("ascii").decode("punycode")
        except UnicodeError:
            return False
        if not decoded or decoded.isascii() or decoded.encode("punycode") != label[4:].encode():
            return False
        try:
            if ada_url.URL(f"http://{decoded}/").hostname != label:
                return False
        except ValueError:
            return False
    return True


def _authority(url: str) -> tuple[int, int, int]:
    """(end of "scheme://", start of host, end of host[:port]) of a normalised URL."""
    if url.startswith("https://"):
        start = 8
    elif url.startswith("http://"):
        start = 7
    else:
        raise BadURL(URLRejection.SCHEME, url)
    end = url.find("/", start)
    if end < 0:
        # Normalised URLs always have a path; tolerate a bare authority anyway.
        end = len(url)
    # `normalize` strips userinfo, but a shard written before it did may still
    # hold URLs with it, and their host is still the part after the "@".
    at = url.rfind("@", start, end)
    return start, (at + 1 if at >= 0 else start), end


def host_key(url: str) -> str:
    """The politeness/ownership key of a normalised URL: host[:port].

    The port appears only when it is not the scheme's default (normalisation
    drops default ports), so http and https of one host share a key.
    """
    _, host_start, end = _authority(url)
    return url[host_start:end]


def origin(url: str) -> str:
    """scheme://host[:port] of a normalised URL, without userinfo."""
    scheme_end, host_start, end = _authority(url)
    if host_start == scheme_end:
        return url[:end]
    return url[:scheme_end] + url[host_start:end]


def robots_url(url: str) -> str:
    return origin(url) + "/robots.txt"


def path_and_query(url: str) -> str:
    """The part of a normalised URL that robots.txt rules match against."""
    _, _, end = _authority(url)
    rest = url[end:]
    cut = rest.find("#")
    if cut >= 0:
        rest = rest[:cut]
    return rest or "/"


_SIGN_BIT = 1 << 63
_WRAP = 1 << 64


def fingerprint(url: str) -> int:
    """xxh3-64 of the normalised URL as a signed 64-bit int (a SQLite INTEGER)."""
    value = xxhash.xxh3_64_intdigest(url.encode())
    return value - _WRAP if value >= _SIGN_BIT else value


@functools.cache
def _public_suffix_list() -> PublicSuffixList:
    """The bundled list, with each rule also in punycode (as ``accept_encoded_idn``
    gives it), so that ``xn--`` hosts under IDN suffixes get their right domain.

    Built on first use, and without that option: it runs the (pure Python) IDNA codec
    over every one of the ~10,000 rules (the whole build 86 ms of a peer's start-up),
    where only the ~460 rules that are not ASCII change under it (an ASCII label is its
    own punycode). Their punycode lines are added to the source instead: 42 ms."""
    with open(PSLFILE, "rb") as source:
        lines = [line.decode("utf-8") for line in source]
    encoded = []
    for line in lines:
        # The rule as the library reads a line: its first word, lower-cased.
        rule = line.lower().split(" ")[0].rstrip()
        if rule and not rule.startswith("//") and not rule.isascii():
            bang = "!" if rule[0] == "!" else ""
            encoded.append(bang + rule.lstrip("!").encode("idna").decode("ascii"))
    return PublicSuffixList(lines + encoded, accept_encoded_idn=False)


def ip_literal(name: str) -> str | None:
    """``name`` (without brackets) as an IP address in its usual form, if it is one."""
    # An IPv4 address ends in a digit and an IPv6 one has a ":": names, which do
    # neither, skip the (slow) ipaddress parse and its exception.
    if not name or not (name[-1].isdigit() or ":" in name):
        return None
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        return None


@functools.lru_cache(maxsize=1 << 16)
def registered_domain(host: str) -> str:
    """The registrable domain of a hostname (no port): www.example.co.uk → example.co.uk.

    An IP address is its own domain, as is a name with no registrable part
    (a bare public suffix, `localhost`). Unknown TLDs follow the PSL default
    rule `*`, so h003.synth.test → synth.test.
    """
    if not host or ip_literal(host[1:-1] if host.startswith("[") else host) is not None:
        return host
    domain: str | None = _public_suffix_list().privatesuffix(host)
    return domain if domain is not None else host.lower()
