"""A lean HTTP/1.1 transport for httpx2: llhttp (:mod:`ubipy.fetch.http1`) over trio
streams, pooled per origin.

httpcore's pool scans every pooled connection (and polls each socket) for every
request it assigns, which at crawler concurrency costs more CPU than the rest
of a page's life. A crawler's pattern is simpler: many origins, one request at
a time per host, keep-alive. So the pool here is a dict of idle connections per
origin, popped last-in first-out, and a connection is checked once, when it is
taken. Idle connections are kept up to a minute, so that a polite crawl, which
comes back to a host only after going round many others, finds its connection
still there; at most ``max_idle`` of them in all (a quarter of the file descriptors
the process may open, up to 1024) and ``max_idle_tls`` over TLS (an idle TLS
connection holds ~40 KB against ~2 KB: ``bench/idle_connections.py``), the
longest idle closed first: a polite crawl of more hosts than that goes round them in
turn, and closing the longest idle is then closing the next one needed. It plugs in
under ``httpx2.AsyncClient(transport=...)``; everything above
(requests, headers, decoding, the fetcher) is unchanged. The crawler's client also
hands it a plain URL's GET without an httpx2 ``Request`` (:func:`plain_get`,
:meth:`PooledTransport.get`): the same bytes go out.

An HTTP proxy is supported the plain way: absolute-form targets for http, a
CONNECT tunnel for https (:mod:`ubipy.fetch.tunnel`).

TLS: certificates are verified, against the system's CA store (and a bundle of
private CAs, when given), with one context per process and a stream made for one task
at a time (:mod:`ubipy.fetch.tls`). A failed verification is raised as
:class:`CertificateError`, so the fetcher can tell it from a network failure and not
retry it.
"""

from __future__ import annotations

import logging
import math
import re
import ssl
from collections import OrderedDict
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import trio

from ubipy.descriptors import descriptor_share, out_of_descriptors
from ubipy.errors import UbipyError
from ubipy.fetch.bodies import BodyGate, CappedBody
from ubipy.fetch.dns import DnsFailure, Lookup, Resolver, address_key
from ubipy.fetch.http1 import BadRequest, ProtocolFailure, ResponseReader, request_head
from ubipy.fetch.origins import DEFAULT_PORTS, Origin, origin_of
from ubipy.fetch.origins import PlainGet as PlainGet
from ubipy.fetch.origins import bracketed as _bracketed
from ubipy.fetch.origins import plain_get as plain_get
from ubipy.fetch.sockets import DirectSocketStream, connect_in_turn, reset_on_close, socket_of
from ubipy.fetch.tls import TlsStream, certificate_failure, tls_context
from ubipy.fetch.tlssessions import TlsSession, fast_sessions
from ubipy.fetch.tunnel import AddressRefused as AddressRefused
from ubipy.fetch.tunnel import open_tunnel

_READ_SIZE = 65_536
# Receives of a body between two yields to the other tasks: a page takes one or two.
_YIELD_EVERY = 16
# TLS sessions kept for resumption, one per origin, the oldest forgotten first.
_MAX_SESSIONS = 4096


class CertificateError(UbipyError, httpx2.ConnectError):
    """The server's certificate did not verify (unknown CA, expired, another name):
    asking again will not change it."""


class ProxyUnreachable(UbipyError, httpx2.ConnectError):
    """No connection to the proxy every request goes through: the proxy's failure,
    not the host's (a proxy down gave every host up as unreachable: QA)."""


class OutOfSockets(ProxyUnreachable):
    """No socket to be had in this process: put back as for a proxy down."""


log = logging.getLogger(__name__)

# The names they had here before ubipy/fetch/origins.py, which tests import.
_Origin = Origin
_origin_of = origin_of

_BEHIND_PROXY = (
    "--proxy: the proxy looks names up, so a name that leads to a private address is not "
    "refused here (IP addresses and --resolve names are): let the proxy refuse them"
)


