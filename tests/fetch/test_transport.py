"""The pooled h11 transport against real sockets on loopback."""

from __future__ import annotations

import contextlib
import itertools
import resource
import socket
import ssl
import struct
from collections.abc import Awaitable, Callable

import httpx2
import pytest
import trio

from tests.spinning import no_endless_spin
from ubipy.config import FetchConfig
from ubipy.fetch import fetch, make_client
from ubipy.fetch.http1 import ResponseReader
from ubipy.fetch.sockets import DirectSocketStream
from ubipy.fetch.tls import TlsStream
from ubipy.fetch.transport import (
    PooledBody,
    PooledTransport,
    _Connection,
    _Origin,
    _origin_of,
    default_max_idle,
    plain_get,
)

Behaviour = Callable[[trio.SocketStream, int], Awaitable[None]]

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"


async def _read_head(stream: trio.SocketStream) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(4096)
        if not chunk:
            return data
        data += chunk
    return data


class Server:
    """A raw loopback server whose n-th connection behaves as the test says."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.connections = 0
        self.heads: list[bytes] = []
        self.port = 0

    async def serve(self, *, task_status: trio.TaskStatus[None]) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        async with stream:
            await self.behaviour(stream, self.connections)


async def keep_alive(stream: trio.SocketStream, _: int) -> None:
    while head := await _read_head(stream):
        assert head.startswith(b"GET ")
        await stream.send_all(OK)


async def _get(client: httpx2.AsyncClient, url: str) -> httpx2.Response:
    response = await client.get(url)
    await response.aclose()
    return response


async def test_requests_to_one_origin_share_a_kept_alive_connection(nursery: trio.Nursery) -> None:
    server = Server(keep_alive)
    await nursery.start(server.serve)
    async with httpx2.AsyncClient(transport=PooledTransport()) as client:
        for _ in range(5):
            r = await client.get(f"http://127.0.0.1:{server.port}/x")
            assert r.status_code == 200 and r.text == "hello"
    assert server.connections == 1


@pytest.mark.parametrize(("keep_alive_header", "connections"), [
    (b"Keep-Alive: timeout=1, max=100\r\n", 3),  # a second less: not kept at all
    (b"Keep-Alive: timeout=60\r\n", 1),
    (b"Keep-Alive: max=100\r\n", 1),
])  # fmt: skip
async def test_a_connection_is_kept_a_second_less_than_the_server_keeps_it(
    nursery: trio.Nursery, keep_alive_header: bytes, connections: int
) -> None:
    # Reused as the server closed it (Apache's 5 s against a Crawl-delay of 5), a
    # request was cut: a third of them in a review's test.
    answer = OK.replace(b"\r\n", b"\r\n" + keep_alive_header, 1)

    async def saying(stream: trio.SocketStream, _: int) -> None:
        while await _read_head(stream):
            await stream.send_all(answer)

    server = Server(saying)
    await nursery.start(server.serve)
    async with httpx2.AsyncClient(transport=PooledTransport()) as client:
        for _ in range(3):
            assert (await _get(client, f"http://127.0.0.1:{server.port}/x")).status_code == 200
    assert server.connections == connections


async def test_a_head_of_100_kb_is_read(nursery: trio.Nursery) -> None:
    # Large Content-Security-Policy, Link and Set-Cookie sets: refused past 64 KiB.
    cookies = b"".join(b"Set-Cookie: c%d=%s\r\n" % (i, b"v" * 4000) for i in range(25))

    async def big_head(stream: trio.SocketStream, _: int) -> None:
        await _read_head(stream)
        await stream.send_all(OK.replace(b"\r\n", b"\r\n" + cookies, 1))

    server = Server(big_head)
    await nursery.start(server.serve)
    async with httpx2.AsyncClient(transport=PooledTransport()) as client:
        response = await client.get(f"http://127.0.0.1:{server.port}/x")
    assert (response.status_code, response.text) == (200, "hello")


async def test_a_utf8_location_is_read_whatever_the_other_headers_bytes(
    nursery: trio.Nursery,
) -> None:
    # One Latin-1 cookie had every header decoded as Latin-1: /café became /cafÃ©.
    async def moved(stream: trio.SocketStream, _: int) -> None:
        await _read_head(stream)
        await stream.send_all(
            b"HTTP/1.1 301 Moved\r\nLocation: /caf\xc3\xa9\r\nSet-Cookie: n=Jos\xe9\r\n"
            b"Content-Length: 0\r\n\r\n"
        )

    server = Server(moved)
    await nursery.start(server.serve)
    async with make_client(FetchConfig(), "t", transport=PooledTransport()) as client:
        result = await fetch(client, f"http://127.0.0.1:{server.port}/", max_bytes=1000)
    assert result.location == "/café"


async def test_a_connection_the_server_closed_while_idle_is_not_reused(
    nursery: trio.Nursery,
) -> None:
    closed = [trio.Event() for _ in range(3)]

    async def one_per_connection(stream: trio.SocketStream, n: int) -> None:
        await _read_head(stream)
        # Keep-alive promised, then the server closes: the pool must notice.
        await stream.send_all(OK)
        await stream.aclose()
        closed[n - 1].set()

    server = Server(one_per_connection)
    await nursery.start(server.serve)
    async with httpx2.AsyncClient(transport=PooledTransport()) as client:
        for i in range(3):
            r = await client.get(f"http://127.0.0.1:{server.port}/x")
            assert r.text == "hello"
            await closed[i].wait()
    assert server.connections == 3


async def test_a_silent_server_times_out(nursery: trio.Nursery) -> None:
    silent = trio.Event()

    async def hang(stream: trio.SocketStream, _: int) -> None:
        await _read_head(stream)
        await silent.wait()

    server = Server(hang)
    await nursery.start(server.serve)
    transport = PooledTransport(read_timeout=0.2)
    async with httpx2.AsyncClient(transport=transport, timeout=0.2) as client:
        with pytest.raises(httpx2.ReadTimeout):
            await client.get(f"http://127.0.0.1:{server.port}/x")
    silent.set()


@pytest.mark.parametrize("cut", ["time-out", "cancelled"])
async def test_a_request_cut_short_resets_its_connection(nursery: trio.Nursery, cut: str) -> None:
    """Closed plainly (a FIN), a request queued behind a dead path was sent on by the
    kernel and reached its server 54 s after the peer had given the host up (QA): a
    request the crawler cuts short resets its connection, whatever it left unsent."""
    ended: list[str] = []
    done = trio.Event()

    async def hang(stream: trio.SocketStream, _: int) -> None:
        await _read_head(stream)
        try:
            ended.append("closed" if await stream.receive_some(10) == b"" else "data")
        except trio.BrokenResourceError:
            ended.append("reset")
        done.set()

    server = Server(hang)
    await nursery.start(server.serve)
    transport = PooledTransport(read_timeout=0.2 if cut == "time-out" else 60.0)
    async with httpx2.AsyncClient(transport=transport, timeout=None) as client:
        url = f"http://127.0.0.1:{server.port}/x"
        if cut == "time-out":
            with pytest.raises(httpx2.ReadTimeout):
                await client.get(url)
        else:
            with trio.move_on_after(0.3) as abandoned:  # as a pause abandons it
                await client.get(url)
            assert abandoned.cancelled_caught
    with trio.fail_after(5):
        await done.wait()
    assert ended == ["reset"]


async def test_a_refused_connection_is_a_connect_error() -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await listeners[0].aclose()
    async with httpx2.AsyncClient(transport=PooledTransport()) as client:
        with pytest.raises(httpx2.ConnectError):
            await client.get(f"http://127.0.0.1:{port}/")


async def test_a_body_left_unread_does_not_poison_the_pool(nursery: trio.Nursery) -> None:
    async def big_then_ok(stream: trio.SocketStream, n: int) -> None:
        while head := await _read_head(stream):
            if b"/big" in head:
                body = b"x" * 200_000
                # The client hangs up mid-body, as it should.
                with contextlib.suppress(trio.BrokenResourceError):
                    await stream.send_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 200000\r\n\r\n" + body
                    )
                return
            else:
                await stream.send_all(OK)

    server = Server(big_then_ok)
    await nursery.start(server.serve)
    async with httpx2.AsyncClient(transport=PooledTransport()) as client:
        async with (
            client.stream("GET", f"http://127.0.0.1:{server.port}/big") as r,
            contextlib.aclosing(r.aiter_raw()) as chunks,
        ):
            async for _ in chunks:
                break  # stop early, like a size cap
        r2 = await client.get(f"http://127.0.0.1:{server.port}/small")
        assert r2.text == "hello"
    assert server.connections == 2


async def test_through_a_proxy_http_targets_are_absolute(nursery: trio.Nursery) -> None:
    server = Server(keep_alive)

    async def record(stream: trio.SocketStream, _: int) -> None:
        while head := await _read_head(stream):
            server.heads.append(head)
            await stream.send_all(OK)

    server.behaviour = record
    await nursery.start(server.serve)
    transport = PooledTransport(proxy=f"http://127.0.0.1:{server.port}")
    async with httpx2.AsyncClient(transport=transport) as client:
        await _get(client, "http://h001.synth.test/a?b=1")
        await _get(client, "http://h002.synth.test:8080/c")
    assert server.heads[0].startswith(b"GET http://h001.synth.test/a?b=1 HTTP/1.1\r\n")
    assert b"\r\nhost: h001.synth.test\r\n" in server.heads[0].lower()
    assert server.heads[1].startswith(b"GET http://h002.synth.test:8080/c HTTP/1.1\r\n")


async def test_a_connection_is_kept_a_minute_for_a_crawl_that_comes_back_late(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    """A polite crawl of many hosts comes back to each after going round the others:
    half a minute later its connection is still there; past a minute it is not."""
    server = Server(keep_alive)
    await nursery.start(server.serve)
    async with httpx2.AsyncClient(transport=PooledTransport()) as client:
        url = f"http://127.0.0.1:{server.port}/x"
        await _get(client, url)
        mock_clock.jump(30)
        await _get(client, url)
        assert server.connections == 1
        mock_clock.jump(61)
        await _get(client, url)
        assert server.connections == 2


async def test_idle_connections_are_capped_in_all_the_longest_idle_closed_first(
    nursery: trio.Nursery,
) -> None:
    servers = [Server(keep_alive) for _ in range(3)]
    for server in servers:
        await nursery.start(server.serve)
    urls = [f"http://127.0.0.1:{server.port}/x" for server in servers]
    async with httpx2.AsyncClient(transport=PooledTransport(max_idle=2)) as client:
        for url in urls:
            await _get(client, url)
        # Three idle connections, two kept: the first origin's went.
        for url in urls[1:]:
            await _get(client, url)
        await _get(client, urls[0])
    assert [s.connections for s in servers] == [2, 1, 1]


@pytest.mark.parametrize(("soft", "kept"), [(64, 16), (1024, 224), (20_000, 1024)])
def test_idle_connections_kept_follow_the_descriptors_the_process_may_open(
    monkeypatch: pytest.MonkeyPatch, soft: int, kept: int
) -> None:
    monkeypatch.setattr(resource, "getrlimit", lambda _: (soft, resource.RLIM_INFINITY))
    assert default_max_idle() == kept


async def test_a_request_larger_than_the_socket_buffers_goes_out_whole(
    nursery: trio.Nursery,
) -> None:
    """A request the kernel cannot take at once is sent in parts, as the server reads."""
    size = 16_000_000
    received: list[int] = []

    async def count_body(stream: trio.SocketStream, _: int) -> None:
        head = await _read_head(stream)
        body = len(head) - head.index(b"\r\n\r\n") - 4
        while body < size:
            body += len(await stream.receive_some(1 << 16))
        received.append(body)
        await stream.send_all(OK)

    server = Server(count_body)
    await nursery.start(server.serve)
    async with httpx2.AsyncClient(transport=PooledTransport()) as client:
        r = await client.post(f"http://127.0.0.1:{server.port}/up", content=b"y" * size)
    assert r.text == "hello"
    assert received == [size]


async def test_a_body_that_comes_in_pieces_is_read_whole(nursery: trio.Nursery) -> None:
    """Each piece is sent only once the client has read the one before: the client
    finds the socket empty and waits for the next, and the answer is read whole."""
    pieces = [b"%d" % i * 1000 for i in range(5)]
    read = trio.Semaphore(0)

    async def in_pieces(stream: trio.SocketStream, _: int) -> None:
        await _read_head(stream)
        length = sum(map(len, pieces))
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % length)
        for piece in pieces:
            await stream.send_all(piece)
            await read.acquire()

    server = Server(in_pieces)
    await nursery.start(server.serve)
    ends = list(itertools.accumulate(map(len, pieces)))
    body = b""
    async with (
        httpx2.AsyncClient(transport=PooledTransport()) as client,
        client.stream("GET", f"http://127.0.0.1:{server.port}/") as r,
    ):
        async for chunk in r.aiter_raw():
            body += chunk
            while ends and len(body) >= ends[0]:
                ends.pop(0)
                read.release()
    assert body == b"".join(pieces)


async def test_a_connection_reset_mid_body_is_a_read_error(nursery: trio.Nursery) -> None:
    async def reset(stream: trio.SocketStream, _: int) -> None:
        await _read_head(stream)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 10)
        # SO_LINGER with a zero time-out: close sends a reset, not an end.
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    server = Server(reset)
    await nursery.start(server.serve)
    async with httpx2.AsyncClient(transport=PooledTransport()) as client:
        with pytest.raises(httpx2.ReadError):
            await client.get(f"http://127.0.0.1:{server.port}/")


@pytest.mark.parametrize(
    ("cap", "kept", "truncated"),
    [(12_000, 12_000, True), (20_000, 20_000, False), (50_000, 20_000, False), (0, 0, True)],
)
async def test_the_crawlers_fetch_keeps_the_body_up_to_its_cap(
    nursery: trio.Nursery, cap: int, kept: int, truncated: bool
) -> None:
    """Read straight from the connection, in two pieces: a body over the cap is cut
    and marked, one within it is kept whole; and the connection serves the next
    request, or a new one does when the cut left part of the answer unread."""
    body = bytes(range(256)) * 78 + b"." * 32  # 20,000 bytes
    sent_rest = trio.Event()

    async def in_two(stream: trio.SocketStream, _: int) -> None:
        while head := await _read_head(stream):
            assert head.startswith(b"GET ")
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 20000\r\n\r\n" + body[:9000])
            with contextlib.suppress(trio.BrokenResourceError):
                await stream.send_all(body[9000:])
            sent_rest.set()

    server = Server(in_two)
    await nursery.start(server.serve)
    async with make_client(FetchConfig(), "test-agent") as client:
        url = f"http://127.0.0.1:{server.port}/page"
        first = await fetch(client, url, max_bytes=cap)
        await sent_rest.wait()
        again = await fetch(client, url, max_bytes=cap)
    for result in (first, again):
        assert result.status == 200
        assert result.body == body[:kept] and result.truncated is truncated
    assert server.connections in ((1, 2) if truncated else (1,))


_PLAIN = [
    "http://a.test/",
    "https://a.test/p/q.html",
    "http://a.test:8080/p;x=1?q=1&r=%41&s=/t?u",
    "https://xn--mnchen-3ya.test:8443/%C3%A9/~a/(b)*,+!$'@:",
    "http://a-b.c-d.test/?",
]
_NOT_PLAIN = [
    "http://a.test/a|b",  # a character httpx2 may quote
    "http://a.test/%zz",  # a lone percent sign: httpx2 quotes it
    "http://a.test/a/./b",  # dot segments: httpx2 removes them
    "http://a.test/a/..",
    "http://A.test/",  # httpx2 lower-cases the host
    "http://a.test./",
    "http://127.0.0.1/",  # httpx2 checks an IPv4 address
    "http://[::1]:8080/",
    "http://a.test:80/",  # httpx2 drops the default port
    "http://a.test:65536/",
    "http://a.test/#f",
    "http://u@a.test/",
    "ftp://a.test/",
    "http://a.test",
]


@pytest.mark.parametrize("url", _PLAIN + _NOT_PLAIN)
def test_a_plain_urls_get_is_the_one_httpx2_would_make(url: str) -> None:
    """A plain URL's GET is read without httpx2's parser: the same origin, Host and
    targets as an httpx2 Request; any other URL is left to httpx2."""
    plain = plain_get(url)
    assert (plain is not None) == (url in _PLAIN)
    if plain is not None:
        request = httpx2.Request("GET", url)
        assert plain.origin == _origin_of(request.url)
        assert (plain.netloc, plain.target) == (request.url.netloc, request.url.raw_path)
        assert plain.url == str(request.url).encode()
        assert request.headers.raw[0] == (b"Host", plain.netloc)


@pytest.mark.parametrize("via_proxy", [False, True], ids=["direct", "proxy"])
async def test_a_plain_urls_get_goes_out_as_httpx2s_does(
    nursery: trio.Nursery, via_proxy: bool
) -> None:
    """The server reads the same request head, byte for byte, whether the crawler's
    client sends a page's GET the plain way or through httpx2's Request (taken once
    the client is given an event hook); the results name the same headers sent."""
    heads: list[bytes] = []

    async def record(stream: trio.SocketStream, _: int) -> None:
        while head := await _read_head(stream):
            heads.append(head)
            await stream.send_all(OK)

    async def hook(_: httpx2.Request) -> None:
        return None

    server = Server(record)
    await nursery.start(server.serve)
    if via_proxy:  # the server stands in for the proxy: absolute-form targets
        url, proxy = "http://a.test:8080/p;x?q=1&r=%41", f"http://127.0.0.1:{server.port}"
    else:
        url, proxy = f"http://localhost:{server.port}/p;x?q=1&r=%41", None
    assert plain_get(url) is not None
    transport = PooledTransport(proxy=proxy)
    async with make_client(FetchConfig(), "ubipy/test", transport=transport) as client:
        plain = await fetch(client, url, max_bytes=100)
        client.event_hooks = {"request": [hook], "response": []}
        layered = await fetch(client, url, max_bytes=100)
    assert plain.ok and plain.body == layered.body == b"hello"
    assert heads[0] == heads[1]
    assert plain.request_headers == layered.request_headers
    assert plain.request_headers[0][0] == b"Host"


async def test_a_host_header_given_goes_out_alone(nursery: trio.Nursery) -> None:
    """A client given its own Host header sends that one, as httpx2 would."""
    heads: list[bytes] = []

    async def record(stream: trio.SocketStream, _: int) -> None:
        while head := await _read_head(stream):
            heads.append(head)
            await stream.send_all(OK)

    server = Server(record)
    await nursery.start(server.serve)
    async with make_client(FetchConfig(), "t", transport=PooledTransport()) as client:
        client.headers["Host"] = "other.test"
        result = await fetch(client, f"http://localhost:{server.port}/", max_bytes=100)
    assert result.ok
    assert heads[0].lower().count(b"\r\nhost: ") == 1
    assert b"\r\nHost: other.test" in heads[0]


class _Endless(DirectSocketStream):
    """A socket that always has more of a body to give at once."""

    def receive_now(self, max_bytes: int = 65_536) -> bytes | None:
        return b"x" * 1000


@pytest.mark.parametrize("how", ["iterated", "capped"])
async def test_a_body_that_never_stops_coming_still_lets_the_deadline_in(how: str) -> None:
    """A server that sends faster than it is read: each receive is answered at once
    and none would yield, so a deadline (and every other task) would wait for as long
    as it sends. The body's reader yields every so many receives. An alarm bounds
    this test: a loop that never yields cannot be cancelled."""
    a, b = trio.socket.socketpair()
    stream = _Endless(trio.SocketStream(a))
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\n\r\n")  # its body ends when the connection does
    body = PooledBody(
        PooledTransport(), _Connection(stream, _Origin("http", "a.test", 80)), reader, 5.0
    )
    with no_endless_spin(), trio.move_on_after(0.2) as scope:
        if how == "iterated":
            async for _ in body:
                pass
        else:
            await body.read_capped(1 << 40)
    assert scope.cancelled_caught
    await stream.aclose()
    b.close()


async def test_a_tls_connection_whose_end_was_read_is_not_taken_again() -> None:
    """A server's close_notify that came with its last answer was read with it: the
    socket has nothing more to read (its end may come later), but the connection
    cannot carry another request."""
    a, b = trio.socket.socketpair()
    tls = TlsStream(
        DirectSocketStream(trio.SocketStream(a)), ssl.create_default_context(), "a.test"
    )
    conn = _Connection(tls, _Origin("https", "a.test", 443))
    assert conn.looks_alive()
    tls._ended = True  # as a read of close_notify leaves it
    assert not conn.looks_alive()
    await tls.aclose()
    b.close()
