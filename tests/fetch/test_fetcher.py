"""The fetcher against odd responses, served by an injected transport."""

from __future__ import annotations

import dataclasses
import gzip
from collections.abc import AsyncIterator

import httpx2
import pytest
import trio
import trio.testing

from ubipy.config import FetchConfig
from ubipy.fetch.client import make_client
from ubipy.fetch.fetcher import FetchOutcome, Validators, fetch, sniff_type
from ubipy.fetch.filters import MediaTypes


def _client(handler: object) -> httpx2.AsyncClient:
    transport = httpx2.MockTransport(handler)  # type: ignore[arg-type]
    return make_client(FetchConfig(), "ubipy/test (peer=t)", transport=transport)


async def test_an_html_page_comes_back_with_its_metadata() -> None:
    def handler(request: httpx2.Request) -> httpx2.Response:
        assert request.headers["user-agent"] == "ubipy/test (peer=t)"
        return httpx2.Response(
            200,
            headers={
                "content-type": 'Text/HTML; charset="ISO-8859-1"',
                "etag": '"v1"',
                "last-modified": "Sun, 29 Nov 2026 10:00:00 GMT",
            },
            content=b"<title>x</title>",
        )

    async with _client(handler) as client:
        r = await fetch(client, "http://a.test/", max_bytes=1000)
    assert r.is_html and not r.is_redirect
    assert (r.content_type, r.charset, r.etag) == ("text/html", "ISO-8859-1", '"v1"')
    assert r.last_modified == "Sun, 29 Nov 2026 10:00:00 GMT"
    assert r.body == b"<title>x</title>" and not r.truncated
    assert r.outcome is FetchOutcome.OK and r.detail is None


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        # Two headers (a framework's and a proxy's) come joined: "text/html, text/html".
        (["text/html", "text/html; charset=utf-8"], ("text/html", "utf-8")),
        (["text/html; charset=gbk", "text/html"], ("text/html", "gbk")),  # same type
        (["text/html; charset=gbk", "text/plain"], ("text/plain", None)),  # the last
        (["text/html", "*/*"], ("text/html", None)),
        (["text/html", "nonsense"], ("text/html", None)),
        (['text/html; charset="utf-8, or not"'], ("text/html", "utf-8, or not")),
        # One type, its charset twice: the first (the last was taken).
        (["text/html; charset=utf-8; charset=iso-8859-1"], ("text/html", "utf-8")),
    ],
)
async def test_two_content_types_the_last_valid_one_counts(
    sent: list[str], kept: tuple[str, str | None]
) -> None:
    # WHATWG Fetch's "extract a MIME type", as browsers read it.
    headers = [("content-type", value) for value in sent]
    accept = MediaTypes(["text/plain"]).allows
    async with _client(lambda _: httpx2.Response(200, headers=headers, content=b"<p>")) as client:
        r = await fetch(client, "http://a.test/", max_bytes=1000, accept=accept)
    assert (r.content_type, r.charset) == kept
    assert r.detail is None  # before: "type not accepted: text/html, text/html"


async def test_a_body_over_the_cap_is_cut_and_marked_truncated() -> None:
    async with _client(lambda _: httpx2.Response(200, content=b"x" * 5000)) as client:
        r = await fetch(client, "http://a.test/big", max_bytes=1000)
        exact = await fetch(client, "http://a.test/big", max_bytes=5000)
    assert len(r.body) == 1000 and r.truncated and r.outcome is FetchOutcome.OK
    assert len(exact.body) == 5000 and not exact.truncated


async def test_an_html_answer_where_a_sitemap_was_asked_for_is_cut_as_a_page() -> None:
    """A sitemap is read to the protocol's 50 MB; an HTML answer to it (a gzip bomb of
    spaces at /sitemap.xml, QA) only to --max-body, as pages are."""

    def handler(request: httpx2.Request) -> httpx2.Response:
        ctype = "text/html" if request.url.path == "/page" else "application/xml"
        return httpx2.Response(200, headers={"content-type": ctype}, content=b"x" * 5000)

    async with _client(handler) as client:
        html = await fetch(client, "http://a.test/page", max_bytes=5000, html_cap=1000)
        xml = await fetch(client, "http://a.test/sitemap.xml", max_bytes=5000, html_cap=1000)
    assert (len(html.body), html.truncated) == (1000, True)
    assert (len(xml.body), xml.truncated) == (5000, False)


