"""One GET with a size cap, turned into a plain result record.

Network failures do not raise: they come back as a result whose ``outcome`` says
which kind of failure it was (callers count and retry by it) and whose
``detail`` says what happened, for people, so the caller records them like any
other outcome.
"""

from __future__ import annotations

import dataclasses
import email.utils
import enum
import logging
import re
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Final
from urllib.parse import urljoin

import httpx2
import trio

from ubipy.fetch.bodies import BodyGate, CappedBody
from ubipy.fetch.client import CrawlClient, sent_headers
from ubipy.fetch.coding import BadCoding, BodyDecoder, read_decoded
from ubipy.fetch.tls import certificate_failure
from ubipy.fetch.transport import (
    AddressRefused,
    CertificateError,
    OutOfSockets,
    PooledBody,
    ProxyUnreachable,
)
from ubipy.fetch.urls import resolve_link

log = logging.getLogger(__name__)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


class FetchOutcome(enum.Enum):
    """How a request for a page ended."""

    # An answer, whatever its status; a body over the cap is cut and the result
    # marked ``truncated``, not failed.
    OK = "ok"
    # No answer in time: one of httpx's time-outs, or the crawler's fetch deadline.
    TIMEOUT = "timeout"
    # No connection: refused, unreachable, a TLS handshake or the proxy failing.
    CONNECT_ERROR = "connect_error"
    # No connection to the proxy itself: not the host's failure. The crawler asks
    # again, as if never asked, once the proxy may answer.
    PROXY_DOWN = "proxy_down"
    # No socket to be had in this process (out of file descriptors: ulimit -n): not the
    # host's failure either, put back as for a proxy down.
    NO_SOCKETS = "no_sockets"
    # The server's TLS certificate did not verify: not retried, it will not change.
    CERTIFICATE_ERROR = "certificate_error"
    # The host's address is one a crawler may not reach (loopback, private,
    # link-local...) and the user did not allow it: not asked, not retried.
    REFUSED = "refused"
    # The connection broke during the exchange.
    NETWORK_ERROR = "network_error"
    # The answer was not HTTP that can be read, or its body not in its encoding.
    PROTOCOL_ERROR = "protocol_error"
    # The body is in a content coding ubipy does not decode (br, zstd...), though it
    # was not asked for: not retried, the server would send it so again.
    UNSUPPORTED = "unsupported"
    # The answer came, but processing it failed (see processing_failed()).
    PROCESSING_FAILED = "processing_failed"


#: Outcomes that are no host's failure: the request is put back, as if never asked.
PUT_BACK: Final = frozenset({FetchOutcome.PROXY_DOWN, FetchOutcome.NO_SOCKETS})


@dataclass(frozen=True, slots=True)
class FetchResult:
    url: str
    status: int | None
    content_type: str | None
    charset: str | None
    location: str | None
    last_modified: str | None
    etag: str | None
    retry_after: str | None
    body: bytes
    truncated: bool
    outcome: FetchOutcome
    # What went wrong, for logs and the page's stored error; None when OK.
    detail: str | None
    # False: a successful answer of a type the crawl does not keep (--accept): its
    # body was not read; ``detail`` says which type.
    accepted: bool = True
    # Seconds from the request to the response's head: the server's pace, which a
    # host's delay follows (throttle.py). A time-out's is the time waited, which the
    # server took at least (Heritrix charges a fetch's duration whatever its outcome):
    # else a server that never answers would be asked more often than a slow one.
    # None: no answer, and no time spent waiting for one (a refused connection).
    latency: float | None = None
    # The answer's head as received, for a WARC response record (the store keeps it):
    # its HTTP version, reason phrase and header lines in order, names as sent; and the
    # request's header lines as they went out (Host first).
    http_version: str = "HTTP/1.1"
    reason: str = ""
    raw_headers: tuple[tuple[bytes, bytes], ...] = ()
    request_headers: tuple[tuple[bytes, bytes], ...] = ()
    # The Refresh header (a delay and a URL, as a meta refresh's content), if any.
    refresh: str | None = None

    @property
    def ok(self) -> bool:
        return self.outcome is FetchOutcome.OK

    @property
    def is_html(self) -> bool:
        return (
            self.status is not None
            and 200 <= self.status < 300
            and (self.content_type in HTML_TYPES)
        )

    @property
    def not_modified(self) -> bool:
        """A 304: the copy asked about with validators is still the page."""
        return self.status == 304

    @property
    def is_redirect(self) -> bool:
        return self.status is not None and 300 <= self.status < 400 and bool(self.location)

    @property
    def target(self) -> str | None:
        """Where a redirect points: its Location resolved against the URL asked and
        normalised as a link is; resolved alone when no crawl could take it (a
        ``mailto:``), so that a record still says where it went. None: no redirect."""
        if not self.is_redirect:
            return None
        assert self.location is not None
        try:
            return resolve_link(self.location, self.url)[0]
        except ValueError:  # BadURL among them
            try:
                return urljoin(self.url, self.location)
            except ValueError:  # an unbalanced "[" in the host
                return self.location

    @property
    def conditional(self) -> bool:
        """Whether the request carried validators (a server may answer 304 to any)."""
        return any(
            name.lower() in (b"if-none-match", b"if-modified-since")
            for name, _ in self.request_headers
        )


