"""The transport's TLS stream against trio's own (as the server), over an in-memory
link: whole and byte by byte, bodies of many records, and the ways a server ends."""

from __future__ import annotations

import _ssl
import contextlib
import ctypes
import ssl
from collections.abc import Awaitable, Callable

import pytest
import trio
import trio.testing
import trustme

from tests.spinning import no_endless_spin
from ubipy.fetch.sockets import DirectSocketStream
from ubipy.fetch.tls import TlsStream
from ubipy.fetch.tlssessions import _ssl_pointer

BODY = bytes(range(256)) * 160  # 40 KiB: three TLS records


class _Trickle(trio.abc.Stream):
    """A stream that gives at most ``size`` bytes a receive."""

    def __init__(self, inner: trio.abc.Stream, size: int) -> None:
        self.inner, self.size = inner, size

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(self.size)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


def _link(
    ca: trustme.CA,
) -> tuple[trio.SSLStream[trio.abc.Stream], trio.abc.Stream, ssl.SSLContext]:
    """A TLS server for site.test at one end of an in-memory link: (the server's
    stream, the client's end of the link, a client context trusting the CA)."""
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("site.test").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    client_end, server_end = trio.testing.memory_stream_pair()
    server: trio.SSLStream[trio.abc.Stream] = trio.SSLStream(
        server_end, server_ctx, server_side=True
    )
    return server, client_end, client_ctx


async def _talk(
    ca: trustme.CA,
    serve: Callable[[trio.SSLStream[trio.abc.Stream]], Awaitable[None]],
    *,
    size: int = 65_536,
) -> tuple[bytes, bytes]:
    """Send b"ask" and read to the end: (what the client read, what the server got)."""
    server, client_end, client_ctx = _link(ca)
    got = bytearray()
    read = bytearray()

    async def server_side() -> None:
        await server.do_handshake()
        while len(got) < 3:
            got.extend(await server.receive_some())
        await serve(server)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server_side)
            tls = TlsStream(_Trickle(client_end, size), client_ctx, "site.test")
            await tls.do_handshake()
            await tls.send_all(b"ask")
            while chunk := await tls.receive_some(65_536):
                read.extend(chunk)
            await tls.aclose()
    return bytes(read), bytes(got)


async def _body_then_close_notify(server: trio.SSLStream[trio.abc.Stream]) -> None:
    await server.send_all(BODY)
    await server.aclose()  # sends close_notify


async def _body_then_hang_up(server: trio.SSLStream[trio.abc.Stream]) -> None:
    await server.send_all(BODY)
    await server.transport_stream.aclose()  # no close_notify: a ragged end


@pytest.mark.parametrize("size", [65_536, 1], ids=["whole", "byte-by-byte"])
@pytest.mark.parametrize("serve", [_body_then_close_notify, _body_then_hang_up])
async def test_a_body_of_many_records_arrives_whole_however_it_ends(
    ca: trustme.CA,
    serve: Callable[[trio.SSLStream[trio.abc.Stream]], Awaitable[None]],
    size: int,
    autojump_clock: trio.testing.MockClock,
) -> None:
    # On the autojump clock, _talk's time-out catches a stream that waits for bytes
    # that never come, not a slow machine: byte by byte, 40 KiB under coverage take
    # 6 s of real time, and a busy CI worker had passed the 10 s.
    read, got = await _talk(ca, serve, size=size)
    assert got == b"ask"
    assert read == BODY


async def test_a_certificate_for_another_name_fails_the_handshake(ca: trustme.CA) -> None:
    server, client_end, client_ctx = _link(ca)

    async def server_side() -> None:
        with pytest.raises(trio.BrokenResourceError):
            await server.do_handshake()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server_side)
            tls = TlsStream(client_end, client_ctx, "other.test")
            with pytest.raises(ssl.SSLCertVerificationError):
                await tls.do_handshake()
            await tls.aclose()


async def test_garbage_instead_of_records_breaks_the_stream(ca: trustme.CA) -> None:
    server, client_end, client_ctx = _link(ca)

    async def server_side() -> None:
        await server.do_handshake()
        await server.transport_stream.send_all(b"\x17\x03\x03\x00\x20" + b"\x00" * 32)

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server_side)
            tls = TlsStream(client_end, client_ctx, "site.test")
            await tls.do_handshake()
            with pytest.raises(trio.BrokenResourceError):
                await tls.receive_some()
            await tls.aclose()


class _Pieces(trio.abc.Stream):
    """A stream whose sends go out in ``size``-byte pieces, each its own send: a
    reader meets records cut anywhere."""

    def __init__(self, inner: trio.abc.Stream, size: int) -> None:
        self.inner, self.size = inner, size

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        for start in range(0, len(view), self.size):
            await self.inner.send_all(view[start : start + self.size])
            await trio.lowlevel.checkpoint()  # let the reader in between pieces

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize("piece", [1 << 20, 1000, 7], ids=["whole", "1000-byte", "7-byte"])
@pytest.mark.parametrize("serve", [_body_then_close_notify, _body_then_hang_up])
async def test_over_a_socket_an_answer_is_read_at_once_where_it_has_come(
    ca: trustme.CA,
    serve: Callable[[trio.SSLStream[trio.abc.Stream]], Awaitable[None]],
    piece: int,
) -> None:
    """As the transport reads an answer: what has come at once (no wait, no time-out
    to set), the rest once the socket has it; records cut anywhere. A body sent whole
    is read after it has all come: at once, to its end."""
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("site.test").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    a, b = trio.socket.socketpair()
    server_sock = trio.SocketStream(b)
    server: trio.SSLStream[trio.abc.Stream] = trio.SSLStream(
        _Pieces(server_sock, piece), server_ctx, server_side=True
    )
    asked, sent = trio.Event(), trio.Event()
    read = bytearray()
    at_once = waited = 0

    async def server_side() -> None:
        await server.do_handshake()
        assert await server.receive_some() == b"ask"
        asked.set()
        await serve(server)
        sent.set()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server_side)
            tls = TlsStream(DirectSocketStream(trio.SocketStream(a)), client_ctx, "site.test")
            await tls.do_handshake()
            await tls.send_all(b"ask")
            await (sent if piece > len(BODY) else asked).wait()
            while True:
                data = tls.receive_now()
                if data is None:
                    data = await tls.receive_later()
                    waited += 1
                else:
                    at_once += 1
                if not data:
                    break
                read.extend(data)
            assert tls.receive_now() == b""  # the end stays the end
            await tls.aclose()
    assert read == BODY
    if piece > len(BODY):
        assert (at_once, waited) == (2, 0)  # the body in one read, then its end