async def test_the_cap_applies_to_decompressed_bytes() -> None:
    bomb = gzip.compress(b"\0" * 2_000_000)
    assert len(bomb) < 10_000

    def handler(_: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, headers={"content-encoding": "gzip", "content-type": "text/html"}, content=bomb
        )

    async with _client(handler) as client:
        r = await fetch(client, "http://a.test/bomb", max_bytes=100_000)
    assert r.truncated and len(r.body) == 100_000


async def test_the_head_as_received_comes_back_for_the_warc_store() -> None:
    def handler(_: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            404,
            headers=[("X-Odd-Case", "one"), ("Set-Cookie", "a=1"), ("Set-Cookie", "b=2")],
            content=b"gone",
        )

    async with _client(handler) as client:
        r = await fetch(client, "http://a.test/x?q=1", max_bytes=100)
    assert (r.http_version, r.reason) == ("HTTP/1.1", "Not Found")
    # Names as sent, repeated lines kept, in order.
    assert r.raw_headers[:3] == (
        (b"X-Odd-Case", b"one"),
        (b"Set-Cookie", b"a=1"),
        (b"Set-Cookie", b"b=2"),
    )
    request = dict(r.request_headers)
    assert request[b"Host"] == b"a.test" and request[b"User-Agent"] == b"ubipy/test (peer=t)"


async def test_a_redirect_is_not_followed_but_reported() -> None:
    calls: list[str] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        calls.append(str(request.url))
        return httpx2.Response(301, headers={"location": "/elsewhere"})

    async with _client(handler) as client:
        r = await fetch(client, "http://a.test/old", max_bytes=1000)
    assert calls == ["http://a.test/old"]
    assert r.is_redirect and r.location == "/elsewhere" and r.status == 301


@pytest.mark.parametrize(
    ("exc", "outcome", "detail"),
    [
        (httpx2.ConnectError("refused"), FetchOutcome.CONNECT_ERROR, "ConnectError: refused"),
        (httpx2.ProxyError("no tunnel"), FetchOutcome.CONNECT_ERROR, "ProxyError: no tunnel"),
        (httpx2.ReadTimeout("slow"), FetchOutcome.TIMEOUT, "timeout: ReadTimeout"),
        (httpx2.ConnectTimeout("slow"), FetchOutcome.TIMEOUT, "timeout: ConnectTimeout"),
        (httpx2.ReadError("reset"), FetchOutcome.NETWORK_ERROR, "ReadError: reset"),
        (OSError("odd socket"), FetchOutcome.NETWORK_ERROR, "OSError: odd socket"),
        (httpx2.RemoteProtocolError("garbage"), FetchOutcome.PROTOCOL_ERROR, "RemoteProtocolError"),
        (ValueError("bad header"), FetchOutcome.PROTOCOL_ERROR, "ValueError: bad header"),
    ],
)
async def test_network_failures_become_results_of_their_kind(
    exc: Exception, outcome: FetchOutcome, detail: str
) -> None:
    def handler(_: httpx2.Request) -> httpx2.Response:
        raise exc

    async with _client(handler) as client:
        r = await fetch(client, "http://a.test/", max_bytes=1000)
    assert r.outcome is outcome and not r.ok
    # The detail is what the log and the page's stored error say.
    assert r.status is None and r.detail is not None and r.detail.startswith(detail)
    assert not r.is_html and not r.is_redirect