@dataclass(frozen=True, slots=True)
class Validators:
    """What a stored copy of a page was served with, to ask whether it changed."""

    etag: str | None
    last_modified: str | None

    def headers(self) -> dict[str, str]:
        """RFC 9110's conditional request headers: If-None-Match wins where both are
        sent, so a server that knows ETags is asked by ETag. A validator that is not
        plain ASCII is left out (see :func:`_sendable`)."""
        out = {}
        if self.etag and _sendable(self.etag):
            out["If-None-Match"] = self.etag
        if self.last_modified and _sendable(self.last_modified) and _http_date(self.last_modified):
            out["If-Modified-Since"] = self.last_modified
        return out


def _http_date(value: str) -> bool:
    """Whether ``value`` reads as an HTTP-date: one that does not is ignored (RFC 9110
    13.1.3), not sent back to a server that may answer 304 to anything (QA)."""
    try:
        return email.utils.parsedate_to_datetime(value) is not None
    except (TypeError, ValueError, IndexError):
        return False


def _sendable(value: str) -> bool:
    """Whether a validator can go back as it came. httpx2 sends a header's str as ASCII
    (anything else raised UnicodeEncodeError, a protocol error on every visit, so the
    page was never refreshed); and a non-ASCII one cannot be turned back into the
    server's bytes, which httpx2 read as UTF-8 or as Latin-1, whichever fitted. Without
    it the page is asked for whole, as on its first visit."""
    return value.isascii() and value.isprintable()


# The answers whose type --accept judges: a success with a body (a 204 or 205 has
# none, so no type: it was recorded "type not accepted: none given").
_TYPED = frozenset(range(200, 300)) - {204, 205}


# WHATWG MIME Sniffing, "rules for identifying an unknown MIME type": the tags whose
# start, after white space, makes a body with no Content-Type HTML (each followed by
# a space or ">").
_HTML_STARTS = tuple(
    t.encode()
    for t in (
        "<!DOCTYPE HTML", "<HTML", "<HEAD", "<SCRIPT", "<IFRAME", "<H1", "<DIV", "<FONT",
        "<TABLE", "<A", "<STYLE", "<TITLE", "<B", "<BODY", "<BR", "<P", "<!--",
    )
)  # fmt: skip


_NOT_WHITE = re.compile(rb"[^\t\n\x0c\r ]")


def sniff_type(body: bytes) -> str | None:
    """The type of a body sent with no Content-Type: ``text/html`` if it begins as
    HTML does (as browsers sniff it; Heritrix, Nutch and StormCrawler sniff too), else
    None. A page whose server named no type was closed unread, its links lost (QA)."""
    # The first byte past a byte order mark and white space, found where it is: the
    # body stripped was a copy of a whole page (up to --max-body) to read 16 bytes.
    first = _NOT_WHITE.search(body, 3 if body.startswith(b"\xef\xbb\xbf") else 0)
    if first is None:
        return None
    head = body[first.start() : first.start() + 16].upper()
    for start in _HTML_STARTS:
        if head.startswith(start) and head[len(start) : len(start) + 1] in (b" ", b">"):
            return "text/html"
    return None


