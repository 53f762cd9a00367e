"""The one place an HTTP client is created.

Everything that touches the web goes through the client made here, so its
time-outs, identity and transport are the same everywhere, and a test can hand
in a transport (``httpx2.MockTransport``) to serve odd responses.
"""

from __future__ import annotations

import httpx2

from ubipy.config import CrawlConfig


def make_client(
    config: CrawlConfig,
    agent: str,
    *,
    transport: httpx2.AsyncBaseTransport | None = None,
) -> httpx2.AsyncClient:
    timeout = httpx2.Timeout(
        connect=config.connect_timeout,
        read=config.read_timeout,
        write=config.read_timeout,
        # Waiting for a pooled connection is bounded by our own concurrency
        # limit, not by a timer that would turn a busy moment into errors.
        pool=None,
    )
    limits = httpx2.Limits(
        max_connections=config.concurrency,
        max_keepalive_connections=config.concurrency,
        keepalive_expiry=15.0,
    )
    return httpx2.AsyncClient(
        headers={"User-Agent": agent, "Accept": "text/html,application/xhtml+xml,*/*;q=0.5"},
        timeout=timeout,
        limits=limits,
        # Redirects are discovered URLs, routed and scheduled like any other.
        follow_redirects=False,
        # Environment proxies would silently change where requests go.
        trust_env=False,
        proxy=config.proxy if transport is None else None,
        transport=transport,
    )
