"""URL normalisation under any string a page, a seed file or a redirect can hold:
arbitrary text (control characters, lone surrogates, 100 KB), and URLs built from
the awkward parts of the standard (odd schemes and slashes, userinfo, IDN and
numeric hosts, zones, ports, dot segments, escapes), against any base. Only BadURL
is raised, and what comes out is a canonical crawlable URL: http(s), no fragment,
no credentials, bounded, a fixed point, and cut up the same by every helper."""

from __future__ import annotations

import httpx2
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.common import fuzz
from ubipy.fetch.transport import _origin_of, plain_get
from ubipy.fetch.urls import (
    MAX_URL_LENGTH,
    BadURL,
    URLRejection,
    fingerprint,
    host_key,
    normalize,
    normalize_reporting,
    origin,
    path_and_query,
    registered_domain,
    robots_url,
)

_schemes = st.sampled_from(
    ["http://", "https://", "HTTP://", "hTtPs://", "http:", "http:/", "http:\\\\", "https:///",
     " http://", "\thttp://", "ftp://", "javascript:", "data:", "file://", "ws://", "//", ""]
)  # fmt: skip
_userinfo = st.sampled_from(["", "", "user@", "user:pw@", ":@", "@", "a@b@", "%40@", "ü:ß@"])
_hosts = st.sampled_from(
    ["a.test", "A.TEST.", "xn--nxasmq6b.test", "é.test", "ß.de", "münchen.test", "127.0.0.1",
     "0x7f.1", "2130706433", "0177.0.0.1", "1.2.3.256", "[::1]", "[::ffff:1.2.3.4]",
     "[fe80::1%25eth0]", "[", "a..test", ".test", "a_b.test", "a%2eb.test", "%zz.test",
     "xn--.test", "a" * 64 + ".test", ("a" * 63 + ".") * 5 + "test", "", "localhost", "∞.test"]
)  # fmt: skip
_ports = st.sampled_from(["", ":", ":80", ":443", ":0", ":65535", ":65536", ":0080", ":-1", ":x"])
_paths = st.lists(
    st.sampled_from(["", ".", "..", "%2e", "%2E%2e", "a", "%41", "%zz", "%", "%%", "é", "%C3%A9",
                     "a b", "\t", "\n", "\\", ";p", "~", "%7e", "%7E", "@", ":", "?", "#"])
    | st.text(max_size=6),
    max_size=6,
).map("/".join)  # fmt: skip
_tails = st.sampled_from(["", "?", "?a=1&b=%zz", "?é", "#", "#frag", "?q#f#g", "?#"])

urls = st.builds(
    lambda *parts: "".join(parts), _schemes, _userinfo, _hosts, _ports, st.just("/"), _paths, _tails
)
texts = (
    st.text(max_size=80)
    | st.text(st.characters(codec=None, exclude_categories=[]), max_size=20)
    | st.builds(lambda s, n: s * n, st.text(min_size=1, max_size=3), st.integers(1000, 40_000))
)
bases = st.none() | st.sampled_from(
    ["http://base.test/dir/page?x#y", "https://base.test", "http://[::1]:8080/a/b/",
     "ftp://base.test/", "mailto:x@y", "not a url", "", "http://" + "a" * 3000 + ".test/"]
) | urls  # fmt: skip


def check_normal(url: str) -> None:
    """What every normalised URL is, and what the helpers make of it."""
    assert url.startswith(("http://", "https://"))
    assert len(url) <= MAX_URL_LENGTH
    assert url.isascii() and all(c > " " and c != "\x7f" for c in url)
    assert "#" not in url
    assert normalize(url) == url, "not a fixed point"
    assert normalize_reporting(url) == (url, False), "credentials left in"
    key = host_key(url)
    assert key and "@" not in key
    assert origin(url) + path_and_query(url) == url
    assert robots_url(url) == origin(url) + "/robots.txt"
    assert normalize(robots_url(url)) == robots_url(url)
    assert -(2**63) <= fingerprint(url) < 2**63
    host = key.rsplit(":", 1)[0] if not key.endswith("]") else key
    assert registered_domain(host)


def normalises_or_refuses(href: str, base: str | None) -> str | None:
    try:
        url = normalize(href, base)
    except BadURL as exc:
        assert isinstance(exc.reason, URLRejection)
        return None
    check_normal(url)
    return url


@fuzz(100)
@given(href=urls | texts, base=bases)
@example(href="http://a.test/\ud800", base=None)
@example(href="\ud800", base="http://a.test/")
@example(href="http://a.test/" + "%41" * 3000, base=None)
@example(href="http://user:pw@a.test:80/%7e?#", base=None)
@example(href="//u@v.test", base="https://base.test/")
def test_any_string_normalises_to_a_canonical_url_or_is_refused(
    href: str, base: str | None
) -> None:
    normalises_or_refuses(href, base)


@fuzz(50)
@given(href=urls, base=urls)
def test_a_link_resolved_against_a_normalised_page_is_canonical(href: str, base: str) -> None:
    page = normalises_or_refuses(base, None)
    if page is not None:
        normalises_or_refuses(href, page)


def _plain_get_agrees_with_httpx2(url: str) -> None:
    plain = plain_get(url)
    if plain is None:
        return
    request = httpx2.Request("GET", url)
    assert plain.origin == _origin_of(request.url)
    assert (plain.netloc, plain.target) == (request.url.netloc, request.url.raw_path)
    assert plain.url == str(request.url).encode()


@fuzz(100)
@given(href=urls | texts, base=bases)
@example(href="http://a.test/a/%2e%2E/b?c=./..", base=None)
def test_a_get_the_transport_makes_itself_is_httpx2s(href: str, base: str | None) -> None:
    """The transport reads a plain URL's GET without httpx2's parser: for any URL,
    as given or normalised, that GET is the one httpx2's Request would make."""
    _plain_get_agrees_with_httpx2(href)
    url = normalises_or_refuses(href, base)
    if url is not None:
        _plain_get_agrees_with_httpx2(url)
