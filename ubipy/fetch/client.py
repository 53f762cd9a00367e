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
from ubipy.fetch.transport import PooledTransport


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
) -> httpx2.AsyncClient:
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
    return httpx2.AsyncClient(
        headers={"User-Agent": agent, "Accept": "text/html,application/xhtml+xml,*/*;q=0.5"},
        timeout=timeout,
        # Redirects are discovered URLs, routed and scheduled like any other.
        follow_redirects=False,
        # Environment proxies would silently change where requests go.
        trust_env=False,
        cookies=_NoCookies(),
        transport=transport,
    )
