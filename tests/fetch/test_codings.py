"""The fetcher against content codings: what it asks for, and what servers send
anyway (found by a review: a br body killed the peer)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx2
import trio
import trio.testing

from ubipy.config import FetchConfig
from ubipy.fetch.client import make_client
from ubipy.fetch.fetcher import FetchOutcome, fetch


class _Pieces(httpx2.AsyncByteStream):
    """A body that arrives in pieces, as from a socket (not read in advance, so the
    fetcher decodes it, not httpx2's Response)."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece


def _coded(coding: str, *pieces: bytes, status: int = 200) -> httpx2.MockTransport:
    headers = [("Content-Type", "text/html"), ("Content-Encoding", coding)]
    return httpx2.MockTransport(
        lambda _: httpx2.Response(status, headers=headers, stream=_Pieces(*pieces))
    )


def _client(transport: httpx2.AsyncBaseTransport) -> httpx2.AsyncClient:
    return make_client(FetchConfig(), "ubipy/test", transport=transport)


async def test_only_the_codings_ubipy_decodes_are_asked_for() -> None:
    seen: list[str | None] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.get("accept-encoding"))
        return httpx2.Response(200, content=b"x")

    async with _client(httpx2.MockTransport(handler)) as client:
        await fetch(client, "http://a.test/", max_bytes=100)
        await fetch(client, "http://a.test/p%20q", max_bytes=100)  # httpx2's way
    # Before: httpx2's default, "gzip, deflate, br, zstd" as far as modules were found.
    assert seen == ["gzip, deflate", "gzip, deflate"]


async def test_a_body_in_a_coding_not_asked_for_is_a_protocol_error() -> None:
    # Served anyway: in the dev venv httpx2's brotli decoder met brotlipy's module and
    # raised TypeError out of fetch(), which killed the worker and the peer.
    async with _client(_coded("br", b"\x1b\x0e\x00\xf8\xa5@\x02", b"<html>")) as client:
        r = await fetch(client, "http://a.test/", max_bytes=1000)
    assert r.outcome is FetchOutcome.PROTOCOL_ERROR and r.body == b""
    assert r.detail is not None and "br" in r.detail


async def test_cancelling_a_coded_read_is_not_a_decoding_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Stalled(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b"\x1f\x8b"
            await trio.sleep_forever()

    headers = [("Content-Encoding", "gzip")]
    transport = httpx2.MockTransport(
        lambda _: httpx2.Response(200, headers=headers, stream=Stalled())
    )
    async with _client(transport) as client:
        with trio.move_on_after(5) as scope:
            await fetch(client, "http://a.test/", max_bytes=1000)
    assert scope.cancelled_caught  # the crawler's fetch deadline still ends it