class _Connection:
    __slots__ = (
        "address", "answer", "idle_since", "kept_for", "origin", "session_checked", "stream",
    )  # fmt: skip

    def __init__(
        self,
        stream: DirectSocketStream | TlsStream,
        origin: Origin,
        address: str | None = None,
        answer: Lookup | None = None,
    ) -> None:
        # Either way an answer's receive takes what has come at once, with no time-out
        # to set, and sets one only to wait.
        self.stream = stream
        self.origin = origin
        # A direct connection's address, and the resolver's cached answer for its name
        # when it was last found to be that answer's address (see _acquire).
        self.address = address
        self.answer = answer
        self.idle_since = 0.0
        # How long the server said it keeps the connection idle (Keep-Alive), less a
        # second: reused as it closed it, a request was cut (inf: it did not say).
        self.kept_for = math.inf
        # Whether its TLS session was looked at (once, after its first answer: the
        # server's ticket has come by then).
        self.session_checked = False

    def looks_alive(self) -> bool:
        # An idle keep-alive socket that is readable has been closed (or sent
        # garbage) by the server: either way it cannot carry a new request.
        if isinstance(self.stream, TlsStream) and self.stream.ended:
            return False  # its close_notify read, whether or not its end has come
        sock = socket_of(self.stream)
        return sock is None or not sock.is_readable()

    async def aclose(self, *, reset: bool = False) -> None:
        """Close it; ``reset``: its exchange was cut short (a time-out, a pause's
        abandonment), and a reset drops what the kernel still holds to send: closed
        plainly, a request queued behind a dead path reached its server 54 s later,
        when another peer had the host (QA)."""
        if reset:
            reset_on_close(self.stream)
        with trio.CancelScope(shield=True):
            await trio.aclose_forcefully(self.stream)


class PooledBody(httpx2.AsyncByteStream):
    """The response body, read from the connection as the caller iterates, or whole
    at once (:meth:`read_capped`)."""

    def __init__(
        self, transport: PooledTransport, conn: _Connection, reader: ResponseReader, timeout: float
    ) -> None:
        self._transport = transport
        self._conn = conn
        self._reader = reader
        self._read_timeout = timeout
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        reader = self._reader
        receives = 0
        while True:
            data = reader.take_body()
            if data:
                yield data
            if reader.complete:
                return
            receives = await _receive_more(self._conn, reader, self._read_timeout, receives)

    async def read_capped(self, max_bytes: int, gate: BodyGate | None = None) -> tuple[bytes, bool]:
        """The body, or its first ``max_bytes`` and True when there was more: what
        iterating it and stopping at the cap gives, without an async generator (and
        httpx2's, around it) for a page's one or two pieces."""
        reader = self._reader
        kept = CappedBody(max_bytes, gate)
        receives = 0
        while True:
            data = reader.take_body()
            if (data and not kept.add(data)) or reader.complete:
                return kept.result()
            if kept.waits:
                await kept.wait()
            receives = await _receive_more(self._conn, reader, self._read_timeout, receives)

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        reader = self._reader
        await self._transport._release(
            self._conn, reusable=reader.complete and reader.reusable, reset=not reader.complete
        )


async def _receive_more(
    conn: _Connection, reader: ResponseReader, read_timeout: float, receives: int
) -> int:
    """:func:`_receive` for a body, yielding to the other tasks every so many receives
    (returns the count so far). A receive answered at once does not yield, and a
    server that sends faster than it is read (a body that decodes to nothing, which
    no cap on the decoded bytes ends) would otherwise keep the loop, its deadline and
    every other task waiting for as long as it sends."""
    receives += 1
    if receives % _YIELD_EVERY == 0:
        await trio.lowlevel.checkpoint()
    await _receive(conn, reader, read_timeout)
    return receives