async def test_a_time_out_says_how_long_it_waited(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def handler(_: httpx2.Request) -> httpx2.Response:
        await trio.sleep(7.0)
        raise httpx2.ReadTimeout("slow")

    async with _client(handler) as client:
        r = await fetch(client, "http://a.test/", max_bytes=1000)
    # The host's pace counts it: a server that never answers is at least this slow.
    assert r.outcome is FetchOutcome.TIMEOUT and r.latency == pytest.approx(7.0)


async def test_a_body_that_is_not_in_its_encoding_is_a_protocol_error() -> None:
    def handler(_: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-encoding": "gzip"}, content=b"not gzip")

    async with _client(handler) as client:
        r = await fetch(client, "http://a.test/", max_bytes=1000)
    assert r.outcome is FetchOutcome.PROTOCOL_ERROR
    assert r.detail is not None and r.detail.startswith("DecodingError")


async def test_non_html_is_not_parsed() -> None:
    def handler(_: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers={"content-type": "application/pdf"}, content=b"%PDF")

    async with _client(handler) as client:
        r = await fetch(client, "http://a.test/x.pdf", max_bytes=1000)
    assert r.status == 200 and not r.is_html


async def test_a_conditional_get_sends_the_copys_validators_and_reads_a_304() -> None:
    seen: list[httpx2.Headers] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers)
        if request.headers.get("if-none-match") == '"v1"':
            return httpx2.Response(304, headers={"etag": '"v1"'})
        return httpx2.Response(200, headers={"etag": '"v2"'}, content=b"<p>new</p>")

    copy = Validators('"v1"', "Sun, 29 Nov 2026 10:00:00 GMT")
    async with _client(handler) as client:
        same = await fetch(client, "http://a.test/", max_bytes=1000, validators=copy)
        changed = await fetch(
            client, "http://a.test/", max_bytes=1000, validators=Validators('"v0"', None)
        )
        plain = await fetch(client, "http://a.test/", max_bytes=1000)
    assert plain.body == b"<p>new</p>" and not plain.not_modified
    assert same.not_modified and same.ok and same.body == b"" and same.etag == '"v1"'
    assert seen[0]["if-modified-since"] == "Sun, 29 Nov 2026 10:00:00 GMT"
    assert not changed.not_modified and changed.body == b"<p>new</p>"
    assert "if-modified-since" not in seen[1]
    assert "if-none-match" not in seen[2] and "if-modified-since" not in seen[2]


@pytest.mark.parametrize("raw", ['"caf\u00e9"'.encode(), b'"caf\xe9"', b'"\xb2"'])
async def test_a_non_ascii_validator_is_left_out_and_the_page_still_refreshed(raw: bytes) -> None:
    # httpx2 reads such a header as UTF-8 or as Latin-1; sent back as a str it raised
    # UnicodeEncodeError, a protocol error on every visit: the page never refreshed.
    seen: list[httpx2.Headers] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers)
        headers = [(b"ETag", raw), (b"Last-Modified", b"Sun, 29 Nov 2026 10:00:00 GMT\xa0")]
        return httpx2.Response(200, headers=headers, content=b"<p>x</p>")

    async with _client(handler) as client:
        first = await fetch(client, "http://a.test/", max_bytes=1000)
        assert first.etag is not None and not first.etag.isascii()
        assert first.last_modified is not None and not first.last_modified.isascii()
        copy = Validators(first.etag, first.last_modified)
        again = await fetch(client, "http://a.test/", max_bytes=1000, validators=copy)
        # The ASCII one of the two is still sent.
        half = await fetch(
            client, "http://a.test/", max_bytes=1000, validators=Validators('"v1"', first.etag)
        )
    assert again.ok and again.status == 200 and again.body == b"<p>x</p>"
    assert "if-none-match" not in seen[1] and "if-modified-since" not in seen[1]
    assert half.ok and seen[2]["if-none-match"] == '"v1"' and "if-modified-since" not in seen[2]


async def test_cookies_an_answer_sets_are_not_sent_back() -> None:
    sent: list[str | None] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request.headers.get("cookie"))
        return httpx2.Response(
            200, headers=[("Set-Cookie", "sid=1; Path=/"), ("Set-Cookie", "b=2")], content=b"x"
        )

    async with _client(handler) as client:
        first = await fetch(client, "http://a.test/", max_bytes=1000)
        await fetch(client, "http://a.test/next", max_bytes=1000)
        # Nothing is kept, however many hosts set one.
        assert len(client.cookies.jar) == 0
    assert sent == [None, None]
    # The answer itself keeps its headers (its WARC record has them).
    cookies = [v for k, v in first.raw_headers if k.lower() == b"set-cookie"]
    assert cookies == [b"sid=1; Path=/", b"b=2"]


