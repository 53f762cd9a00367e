"""Shared fixtures: a served synthetic web and an httpx2 client that goes through it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import pytest
import trio

from ubipy.synthweb import SyntheticWeb, SynthServer, WebSpec, serve

USER_AGENT = "ubipy/0.1.0 (+https://github.com/ubipy/ubipy; peer=ab12cd34)"


@pytest.fixture
async def server(nursery: trio.Nursery) -> SynthServer:
    web = SyntheticWeb(WebSpec())
    result: SynthServer = await nursery.start(serve, web)
    return result


@pytest.fixture
async def client(server: SynthServer) -> AsyncIterator[httpx2.AsyncClient]:
    # trust_env=False: an ambient HTTP_PROXY/NO_PROXY must not redirect loopback tests.
    async with httpx2.AsyncClient(
        proxy=server.proxy_url, trust_env=False, headers={"User-Agent": USER_AGENT}
    ) as c:
        yield c
