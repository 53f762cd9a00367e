"""The one place an HTTP client is created.

Everything that touches the web goes through the client made here, so its
time-outs, identity and transport are the same everywhere, and a test can hand
in a transport (``httpx2.MockTransport``) to serve odd responses. Its TLS context is
the process's one (:func:`~ubipy.fetch.tls.tls_context`), whatever the number
of clients and connections.
"""

from __future__ import annotations

import http.cookiejar
import urllib.request
from typing import Any

import httpx2

from ubipy.config import FetchConfig
from ubipy.fetch.dns import Resolver
from ubipy.fetch.transport import PooledTransport, plain_get

# The content codings asked for: those zlib decodes (always there) and tests cover. Without
# it httpx2 asks for whatever its decoders find importable ("br, zstd" too), and a
# stray module decided what servers sent: brotlipy's brotli, pulled in by a test
# dependency, lacks the API httpx2 calls, and every page sent as br killed the peer.
ACCEPT_ENCODING = "gzip, deflate"


class CrawlClient(httpx2.AsyncClient):
    """httpx2's client as :func:`make_client` makes it, with a direct way for a page's GET
    to its transport (:meth:`get_page`).

    What the client layer adds to a request is fixed when this one is made: no base
    URL, no cookies kept, no redirects followed, no proxy or mount from the
    environment. A page's GET (:func:`~ubipy.fetch.fetcher.fetch`) therefore needs none
    of ``build_request`` (a second URL parse, header and cookie merges) or ``send``
    (the auth and redirect steps, which build the next request of every 3xx answer,
    and httpx2's own log line a request): about 45-65 us of a fetch's 130-215 outside
    the transport on the slowest machine measured (issue #19, bench/client_layer.py).
    Given ubipy's own transport, a plain URL's GET (:func:`~ubipy.fetch.transport.plain_get`)
    needs no httpx2 ``Request`` either, whose URL parser checks each character in
    Python: the same bytes go out, 4% fewer instructions a page of a crawl.
    Everything else, tests' ``MockTransport`` included, is httpx2's as ever."""

    def __init__(self, *, transport: httpx2.AsyncBaseTransport, **kwargs: Any) -> None:
        super().__init__(transport=transport, **kwargs)
        self._page_transport = transport

    async def get_page(self, url: str, headers: dict[str, str] | None = None) -> httpx2.Response:
        """What ``send(build_request("GET", url, headers=headers), stream=True)`` gives
        (the same request, header for header), straight from the transport. The
        request's headers as sent: :func:`sent_headers`."""
        if not self._as_made():
            return await self.send(self.build_request("GET", url, headers=headers), stream=True)
        merged = self.headers
        if headers:
            merged = httpx2.Headers(merged)
            merged.update(headers)
        transport = self._page_transport
        if (
            type(transport) is PooledTransport
            and (plain := plain_get(url)) is not None
            and "host" not in merged  # httpx2 adds its own Host only when none is given
        ):
            # ubipy's transport sends a plain URL's GET without an httpx2 Request: the
            # same bytes, without its URL parser. The answer has no request; its
            # extensions say what was sent.
            return await transport.get(plain, merged.raw, self.timeout.as_dict())
        request = httpx2.Request(
            "GET", url, headers=merged, extensions={"timeout": self.timeout.as_dict()}
        )
        response = await transport.handle_async_request(request)
        response.request = request
        return response

    def _as_made(self) -> bool:
        """Whether the client still adds nothing to a request but its headers and
        time-outs: an auth, event hooks, redirects, parameters, a base URL or a cookie
        jar given to it after it was made send its requests httpx2's way."""
        return (
            self.auth is None
            and not self.follow_redirects
            and not any(self.event_hooks.values())
            and not self.params
            and not str(self.base_url)
            and isinstance(self.cookies.jar, _NoCookies)
        )


def sent_headers(response: httpx2.Response) -> list[tuple[bytes, bytes]]:
    """The headers of the request ``response`` answers, as sent."""
    sent: list[tuple[bytes, bytes]] | None = response.extensions.get("request_headers")
    return response.request.headers.raw if sent is None else sent


class _NoCookies(http.cookiejar.CookieJar):
    """A jar that keeps nothing: each request goes out as from a stranger, whatever
    earlier answers set (as Nutch and StormCrawler fetch by default). A kept jar would
    hold a cookie of every host that sets one, for as long as the peer runs, and httpx
    walks every domain in it to build each request (100,000 of them: 0.6 ms a request,
    100 MB); and a host handed to another peer would not take its cookies along.
    A response's Set-Cookie headers are still in its WARC record."""

    def extract_cookies(self, response: Any, request: urllib.request.Request) -> None:
        return

    def set_cookie(self, cookie: http.cookiejar.Cookie) -> None:
        return


def make_client(
    config: FetchConfig,
    agent: str,
    *,
    transport: httpx2.AsyncBaseTransport | None = None,
    resolver: Resolver | None = None,
) -> CrawlClient:
    """``resolver``: the DNS stage's, whose checked answers direct connections use."""
    timeout = httpx2.Timeout(
        connect=config.connect_timeout,
        read=config.read_timeout,
        write=config.read_timeout,
        # Waiting for a pooled connection is bounded by our own concurrency
        # limit, not by a timer that would turn a busy moment into errors.
        pool=None,
    )
    if transport is None:
        transport = PooledTransport(
            proxy=config.proxy,
            connect_timeout=config.connect_timeout,
            read_timeout=config.read_timeout,
            ca_bundle=config.ca_bundle,
            resolver=resolver,
        )
    return CrawlClient(
        headers={
            "User-Agent": agent,
            "Accept": "text/html,application/xhtml+xml,*/*;q=0.5",
            "Accept-Encoding": ACCEPT_ENCODING,
        },
        timeout=timeout,
        # Redirects are discovered URLs, routed and scheduled like any other.
        follow_redirects=False,
        # Environment proxies would silently change where requests go.
        trust_env=False,
        cookies=_NoCookies(),
        transport=transport,
    )