async def _receive(conn: _Connection, reader: ResponseReader, read_timeout: float) -> None:
    """Feed the reader what the connection gives next (its end included)."""
    try:
        # A body has usually come with its head: no time-out scope to read it.
        stream = conn.stream
        data = stream.receive_now()
        if data is None:
            with trio.move_on_after(read_timeout):
                data = await stream.receive_later()
            if data is None:
                raise httpx2.ReadTimeout(f"no data for {read_timeout} s")
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
        raise httpx2.ReadError(str(exc) or type(exc).__name__) from exc
    try:
        reader.feed(data)
    except ProtocolFailure as exc:
        raise httpx2.RemoteProtocolError(str(exc)) from exc


class PooledTransport(httpx2.AsyncBaseTransport):
    def __init__(
        self,
        *,
        proxy: str | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 30.0,
        keepalive_expiry: float = 60.0,
        max_idle_per_origin: int = 4,
        max_idle: int | None = None,
        max_idle_tls: int = 256,
        ssl_context: ssl.SSLContext | None = None,
        ca_bundle: Path | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        """``ssl_context``: the context for https (default: :func:`tls_context` with
        ``ca_bundle``, made at the first https connection)."""
        self._proxy = origin_of(httpx2.URL(proxy)) if proxy else None
        self._proxy_said_at = self._sockets_said_at = -math.inf
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._keepalive_expiry = keepalive_expiry
        self._max_idle_per_origin = max_idle_per_origin
        self._max_idle = default_max_idle() if max_idle is None else max_idle
        self._max_idle_tls = max_idle_tls
        self._ssl_context = ssl_context
        self._ca_bundle = ca_bundle
        # Direct connections go to the address the resolver checked and pinned. Behind
        # a proxy, which looks names up itself, the hosts the resolver looks at (IP
        # literals, --resolve's names) are still checked before the proxy is asked:
        # a robots.txt redirected to 127.0.0.1:7000 is refused as a link to it is.
        self._resolver = resolver
        if proxy and resolver is not None and not resolver.allow_private:
            log.warning(_BEHIND_PROXY)
        self._idle: dict[Origin, list[_Connection]] = {}
        # Every idle connection, and those over TLS, the longest idle first.
        self._idle_order: OrderedDict[_Connection, None] = OrderedDict()
        self._idle_tls: OrderedDict[_Connection, None] = OrderedDict()
        self._sessions: dict[Origin, TlsSession] = {}
        self._closed = False

    # -- the httpx2 interface ------------------------------------------------
    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        origin = origin_of(request.url)
        if self._absolute_form(origin):
            target = bytes(str(request.url), "ascii")
        else:
            target = request.url.raw_path
        timeouts = request.extensions.get("timeout", {})
        return await self._send(
            origin, request.method, target, request.headers.raw, request.content, timeouts
        )

    async def get(
        self, plain: PlainGet, headers: list[tuple[bytes, bytes]], timeouts: dict[str, float | None]
    ) -> httpx2.Response:
        """GET ``plain`` with ``headers`` (after its Host): the request and answer
        ``handle_async_request`` would send and give for ``httpx2.Request("GET",
        url, headers=headers)``, the request's headers as sent in the answer's
        extensions (``request_headers``), as it has no request."""
        target = plain.url if self._absolute_form(plain.origin) else plain.target
        sent = [(b"Host", plain.netloc), *headers]
        response = await self._send(plain.origin, "GET", target, sent, b"", timeouts)
        response.extensions["request_headers"] = sent
        return response

    def _absolute_form(self, origin: Origin) -> bool:
        """Whether a request to ``origin`` names its whole URL: an http one through
        the proxy (an https one goes through a tunnel, as to the server)."""
        return self._proxy is not None and origin.scheme == "http"

    async def _send(
        self,
        origin: Origin,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        content: bytes,
        timeouts: dict[str, float | None],
    ) -> httpx2.Response:
        read_timeout = timeouts.get("read") or self._read_timeout
        conn = await self._acquire(origin, timeouts.get("connect"))
        # No silent second try when a kept-alive connection fails: the server may
        # have seen the request, and only the crawler's retry (after the host's
        # delay and a back-off) keeps a host from being asked twice at once.
        # Connections that went stale while idle are weeded out when taken.
        try:
            reader = await self._exchange(conn, method, target, headers, content, read_timeout)
        except BaseException:
            await conn.aclose(reset=True)
            raise
        assert reader.status is not None
        conn.kept_for = _kept_for(reader.headers, conn.kept_for)
        return httpx2.Response(
            status_code=reader.status,
            headers=reader.headers,
            stream=PooledBody(self, conn, reader, read_timeout),
            extensions={
                "http_version": reader.version.encode("ascii"),
                "reason_phrase": reader.reason.encode("latin-1"),
            },
        )

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, {}
        self._idle_order.clear()
        self._idle_tls.clear()
        for conns in idle.values():
            for conn in conns:
                await conn.aclose()

    # -- connections ----------------------------------------------------------
    async def _exchange(
        self,
        conn: _Connection,
        method: str,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        content: bytes,
        read_timeout: float,
    ) -> ResponseReader:
        """Send the request; read until the response's head is in."""
        try:
            data = request_head(method, target, headers)
        except BadRequest as exc:
            raise httpx2.LocalProtocolError(str(exc)) from exc
        if content:
            data += content
        reader = ResponseReader(head_only=method == "HEAD")
        try:
            await conn.stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            raise httpx2.WriteError(str(exc) or type(exc).__name__) from exc
        # The other tasks run before the answer's read time-out starts (a send that
        # went straight to the socket did not yield): their work is not the server's
        # silence, and a server in this process gets its turn to read the request.
        await trio.lowlevel.checkpoint()
        while reader.status is None:
            await _receive(conn, reader, read_timeout)
        return reader

    async def _acquire(self, origin: Origin, connect_timeout: float | None) -> _Connection:
        now = trio.current_time()
        limit = connect_timeout or self._connect_timeout
        while idle := self._idle.get(origin):
            conn = idle.pop()
            if not idle:  # the origin goes with its last connection: a crawl meets millions
                del self._idle[origin]
            del self._idle_order[conn]
            self._idle_tls.pop(conn, None)
            kept = min(self._keepalive_expiry, conn.kept_for)
            if now - conn.idle_since < kept and conn.looks_alive():
                try:
                    if await self._still_pinned(conn, limit):
                        return conn
                except BaseException:
                    await conn.aclose()
                    raise
            await conn.aclose()
        return await self._connect(origin, limit)

    async def _still_pinned(self, conn: _Connection, limit: float) -> bool:
        """Whether a direct connection is to the address its name is pinned to now.
        A name looked up again (its answer expired) may have moved: the DNS stage and
        the per-IP rule keyed the host on its new address while its requests went on
        to the old one over a kept-alive connection (a review), for as long as its
        server kept it open, and a host on the old address was asked beside it."""
        resolver = self._resolver
        if conn.address is None or resolver is None:
            return True  # through a proxy, or a name no one looks up here
        pinned = resolver.pinned(conn.origin.host)
        if pinned is not None and pinned is conn.answer:
            return True  # the same answer as when last checked
        with trio.move_on_after(limit) as scope:
            answer = await self._address(conn.origin)
        if scope.cancelled_caught:
            raise httpx2.ConnectTimeout(f"could not look {conn.origin.host} up within {limit} s")
        assert answer is not None and answer.address is not None and conn.address is not None
        if address_key(answer.address) != address_key(conn.address):
            return False
        conn.answer = resolver.pinned(conn.origin.host)
        return True

    async def _connect(self, origin: Origin, limit: float) -> _Connection:
        via = self._proxy or origin
        address = answer = None
        tried: list[str] = []
        proxied = False  # a connection to the proxy made
        with trio.move_on_after(limit) as scope:
            try:
                checked = await self._address(origin) if self._resolver is not None else None
                # Behind a proxy the check is all there is to do: the proxy connects.
                if checked is not None and self._proxy is None:
                    # The addresses of the key the host was filed under (the per-IP
                    # rule's and the lease's: its first address's) alone. Another
                    # took the request past both, to a server neither held: N names
                    # of a page each answering [a dead address, the victim's] had N
                    # requests at once at the victim (a review).
                    key = address_key(checked.addresses[0])
                    tried = [a for a in checked.addresses if address_key(a) == key]
                    tcp, used = await connect_in_turn(tried, via.port, scope.deadline)
                    address = tried[used]
                    answer = self._pinned_to(origin.host, tuple(tried[:used]))
                elif self._proxy is None:
                    tcp = await trio.open_tcp_stream(via.host, via.port)
                else:
                    tcp = await self._open_proxy()
                    proxied = True
                stream: DirectSocketStream | TlsStream = DirectSocketStream(tcp)
                if origin.scheme == "https":
                    try:
                        if self._proxy is not None:
                            authority = f"{_bracketed(origin.host)}:{origin.port}"
                            await open_tunnel(stream, authority.encode("ascii"))
                        stream = await self._handshake(stream, origin)
                    except BaseException:
                        await trio.aclose_forcefully(stream)
                        raise
            except (OSError, trio.BrokenResourceError, ssl.SSLError) as exc:
                if (why := out_of_descriptors(exc)) is not None:
                    raise self._no_sockets(why) from exc
                self._unreached(origin.host, tried, address)
                raise httpx2.ConnectError(str(exc) or type(exc).__name__) from exc
        if scope.cancelled_caught:
            if self._proxy is not None and not proxied:
                # One that drops connections (behind a firewall) is down too (a review).
                raise self._proxy_down(f"no answer within {limit:g} s")
            self._unreached(origin.host, tried, address)
            raise httpx2.ConnectTimeout(f"could not connect within {limit} s")
        return _Connection(stream, origin, address, answer)

    async def _open_proxy(self) -> trio.SocketStream:
        """A connection to the proxy. One that cannot be made fails every request, as
        :class:`ProxyUnreachable`; it is said, with why, at most once a minute."""
        assert self._proxy is not None
        try:
            return await trio.open_tcp_stream(self._proxy.host, self._proxy.port)
        except OSError as exc:
            if (why := out_of_descriptors(exc)) is not None:
                raise self._no_sockets(why) from exc
            raise self._proxy_down(str(exc)) from exc

    def _no_sockets(self, why: str) -> OutOfSockets:
        if (now := trio.current_time()) >= self._sockets_said_at + 60.0:
            self._sockets_said_at = now
            log.warning("cannot open a connection: %s; requests wait and go on", why)
        return OutOfSockets(why)

    def _proxy_down(self, why: str) -> ProxyUnreachable:
        """The proxy's failure, said at most once a minute."""
        assert self._proxy is not None
        where = f"{_bracketed(self._proxy.host)}:{self._proxy.port}"
        if (now := trio.current_time()) >= self._proxy_said_at + 60.0:
            self._proxy_said_at = now
            log.warning("cannot connect to the proxy %s: %s", where, why)
        return ProxyUnreachable(f"cannot connect to the proxy {where}: {why}")

    def _unreached(self, name: str, tried: list[str], connected: str | None) -> None:
        """None of the addresses ``tried`` (those of the key the host is filed under)
        answered a connection: they go to the back of the name's answer, so that its
        next address, another server's, is the one the crawl files the host under (the
        DNS stage looks it up again: the per-IP rule and the lease follow) and the next
        request tries. Kept first, a dead first address failed every request of a
        round-robin name until its answer expired (an hour), and gave its host up."""
        if tried and connected is None and self._resolver is not None:
            self._resolver.demote(name, tried)

    def _pinned_to(self, name: str, dead: tuple[str, ...]) -> Lookup | None:
        """The cached answer for ``name`` once its addresses in ``dead`` (those tried
        before the one that answered) went to its back: the address that answered is
        the one the name is pinned to from now on, tried first."""
        assert self._resolver is not None
        if dead:
            log.debug("%s: %s did not answer; pinned to the next address", name, ", ".join(dead))
            self._resolver.demote(name, dead)
        return self._resolver.pinned(name)

    async def _address(self, origin: Origin) -> Lookup | None:
        """The addresses to connect to for ``origin``, the first first: the resolver's
        pinned answer (the one the DNS stage checked), or a fresh lookup, each checked
        the same way; None for a name behind a proxy, which the proxy looks up."""
        assert self._resolver is not None
        host = _bracketed(origin.host)
        if origin.port != DEFAULT_PORTS[origin.scheme]:
            host = f"{host}:{origin.port}"  # as a URL's host key has it
        if not self._resolver.wanted(host):
            return None
        answer = await self._resolver.resolve(host)
        if answer.address is None:
            assert answer.error is not None
            if answer.error is DnsFailure.REFUSED:
                raise AddressRefused(f"{answer.error.value}: {origin.host}")
            raise httpx2.ConnectError(f"{answer.error.value}: {origin.host}")
        return answer

    async def _handshake(self, stream: trio.abc.Stream, origin: Origin) -> TlsStream:
        ctx = self._ssl_context or tls_context(self._ca_bundle)
        tls = TlsStream(stream, ctx, origin.host, self._sessions.get(origin))
        try:
            await tls.do_handshake()
        except BaseException as exc:
            bad = certificate_failure(exc)
            if bad is not None:
                raise CertificateError(bad.verify_message or str(bad)) from exc
            raise
        return tls

    def _keep_session(self, conn: _Connection, tls: TlsStream) -> None:
        """Keep the connection's TLS session for the next connection to its origin:
        the newest ticket, as RFC 8446 asks a client to use each once. Where a session
        can only be read through ssl's copy (``fast_sessions()`` false), which costs
        about what resuming spares, one ticket serves until the server turns it down."""
        conn.session_checked = True
        if tls.session_reused and conn.origin in self._sessions and not fast_sessions():
            return
        session = tls.session
        if session is None:
            return
        self._sessions.pop(conn.origin, None)
        if len(self._sessions) >= _MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        self._sessions[conn.origin] = session

    async def _release(self, conn: _Connection, *, reusable: bool, reset: bool = False) -> None:
        if not conn.session_checked and isinstance(conn.stream, TlsStream):
            self._keep_session(conn, conn.stream)
        if reusable and not self._closed:
            idle = self._idle.setdefault(conn.origin, [])
            if len(idle) < self._max_idle_per_origin:
                conn.idle_since = trio.current_time()
                idle.append(conn)
                self._idle_order[conn] = None
                if isinstance(conn.stream, TlsStream):
                    self._idle_tls[conn] = None
                    if len(self._idle_tls) > self._max_idle_tls:
                        await self._close_idle(next(iter(self._idle_tls)))
                        return
                if len(self._idle_order) > self._max_idle:
                    await self._close_idle(next(iter(self._idle_order)))
                return
        await conn.aclose(reset=reset)

    async def _close_idle(self, conn: _Connection) -> None:
        del self._idle_order[conn]
        self._idle_tls.pop(conn, None)
        idle = self._idle[conn.origin]
        idle.remove(conn)
        if not idle:
            del self._idle[conn.origin]
        await conn.aclose()


# Keep-Alive's "timeout=N" (RFC 2068 19.7.1.1, as Apache and others still send it).
_KEEP_ALIVE_TIMEOUT = re.compile(rb"(?:^|[\s,])timeout\s*=\s*(\d{1,9})", re.IGNORECASE)


def _kept_for(headers: list[tuple[bytes, bytes]], was: float) -> float:
    """How long to keep a connection idle for reuse, by its answer's Keep-Alive: a
    second less than the server keeps it. Apache's 5 s against a Crawl-delay of 5
    cut a third of the requests sent as it closed (12-13 of 40, a review found)."""
    for name, value in headers:
        if name.lower() == b"keep-alive" and (found := _KEEP_ALIVE_TIMEOUT.search(value)):
            return max(0.0, int(found.group(1)) - 1.0)
    return was


def default_max_idle() -> int:
    """Idle connections kept in all: the share of file descriptors the peer's
    accepted connections have too."""
    return descriptor_share(16)
