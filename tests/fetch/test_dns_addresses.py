"""Which address a request goes to when a name moves: the one the resolver pins the
name to now (a kept-alive connection to the old one is not taken); and no more of an
answer than a few addresses kept."""

from __future__ import annotations

import socket
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from tests.fetch.test_transport import _read_head
from ubipy.fetch import FetchOutcome, dns, fetch
from ubipy.fetch.dns import DnsFailure, Resolver
from ubipy.fetch.transport import PooledTransport


class Site:
    """One port served on several loopback addresses; each request is logged with
    the address it came to. ``close``: answer with Connection: close."""

    def __init__(self, close: bool = False) -> None:
        self.close = close
        self.port = 0
        self.served: list[str] = []  # the address of each request
        self.connections: list[str] = []  # the address of each connection

    async def serve(self, addresses: list[str], nursery: trio.Nursery) -> None:
        for address in addresses:
            listeners = await trio.open_tcp_listeners(self.port, host=address)
            self.port = listeners[0].socket.getsockname()[1]
            handler = self._handler(address)
            nursery.start_soon(trio.serve_listeners, handler, listeners)

    def _handler(self, address: str) -> Any:
        async def handle(stream: trio.SocketStream) -> None:
            self.connections.append(address)
            async with stream:
                while await _read_head(stream):
                    self.served.append(address)
                    body = address.encode()
                    head = b"Connection: close\r\n" if self.close else b""
                    await stream.send_all(
                        b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s"
                        % (head, len(body), body)
                    )
                    if self.close:
                        return

        return handle


class Table:
    """A system resolver answering from a table the test changes."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table

    async def __call__(self, name: str) -> list[str]:
        if name not in self.table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return self.table[name]


async def _text(client: httpx2.AsyncClient, url: str) -> str:
    response = await client.get(url)
    await response.aread()
    return response.text


async def test_after_a_name_moved_its_requests_reach_the_new_address(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    """Its answer expired and looked up again (the DNS stage does it before the host's
    next request, and keys the per-IP rule on what it gives), a name that moved is
    asked at its new address: the kept-alive connection to the old one is closed.
    Its requests went on to the old one for as long as the server kept it open."""
    site = Site()
    await site.serve(["127.0.0.1", "127.0.0.2"], nursery)
    names = Table({"a.test": ["127.0.0.1"]})
    resolver = Resolver(ttl=10.0, lookup=names, allow_private=True)
    host, url = f"a.test:{site.port}", f"http://a.test:{site.port}/"
    async with httpx2.AsyncClient(transport=PooledTransport(resolver=resolver)) as client:
        assert (await resolver.resolve(host)).address == "127.0.0.1"
        assert await _text(client, url) == "127.0.0.1"
        names.table["a.test"] = ["127.0.0.2"]
        mock_clock.jump(11.0)  # within the connection's minute idle
        assert (await resolver.resolve(host)).address == "127.0.0.2"  # the DNS stage's
        for _ in range(3):
            assert await _text(client, url) == "127.0.0.2"
    assert site.served == ["127.0.0.1", *["127.0.0.2"] * 3]
    assert site.connections == ["127.0.0.1", "127.0.0.2"]


async def test_a_name_looked_up_again_at_the_same_address_keeps_its_connection(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    site = Site()
    await site.serve(["127.0.0.1"], nursery)
    resolver = Resolver(ttl=60.0, lookup=Table({"a.test": ["127.0.0.1"]}), allow_private=True)
    url = f"http://a.test:{site.port}/"
    async with httpx2.AsyncClient(transport=PooledTransport(resolver=resolver)) as client:
        for _ in range(3):
            assert await _text(client, url) == "127.0.0.1"
            mock_clock.jump(40.0)  # past the TTL every other time: the transport looks up
    assert resolver.total_lookups == 2
    assert site.connections == ["127.0.0.1"]


async def test_a_name_moved_to_an_address_not_allowed_is_refused_not_reused(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    """A seed's name is allowed the private addresses of its first lookup only: moved
    to another (DNS rebinding), its kept-alive connection is not taken either."""
    site = Site()
    await site.serve(["127.0.0.1"], nursery)
    names = Table({"a.test": ["127.0.0.1"]})
    resolver = Resolver(ttl=10.0, lookup=names)
    host, url = f"a.test:{site.port}", f"http://a.test:{site.port}/"
    assert resolver.exempt(host, await resolver.resolve(host))
    async with httpx2.AsyncClient(transport=PooledTransport(resolver=resolver)) as client:
        assert await _text(client, url) == "127.0.0.1"
        names.table["a.test"] = ["10.0.0.5"]
        mock_clock.jump(11.0)  # within the connection's minute idle
        result = await fetch(client, url, max_bytes=1000)
    assert result.outcome is FetchOutcome.REFUSED
    assert site.served == ["127.0.0.1"]


async def test_an_answer_of_thousands_of_addresses_keeps_a_few(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A hostile zone may answer each name with thousands of addresses (about 4,000
    fit a DNS answer over TCP): every one was kept, and judged at every resolve.
    2,000 such names held 511 MiB (a review); the bound of names, 50 GiB."""
    judged: list[str] = []
    real = dns.is_public

    def counting(address: str) -> bool:
        judged.append(address)
        return real(address)

    monkeypatch.setattr(dns, "is_public", counting)
    many = [f"11.0.{k >> 8}.{k & 255}" for k in range(4000)]
    private_first = [f"10.0.{k >> 8}.{k & 255}" for k in range(20)] + many
    names = Table({"many.test": many, "mixed.test": private_first})
    resolver = Resolver(lookup=names)
    for _ in range(3):
        answer = await resolver.resolve("many.test")
        assert answer.address == "11.0.0.0"
    assert 1 < len(answer.addresses) <= 8 and answer.addresses == tuple(
        many[: len(answer.addresses)]
    )
    mixed = await resolver.resolve("mixed.test")
    assert mixed.address == "11.0.0.0" and 1 < len(mixed.addresses) <= 8
    assert all(len(answer.addresses) <= 8 for answer, _ in resolver._cache.values())
    assert len(judged) <= 100  # not 4,000 a lookup, nor any at each resolve
    # None public: the first few are kept, for a seed on them (refused otherwise).
    resolver = Resolver(lookup=Table({"inside.test": [f"10.1.0.{k}" for k in range(200)]}))
    assert (await resolver.resolve("inside.test")).error is DnsFailure.REFUSED
    answer = await resolver.resolve("inside.test")
    assert resolver.exempt("inside.test", answer)
    allowed = await resolver.resolve("inside.test")
    assert allowed.address == "10.1.0.0" and 1 < len(allowed.addresses) <= 8
