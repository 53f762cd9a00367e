"""TLS sessions kept and resumed: OpenSSL's own copies where this Python's ssl objects
are as expected, ssl's session objects elsewhere; connections resume either way, and a
kept session outlives the connection it came from, closed without close_notify as the
transport closes them."""

from __future__ import annotations

import gc
import ssl
import sys

import pytest
import trio
import trio.testing
import trustme

from ubipy.fetch import tlssessions
from ubipy.fetch.tls import TlsStream
from ubipy.fetch.tlssessions import TlsSession, fast_sessions


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(params=["openssl", "ssl"])
def sessions(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "ssl":
        monkeypatch.setattr(tlssessions, "_openssl", lambda: None)
    return str(request.param)


def _contexts(ca: trustme.CA, *, tickets: bool = True) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("site.test").configure_cert(server)
    if not tickets:
        server.num_tickets = 0
        server.options |= ssl.OP_NO_TICKET
    client = ssl.create_default_context()
    ca.configure_trust(client)
    return server, client


async def _connect(
    server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, session: TlsSession | None
) -> tuple[bool, TlsSession | None]:
    """One connection: handshake, one request and answer (which brings TLS 1.3's
    tickets), then closed without close_notify. (resumed, the session read after)."""
    client_end, server_end = trio.testing.memory_stream_pair()
    server = trio.SSLStream(server_end, server_ctx, server_side=True)
    client = TlsStream(client_end, client_ctx, "site.test", session)

    async def serve() -> None:
        await server.do_handshake()
        assert await server.receive_some(100) == b"ping"
        await server.send_all(b"pong")

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            await client.do_handshake()
            await client.send_all(b"ping")
            assert await client.receive_some() == b"pong"
    resumed, kept = client.session_reused, client.session
    await client.aclose()
    await trio.aclose_forcefully(server)
    del client
    gc.collect()  # the connection's SSL object freed: OpenSSL marks its session bad
    return resumed, kept


async def test_later_connections_resume_the_session_kept(ca: trustme.CA, sessions: str) -> None:
    server_ctx, client_ctx = _contexts(ca)
    resumed, kept = await _connect(server_ctx, client_ctx, None)
    assert not resumed and kept is not None
    for _ in range(4):
        resumed, _ = await _connect(server_ctx, client_ctx, kept)
        assert resumed


async def test_a_session_after_a_resumed_one_resumes_too(ca: trustme.CA, sessions: str) -> None:
    server_ctx, client_ctx = _contexts(ca)
    _, kept = await _connect(server_ctx, client_ctx, None)
    for _ in range(3):
        resumed, kept = await _connect(server_ctx, client_ctx, kept)
        assert resumed and kept is not None


async def test_a_kept_session_survives_connections_that_got_no_new_ticket(
    ca: trustme.CA, sessions: str
) -> None:
    # A connection that receives a new ticket replaces its session with it; one that
    # does not (a server that hands no ticket on resumption, or a connection that
    # fails first) holds the session it was given when OpenSSL marks it bad.
    server_ctx, client_ctx = _contexts(ca)
    _, kept = await _connect(server_ctx, client_ctx, None)
    server_ctx.num_tickets = 0
    for _ in range(3):
        resumed, _ = await _connect(server_ctx, client_ctx, kept)
        assert resumed


async def test_a_server_without_tickets_gives_nothing_to_resume(ca: trustme.CA) -> None:
    server_ctx, client_ctx = _contexts(ca, tickets=False)
    resumed, kept = await _connect(server_ctx, client_ctx, None)
    assert not resumed
    if fast_sessions():
        assert kept is None
    resumed, _ = await _connect(server_ctx, client_ctx, kept)
    assert not resumed


@pytest.mark.skipif(
    sys.implementation.name != "cpython" or sys.platform != "linux",
    reason="the layout check is made for CPython; Linux reaches libssl through _ssl",
)
def test_cpython_on_linux_takes_sessions_without_its_copies() -> None:
    # The fallback works (above) but costs ~0.4 ms a connection: it must not be
    # taken where the fast path is expected to hold.
    assert fast_sessions()