async def test_nothing_come_is_none_and_a_receive_then_waits(ca: trustme.CA) -> None:
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("site.test").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    a, b = trio.socket.socketpair()
    server = trio.SSLStream(trio.SocketStream(b), server_ctx, server_side=True)
    waiting = trio.Event()

    async def server_side() -> None:
        await server.do_handshake()
        await waiting.wait()
        await server.send_all(b"later")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server_side)
            tls = TlsStream(DirectSocketStream(trio.SocketStream(a)), client_ctx, "site.test")
            await tls.do_handshake()
            await tls.send_all(b"")  # the handshake's last flight
            # The server's tickets may come first: none of them is plaintext.
            while tls.receive_now() is not None:
                await trio.testing.wait_all_tasks_blocked()
            waiting.set()
            assert await tls.receive_some() == b"later"
            await tls.aclose()
            await server.aclose()


class _RawServer:
    """A TLS server driven by hand over a socket (an SSLObject over memory BIOs):
    it can send what trio's stream would not, in one send."""

    def __init__(self, ca: trustme.CA, sock: trio.socket.SocketType, tls12: bool = False) -> None:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        if tls12:
            ctx.maximum_version = ssl.TLSVersion.TLSv1_2
        ca.issue_cert("site.test").configure_cert(ctx)
        self.raw = trio.SocketStream(sock)
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self.incoming, self.outgoing, server_side=True)

    async def _exchange(self) -> None:
        if self.outgoing.pending:
            await self.raw.send_all(self.outgoing.read())
        self.incoming.write(await self.raw.receive_some())

    async def handshake_and_ask(self) -> None:
        """The handshake, then the client's b"ask"."""
        while True:
            try:
                self.tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._exchange()
        got = b""
        while not got:
            try:
                got = self.tls.read()
            except ssl.SSLWantReadError:
                await self._exchange()
        assert got == b"ask"


async def _asked(ca: trustme.CA, sock: trio.socket.SocketType, sent: trio.Event) -> TlsStream:
    """A client's stream past its handshake and its b"ask", once what the server sent
    after (``sent``) has come."""
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    tls = TlsStream(DirectSocketStream(trio.SocketStream(sock)), ctx, "site.test")
    await tls.do_handshake()
    await tls.send_all(b"ask")
    await sent.wait()
    await trio.lowlevel.wait_readable(sock)
    return tls


async def test_bytes_a_server_sends_behind_its_close_notify_end_the_stream(
    ca: trustme.CA,
) -> None:
    """The answer, close_notify and one more byte in one send: the answer, then the
    end, at once and for good. OpenSSL takes nothing after close_notify, and a read
    that went on while bytes stayed pending never returned: a stranger's server
    froze the whole process, beyond any time-out (so an alarm bounds this test)."""
    a, b = trio.socket.socketpair()
    server = _RawServer(ca, b)
    sent = trio.Event()

    async def server_side() -> None:
        await server.handshake_and_ask()
        server.tls.write(b"hello body")
        with contextlib.suppress(ssl.SSLWantReadError):
            server.tls.unwrap()  # queues close_notify; the client never answers it
        await server.raw.send_all(server.outgoing.read() + b"x")
        sent.set()
        await trio.sleep_forever()

    with no_endless_spin(), trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server_side)
            tls = await _asked(ca, a, sent)
            assert tls.receive_now() == b"hello body"
            assert tls.receive_now() == b""
            assert await tls.receive_some() == b""
            await tls.aclose()
            nursery.cancel_scope.cancel()
    await server.raw.aclose()


async def test_what_has_come_is_read_while_tls_has_something_to_send(
    ca: trustme.CA,
) -> None:
    """A TLS 1.2 server renegotiates in the middle of an answer: the client owes it a
    handshake message, and the rest of the answer, already received, is read at once
    all the same (not after a wait for bytes the server will not send)."""
    a, b = trio.socket.socketpair()
    server = _RawServer(ca, b, tls12=True)
    pointer = _ssl_pointer(server.tls)
    if pointer is None:
        pytest.skip("this CPython's ssl objects are laid out differently")
    sent = trio.Event()

    async def server_side() -> None:
        await server.handshake_and_ask()
        server.tls.write(b"first")
        lib = ctypes.CDLL(_ssl.__file__)
        assert lib.SSL_renegotiate(ctypes.c_void_p(pointer)) == 1
        with contextlib.suppress(ssl.SSLWantReadError):
            server.tls.do_handshake()  # the HelloRequest
        server.tls.write(b"rest")
        await server.raw.send_all(server.outgoing.read())
        sent.set()
        await trio.sleep_forever()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server_side)
            tls = await _asked(ca, a, sent)
            assert tls.receive_now(5) == b"first"
            assert tls.receive_now(2) == b"re"
            assert tls.receive_now() == b"st"
            await tls.aclose()
            nursery.cancel_scope.cancel()
    await server.raw.aclose()
