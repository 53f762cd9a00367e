"""The one place an HTTP client is created.

Everything that touches the web goes through the client made here, so its
time-outs, identity and transport are the same everywhere, and a test can hand
in a transport (``httpx2.MockTransport``) to serve odd responses. Its TLS context is
the process's one (:func:`~ubipy.fetch.tls.tls_context`), whatever the number
of clients and connections.
"""

from __future__ import annotations

import httpx2

from ubipy.config import FetchConfig
from ubipy.fetch.dns import Resolver
from ubipy.fetch.transport import PooledTransport


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
        transport=transport,
    )