class _Pieces(httpx2.AsyncByteStream):
    """A body that arrives in pieces, as from a socket (not read in advance)."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece


@pytest.mark.parametrize("coded", [False, True], ids=["identity", "gzip"])
async def test_a_streamed_body_is_read_decoded_and_capped(coded: bool) -> None:
    page = b"<title>t</title>" + b"x" * 3000
    wire = gzip.compress(page) if coded else page
    third = len(wire) // 3
    thirds = [wire[:third], wire[third : 2 * third], wire[2 * third :]]

    def handler(_: httpx2.Request) -> httpx2.Response:
        headers = [("Content-Type", "text/html"), ("ETag", '"a"'), ("etag", '"b"')]
        if coded:
            headers.append(("Content-Encoding", "gzip"))
        return httpx2.Response(200, headers=headers, stream=_Pieces(*thirds))

    async with _client(handler) as client:
        whole = await fetch(client, "http://a.test/", max_bytes=10_000)
        cut = await fetch(client, "http://a.test/", max_bytes=1000)
    assert (whole.body, whole.truncated) == (page, False)
    # Repeated header lines come back joined, as httpx2's Headers.get joins them.
    assert whole.etag == '"a", "b"'
    assert (cut.body, cut.truncated) == (page[:1000], True)


_ANSWERS = {
    "page": (200, [("Content-Type", "text/html; charset=utf-8"), ("X-Odd", "1")], b"<p>x</p>"),
    "redirect": (301, [("Location", "/elsewhere")], b""),
    "not modified": (304, [("ETag", '"v1"')], b""),
    "cookie": (200, [("Set-Cookie", "sid=1"), ("Content-Type", "text/plain")], b"x"),
    "gzip": (200, [("Content-Encoding", "gzip")], gzip.compress(b"<title>t</title>")),
}


@pytest.mark.parametrize("answer", list(_ANSWERS))
async def test_a_page_goes_the_direct_way_as_httpx2s_would(answer: str) -> None:
    """The crawler's client sends a page's GET straight to its transport: the server
    sees the same request, header for header, and the crawl the same result, as through
    httpx2's build_request and send (taken once the client is given an event hook)."""
    status, headers, content = _ANSWERS[answer]
    seen: list[tuple[str, list[tuple[bytes, bytes]], object]] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append((str(request.url), request.headers.raw, request.extensions["timeout"]))
        return httpx2.Response(status, headers=headers, content=content)

    async def hook(_: httpx2.Request) -> None:
        return None

    copy = Validators('"v1"', None) if answer == "not modified" else None
    async with _client(handler) as client:
        direct = await fetch(client, "http://a.test/p?q=1", max_bytes=1000, validators=copy)
        client.event_hooks = {"request": [hook], "response": []}
        layered = await fetch(client, "http://a.test/p?q=1", max_bytes=1000, validators=copy)
    assert seen[0] == seen[1]
    assert dataclasses.replace(direct, latency=None) == dataclasses.replace(layered, latency=None)
    assert direct.status == status


async def test_what_a_client_is_given_after_it_is_made_takes_httpx2s_way() -> None:
    """Parameters and cookies set on the crawler's client after it was made are still
    sent (httpx2 adds them), and so are an auth's headers."""
    seen: list[httpx2.Request] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        return httpx2.Response(200, content=b"x")

    async with _client(handler) as client:
        client.params = {"k": "v"}
        await fetch(client, "http://a.test/", max_bytes=10)
        client.params = {}
        client.cookies = {"c": "1"}
        await fetch(client, "http://a.test/", max_bytes=10)
        client.cookies = _client(handler).cookies
        client.auth = ("u", "p")
        await fetch(client, "http://a.test/", max_bytes=10)
    assert seen[0].url.params["k"] == "v"
    assert seen[1].headers["cookie"] == "c=1"
    assert seen[2].headers["authorization"].startswith("Basic ")