def _split_content_type(value: str | None) -> tuple[str | None, str | None]:
    """The media type (lower-case) and charset of a Content-Type, as WHATWG Fetch's
    "extract a MIME type" reads it: a header sent twice comes joined with ", "
    ("text/html, text/html; charset=utf-8"), and the last valid type counts, keeping
    an earlier charset of the same type when it names none. Browsers read it so, and
    servers that send two (a framework's and a proxy's) are tested against them."""
    if not value:
        return None, None
    mime = charset = None
    for part in _outside_quotes(value, ","):
        essence, _, params = part.partition(";")
        essence = essence.strip().lower()
        if not _MEDIA_TYPE.fullmatch(essence) or essence == "*/*":
            continue
        own = None
        for param in _outside_quotes(params, ";"):
            key, _, val = param.strip().partition("=")
            if key.strip().lower() == "charset" and val and own is None:
                # The first of a type's charsets, as WHATWG's parse of a MIME type
                # keeps a parameter's first value.
                own = val.strip().strip("\"'") or None
        if essence != mime or own is not None:
            charset = own
        mime = essence
    return mime, charset


# type "/" subtype, each an RFC 9110 token.
_MEDIA_TYPE = re.compile(r"[!#$%&'*+.^_`|~0-9a-z-]+/[!#$%&'*+.^_`|~0-9a-z-]+")


def _outside_quotes(value: str, separator: str) -> list[str]:
    """``value`` split at ``separator`` where it is not inside a quoted string (a
    parameter's value may hold a comma or a semicolon)."""
    if '"' not in value:  # nearly every header: no walk over its characters
        return value.split(separator)
    parts, start, quoted, escaped = [], 0, False, False
    for i, char in enumerate(value):
        if escaped:
            escaped = False
        elif quoted and char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif char == separator and not quoted:
            parts.append(value[start:i])
            start = i + 1
    parts.append(value[start:])
    return parts


async def fetch(
    client: httpx2.AsyncClient,
    url: str,
    *,
    max_bytes: int,
    accept: Callable[[str | None], bool] | None = None,
    validators: Validators | None = None,
    html_cap: int | None = None,
    gate: BodyGate | None = None,
) -> FetchResult:
    """GET ``url``; keep at most ``max_bytes`` of the (decoded) body, ``html_cap`` of
    an HTML one (a page where a sitemap was asked for is read as pages are), past
    ``gate``'s size once it has its turn. With
    ``accept``, the body of a successful answer whose media type it refuses is not
    read. With ``validators`` (a copy's ETag and Last-Modified), the GET is
    conditional: a page that did not change answers 304 with no body."""
    start = trio.current_time()
    headers = None if validators is None else validators.headers()
    try:
        # build_request and send(stream=True) rather than stream(): the same request,
        # without an async context manager's generator around it (each generator costs
        # trio's hooks), as the body is read below. The crawler's client sends it
        # straight to its transport.
        if isinstance(client, CrawlClient):
            response = await client.get_page(url, headers)
        else:
            request = client.build_request("GET", url, headers=headers)
            response = await client.send(request, stream=True)
        try:
            latency = trio.current_time() - start
            fields = _fields(response.headers)
            ctype, charset = _split_content_type(fields.get("content-type"))
            typed = response.status_code in _TYPED
            # No type named: the body is read and looked at (below) before it is judged.
            sniffed = typed and ctype is None
            refused = accept is not None and typed and not sniffed and not accept(ctype)
            kept, truncated = b"", False
            if html_cap is not None and ctype in HTML_TYPES:
                max_bytes = min(max_bytes, html_cap)
            if not refused:
                # Without a content coding the raw bytes are the decoded ones: one
                # generator fewer, and none from ubipy's transport.
                stream = response.stream
                if "content-encoding" not in fields and type(stream) is PooledBody:
                    response.is_stream_consumed = True
                    kept, truncated = await stream.read_capped(max_bytes, gate)
                else:
                    try:
                        kept, truncated = await _read_coded(response, fields, max_bytes, gate)
                    except BadCoding as exc:
                        coding = fields.get("content-encoding", "")
                        detail = f"Content-Encoding {coding!r}: {exc}"
                        outcome = FetchOutcome.PROTOCOL_ERROR
                        if exc.unsupported:
                            outcome = FetchOutcome.UNSUPPORTED
                        return failed(url, outcome, detail[:300], latency=latency)
                if sniffed:
                    ctype = sniff_type(kept)
                    refused = accept is not None and not accept(ctype)
            if refused:
                detail = f"type not accepted: {ctype or 'none given'}"
                return _answer(
                    url, response, latency, fields, ctype, charset, detail=detail, accepted=False
                )
            return _answer(
                url, response, latency, fields, ctype, charset, body=kept, truncated=truncated
            )
        finally:
            if type(response.stream) is PooledBody:
                # What aclose() does, without the context manager httpx2 wraps around
                # it to name the request in its own errors (a generator a page).
                response.is_closed = True
                await response.stream.aclose()
            else:
                await response.aclose()
    except httpx2.TimeoutException as exc:
        waited = trio.current_time() - start
        return failed(url, FetchOutcome.TIMEOUT, f"timeout: {type(exc).__name__}", latency=waited)
    except AddressRefused as exc:
        return failed(url, FetchOutcome.REFUSED, str(exc))
    except OutOfSockets as exc:
        return failed(url, FetchOutcome.NO_SOCKETS, str(exc))
    except ProxyUnreachable as exc:
        return failed(url, FetchOutcome.PROXY_DOWN, str(exc))
    except (httpx2.HTTPError, OSError, ValueError) as exc:
        bad = _bad_certificate(exc)
        if bad is not None:
            return failed(url, FetchOutcome.CERTIFICATE_ERROR, f"certificate error: {bad}"[:300])
        # Malformed responses and odd sockets surface as OSError and ValueError
        # below httpx.
        return failed(url, _failure(exc), f"{type(exc).__name__}: {exc}"[:300])


