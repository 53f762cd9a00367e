"""Which address a request goes to when a name has several, or moves: the one the
resolver pins the name to now (a kept-alive connection to the old one is not taken),
the next when one does not answer, and no more of an answer than a few kept."""

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

    def __init__(self, close: bool = False, latency: float = 0.0) -> None:
        self.close = close
        self.latency = latency  # before each answer
        self.port = 0
        self.served: list[str] = []  # the address of each request
        self.connections: list[str] = []  # the address of each connection
        self.spans: list[tuple[float, float]] = []  # each request's, on trio's clock

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
                    start = trio.current_time()
                    await trio.sleep(self.latency)
                    self.spans.append((start, trio.current_time()))
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


async def test_an_address_other_than_the_one_a_host_is_filed_under_is_not_tried(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The per-IP rule and the cluster's leases hold a host's requests by its first
    address. A page linking five names, each answering [a dead address of its own, the
    victim's], had five requests at once at the victim when the next address was tried
    (a review): the first address alone is, and the victim is never asked."""
    site = Site()
    await site.serve(["127.0.0.1"], nursery)
    tried = _recording(monkeypatch)
    names = Table({f"n{i}.test": [f"127.0.0.{i + 2}", "127.0.0.1"] for i in range(5)})
    resolver = Resolver(ttl=60.0, lookup=names, allow_private=True)
    async with httpx2.AsyncClient(transport=PooledTransport(resolver=resolver)) as client:
        results = [
            await fetch(client, f"http://n{i}.test:{site.port}/", max_bytes=1000) for i in range(5)
        ]
    assert all(r.status is None for r in results) and site.served == []
    assert tried == [f"127.0.0.{i + 2}" for i in range(5)]


async def _served(
    site: Site,
    nursery: trio.Nursery,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    answer: list[str],
    *,
    refuse: str,
    ttl: float,
) -> tuple[list[str], Resolver, str]:
    """``site`` served on 127.0.0.1 alone, ``name`` answering ``answer``, connections
    to ``refuse`` refused (a dead server's): the addresses connected to, the resolver,
    the name's URL."""
    await site.serve(["127.0.0.1"], nursery)
    tried = _recording(monkeypatch, refuse={refuse})
    resolver = Resolver(ttl=ttl, lookup=Table({name: answer}), allow_private=True)
    return tried, resolver, f"http://{name}:{site.port}/"


async def test_a_dead_first_address_goes_to_the_back_and_the_next_request_the_next(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """None of the addresses of the key a host is filed under answered: they go to
    the back of its name's answer, and the next address, another server's, is the
    name's (the DNS stage files the host under it again). Kept first, a dead first
    address failed every request until the answer expired, an hour."""
    site = Site()
    tried, resolver, url = await _served(
        site, nursery, monkeypatch, "rr.test", ["127.0.0.3", "127.0.0.1"],
        refuse="127.0.0.3", ttl=3600.0,
    )  # fmt: skip
    async with httpx2.AsyncClient(transport=PooledTransport(resolver=resolver)) as client:
        first = await fetch(client, url, max_bytes=1000)
        assert first.outcome is FetchOutcome.CONNECT_ERROR
        assert resolver.address_of(f"rr.test:{site.port}") == "127.0.0.1"
        assert await _text(client, url) == "127.0.0.1"
    assert tried == ["127.0.0.3", "127.0.0.1"] and resolver.total_lookups == 1


async def test_the_same_servers_other_address_is_tried_and_pinned(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An IPv4 address and its IPv6 mapped form are one server, one key: the second
    is tried when the first does not answer, and is the name's from then on."""
    site = Site(close=True)
    tried, resolver, url = await _served(
        site, nursery, monkeypatch, "two.test", ["::ffff:127.0.0.1", "127.0.0.1"],
        refuse="::ffff:7f00:1", ttl=60.0,
    )  # fmt: skip
    async with httpx2.AsyncClient(transport=PooledTransport(resolver=resolver)) as client:
        for _ in range(2):
            assert await _text(client, url) == "127.0.0.1"
    assert tried == ["::ffff:7f00:1", "127.0.0.1", "127.0.0.1"]
    pinned = resolver.pinned("two.test")
    assert pinned is not None and pinned.addresses == ("127.0.0.1", "::ffff:7f00:1")


async def test_only_addresses_that_may_be_reached_are_tried(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The public address does not answer: the private ones of the same answer are not
    # tried in its place (each address is checked, not only the first).
    tried = _recording(monkeypatch, refuse={"93.184.216.34", "93.184.216.35"})
    names = Table({"mixed.test": ["93.184.216.34", "10.0.0.5", "127.0.0.1", "93.184.216.35"]})
    resolver = Resolver(lookup=names)
    async with httpx2.AsyncClient(transport=PooledTransport(resolver=resolver)) as client:
        result = await fetch(client, "http://mixed.test:8/", max_bytes=1000)
    assert result.outcome is not FetchOutcome.OK and result.status is None
    assert tried == ["93.184.216.34"]  # nor the other public one: another server


async def test_an_address_that_does_not_answer_gets_its_share_of_the_time_only(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A black-holed address (no refusal, no answer) takes its share of the connect
    time-out, and the next gets the rest: not the whole time-out each."""
    started: list[tuple[str, float]] = []

    async def black_hole(address: str, port: int, **_: object) -> trio.SocketStream:
        started.append((address, trio.current_time()))
        if address != "64:ff9b::7f00:1":
            await trio.sleep_forever()
        raise OSError("connection refused, after the others")

    monkeypatch.setattr(trio, "open_tcp_stream", black_hole)
    # One server's three forms (one key): tried in turn.
    names = Table({"slow.test": ["127.0.0.1", "::ffff:7f00:1", "64:ff9b::7f00:1"]})
    resolver = Resolver(lookup=names, allow_private=True)
    transport = PooledTransport(resolver=resolver)
    async with httpx2.AsyncClient(transport=transport, timeout=9.0) as client:
        result = await fetch(client, "http://slow.test/", max_bytes=1000)
    assert result.status is None
    assert [(a, round(t, 6)) for a, t in started] == [
        ("127.0.0.1", 0.0), ("::ffff:7f00:1", 3.0), ("64:ff9b::7f00:1", 6.0),
    ]  # fmt: skip
    assert "127.0.0.1: no answer" in (result.detail or "")


def _recording(monkeypatch: pytest.MonkeyPatch, refuse: set[str] | None = None) -> list[str]:
    """The addresses connections are opened to, in order; those in ``refuse`` refuse."""
    tried: list[str] = []
    real = trio.open_tcp_stream

    async def recording(address: str, port: int, **kwargs: Any) -> trio.SocketStream:
        tried.append(address)
        if refuse and address in refuse:
            raise ConnectionRefusedError(111, "Connection refused")
        return await real(address, port, **kwargs)

    monkeypatch.setattr(trio, "open_tcp_stream", recording)
    return tried


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


async def test_a_dead_address_that_answers_again_leaves_the_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    names = Table({"rr.test": ["192.0.2.1", "192.0.2.2"]})
    resolver = Resolver(ttl=60.0, lookup=names, allow_private=True)
    assert (await resolver.resolve("rr.test")).address == "192.0.2.1"
    resolver.demote("rr.test", ["192.0.2.1"])
    assert (await resolver.resolve("rr.test")).addresses == ("192.0.2.2", "192.0.2.1")
    await trio.sleep(61.0)
    assert (await resolver.resolve("rr.test")).address == "192.0.2.2"
    resolver.demote("rr.test", ["192.0.2.2"])  # it died; the first answered
    await trio.sleep(61.0)
    assert (await resolver.resolve("rr.test")).addresses == ("192.0.2.1", "192.0.2.2")
    assert resolver.total_lookups == 3