async def test_of_two_location_headers_the_first_is_followed() -> None:
    # Joined, "/a" and "/b" became the link "/a, /b": http://a.test/a,%20/b, fetched.
    headers = [("Location", "/a"), ("Location", "/b")]
    async with _client(lambda _: httpx2.Response(302, headers=headers)) as client:
        r = await fetch(client, "http://a.test/", max_bytes=100)
    assert r.is_redirect and r.location == "/a"


async def test_a_location_not_in_utf8_is_followed_to_the_bytes_the_server_sent() -> None:
    # Read as Latin-1, /caf\xe9 was followed to /caf%C3%A9: a page the server lacks.
    headers = [(b"Location", b"/caf\xe9?q=\xe9t\xe9")]
    async with _client(lambda _: httpx2.Response(302, headers=headers)) as client:
        r = await fetch(client, "http://a.test/", max_bytes=100)
    assert r.is_redirect and r.location == "/caf%E9?q=%E9t%E9"


@pytest.mark.parametrize("status", [204, 205])
async def test_an_answer_that_has_no_body_is_no_type_refused(status: int) -> None:
    """A 204 was recorded with the error "type not accepted: none given" (QA)."""
    accept = MediaTypes(["text/html"]).allows
    async with _client(lambda _: httpx2.Response(status)) as client:
        r = await fetch(client, "http://a.test/ping", max_bytes=1000, accept=accept)
    assert (r.status, r.detail, r.body) == (status, None, b"")


@pytest.mark.parametrize(
    ("body", "sniffed"),
    [
        (b"<!DOCTYPE html><title>t</title>", "text/html"),
        (b"\xef\xbb\xbf\r\n  <html lang=en>", "text/html"),
        (b"<p>para", "text/html"),
        (b"<!-- a comment --><div>", "text/html"),
        (b"<a href=x>", "text/html"),
        (b"<abbr>", None),  # <A must end there
        (b"<?xml version='1.0'?><html>", None),
        (b"%PDF-1.7", None),
        (b"", None),
    ],
)
def test_a_body_with_no_type_is_html_if_it_begins_as_html(body: bytes, sniffed: str | None) -> None:
    assert sniff_type(body) == sniffed


async def test_a_page_sent_with_no_content_type_is_read_as_the_html_it_is() -> None:
    """It was closed as "type not accepted: none given", its links lost (QA)."""
    accept = MediaTypes().allows
    page = b"<html><title>t</title><a href=/next>n</a>"
    async with _client(lambda r: httpx2.Response(200, content=page)) as client:
        html = await fetch(client, "http://a.test/", max_bytes=1000, accept=accept)
    assert (html.content_type, html.is_html, html.detail, html.body) == (
        "text/html",
        True,
        None,
        page,
    )
    async with _client(lambda r: httpx2.Response(200, content=b"\x00\x01binary")) as client:
        other = await fetch(client, "http://a.test/blob", max_bytes=1000, accept=accept)
    assert (other.detail, other.body, other.accepted) == (
        "type not accepted: none given",
        b"",
        False,
    )


@pytest.mark.parametrize(
    ("last_modified", "sent"),
    [
        ("Sun, 29 Nov 2026 10:00:00 GMT", True),
        ("Sunday, 06-Nov-94 08:49:37 GMT", True),  # RFC 850's form, obsolete but valid
        ("Sun Nov  6 08:49:37 1994", True),  # asctime's
        ("yesterday-ish garbage", False),
        ("0", False),
    ],
)
def test_a_last_modified_that_is_no_date_is_not_sent_back(last_modified: str, sent: bool) -> None:
    """RFC 9110 13.1.3: a recipient ignores an If-Modified-Since that is no HTTP-date; it
    was stored and sent back at every visit (QA)."""
    headers = Validators(None, last_modified).headers()
    assert ("If-Modified-Since" in headers) is sent