async def _read_coded(
    response: httpx2.Response,
    fields: dict[str, str],
    max_bytes: int,
    gate: BodyGate | None = None,
) -> tuple[bytes, bool]:
    """The body as :func:`_read_capped` keeps it, its codings undone: gzip and
    deflate here (:mod:`ubipy.fetch.coding`), both the coded and the decoded bytes
    capped, so that neither a bomb nor junk after the coded stream goes on.
    :class:`BadCoding` when the body does not decode, or is in a coding not decoded
    here."""
    decoder = BodyDecoder(fields.get("content-encoding", ""))
    if not response.is_stream_consumed:
        return await read_decoded(response.aiter_raw(), decoder, max_bytes, gate)
    # Read already (a test's MockTransport): httpx2 decoded what it knew as the
    # response was made, and left any other coding as it came.
    body, truncated = await _read_capped(response.aiter_bytes(), max_bytes, gate)
    if body and decoder.refused is not None:
        raise BadCoding(decoder.refused, unsupported=True)
    return body, truncated


async def _read_capped(
    pieces: AsyncGenerator[bytes, None], max_bytes: int, gate: BodyGate | None = None
) -> tuple[bytes, bool]:
    """The first ``max_bytes`` of ``pieces``, and whether there was more. Closed
    explicitly: leaving the loop early must not strand the generator."""
    kept = CappedBody(max_bytes, gate)
    async with aclosing(pieces) as body:
        async for chunk in body:
            if not kept.add(chunk):
                break
            if kept.waits:
                await kept.wait()
    return kept.result()


# The response headers a result keeps, by their lower-case names.
_KEPT = frozenset(
    {
        "content-type", "content-encoding", "location", "refresh", "last-modified", "etag",
        "retry-after",
    }
)  # fmt: skip
# Headers that hold a URL: one value counts, and bytes not in UTF-8 are kept, escaped.
_URL_HEADERS = frozenset({"location", "refresh"})


def _fields(headers: httpx2.Headers) -> dict[str, str]:
    """The headers a result keeps, in one pass over them: each ``headers.get`` scans
    them all. Repeated headers are joined with ", ", as ``get`` joins them, but for
    Location and Refresh, of which the first counts."""
    out: dict[str, str] = {}
    for raw_name, raw_value in headers.raw:
        name = raw_name.decode("latin-1").lower()
        if name in _KEPT:
            # Each value decoded alone: httpx2 decodes a response's headers alike, and
            # one Latin-1 cookie turned a UTF-8 Location (/café) into mojibake, a
            # URL that is not the one meant (a review found).
            try:
                value = raw_value.decode("utf-8")
            except UnicodeDecodeError:
                # A URL in another encoding: its bytes as the server sent them,
                # escaped (as curl does); read as Latin-1, /caf\xe9 was asked for as
                # /caf%C3%A9, a page the server does not have.
                url = name in _URL_HEADERS
                value = _escaped(raw_value) if url else raw_value.decode("latin-1")
            if name not in out:
                out[name] = value
            elif name not in _URL_HEADERS:
                out[name] = f"{out[name]}, {value}"
            # A second Location is not a list: joined, "/a" and "/b" made the URL
            # "/a,%20/b", admitted and fetched. The first is followed: Chrome
            # refuses such an answer when the two differ, which here would lose
            # the redirect the server meant, and a crawler only needs one target.
    return out


def _escaped(raw: bytes) -> str:
    """``raw`` with every byte past ASCII percent-encoded."""
    return "".join(chr(b) if b < 0x80 else f"%{b:02X}" for b in raw)


def _answer(
    url: str,
    response: httpx2.Response,
    latency: float,
    fields: dict[str, str],
    ctype: str | None,
    charset: str | None,
    *,
    body: bytes = b"",
    truncated: bool = False,
    detail: str | None = None,
    accepted: bool = True,
) -> FetchResult:
    """The result of a request that got an answer, whatever its status."""
    return FetchResult(
        url=url,
        status=response.status_code,
        content_type=ctype,
        charset=charset,
        location=fields.get("location"),
        refresh=fields.get("refresh"),
        last_modified=fields.get("last-modified"),
        etag=fields.get("etag"),
        retry_after=fields.get("retry-after"),
        body=body,
        truncated=truncated,
        outcome=FetchOutcome.OK,
        detail=detail,
        accepted=accepted,
        latency=latency,
        http_version=response.http_version,
        reason=response.reason_phrase,
        raw_headers=tuple(response.headers.raw),
        request_headers=tuple(sent_headers(response)),
    )


def _bad_certificate(exc: Exception) -> str | None:
    """Why the server's certificate was refused, if that is how the request failed
    (ubipy's transport says so; another's leaves the ssl error as the cause)."""
    if isinstance(exc, CertificateError):
        return str(exc)
    bad = certificate_failure(exc)
    return None if bad is None else bad.verify_message or str(bad)


def _failure(exc: Exception) -> FetchOutcome:
    # ConnectError is a NetworkError too: it is looked for first.
    if isinstance(exc, httpx2.ConnectError | httpx2.ProxyError | httpx2.UnsupportedProtocol):
        return FetchOutcome.CONNECT_ERROR
    if isinstance(
        exc, httpx2.ProtocolError | httpx2.DecodingError | httpx2.TooManyRedirects | ValueError
    ):
        return FetchOutcome.PROTOCOL_ERROR
    return FetchOutcome.NETWORK_ERROR


def failed(
    url: str, outcome: FetchOutcome, detail: str, *, latency: float | None = None
) -> FetchResult:
    """The result of a request that got no usable response (``latency``: the seconds
    waited for one, for a time-out)."""
    return FetchResult(
        url=url,
        status=None,
        content_type=None,
        charset=None,
        location=None,
        last_modified=None,
        etag=None,
        retry_after=None,
        body=b"",
        truncated=False,
        outcome=outcome,
        detail=detail,
        latency=latency,
    )


def processing_failed(result: FetchResult) -> FetchResult:
    """A page whose answer broke the parser: a bad page, not a dead peer. Stored as an
    error with its status, so that it is not fetched again."""
    return dataclasses.replace(
        result, body=b"", outcome=FetchOutcome.PROCESSING_FAILED, detail="processing failed"
    )
