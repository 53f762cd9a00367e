"""The synthetic web on loopback: one trio + h11 socket acting as an HTTP forward proxy.

The crawler is pointed at `proxy_url`, so every `hNNN.synth.test` name resolves without
DNS: requests arrive in absolute-form (`GET http://h003.synth.test/x HTTP/1.1`) and are
dispatched on their host. Origin-form with a Host header works too, for plain clients.

HTTPS, when the server is given a TLS context (a certificate for `*.synth.test`): a
`CONNECT host:443` is answered 200, TLS is spoken on the tunnel, and the requests in it
are served as any other. The web is the same one, logged under the same host and path;
only the absolute links and redirects it sends over TLS say `https://`, so a crawl that
starts at `https://h000.synth.test/` stays on HTTPS. With `max_requests` a connection is
closed (`Connection: close`) after that many answers, as many servers do: a client then
pays a new connection (and a new TLS handshake) for every `max_requests` pages.
"""

from __future__ import annotations

import dataclasses
import gzip
import ipaddress
import re
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import h11
import trio

from ubipy.synthweb import log as outcomes
from ubipy.synthweb.log import Request, RequestLog, peer_from
from ubipy.synthweb.model import SyntheticWeb
from ubipy.synthweb.spec import Response
from ubipy.synthweb.urls import normalize_target

_READ_SIZE = 65536


@dataclass(eq=False)
class SynthServer:
    """A running server: where it listens and what it has seen."""

    web: SyntheticWeb
    host: str
    port: int
    log: RequestLog = field(default_factory=RequestLog)
    # Requests so far per normalised URL: feeds `prior_requests` (transient failures) and
    # the jitter's seed, so a replayed crawl sees the same responses in the same order.
    counts: dict[str, int] = field(default_factory=dict)
    # Requests read but not yet logged. The log entry is written after the last byte is
    # handed to the OS, so a client can see its response before the entry exists:
    # `await server.wait_idle()` before judging a crawl.
    in_flight: int = 0
    # HTTPS through CONNECT, when set; answers per connection before it is closed.
    tls: ssl.SSLContext | None = None
    max_requests: int | None = None
    _idle: trio.Event = field(default_factory=trio.Event)

    async def wait_idle(self) -> None:
        """Return once no request is between its head being read and its log entry."""
        while self.in_flight:
            if self._idle.is_set():
                self._idle = trio.Event()
            await self._idle.wait()

    @property
    def proxy_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def handle(self, stream: trio.SocketStream) -> None:
        """Serve one connection: keep-alive until the client closes or breaks protocol
        (or `max_requests` answers); a CONNECT turns it into a TLS connection."""
        try:
            ip, port = stream.socket.getpeername()[:2]
            address = f"{ip}:{port}"
        except OSError:
            address = "unknown"
        served: trio.abc.Stream = stream
        try:
            tunnel = await self._serve(stream, address, https=False)
            if tunnel is not None and self.tls is not None:
                served = trio.SSLStream(stream, self.tls, server_side=True)
                await served.do_handshake()
                await self._serve(served, address, https=True)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            pass  # a client that hangs up or speaks nonsense ends only its own connection
        finally:
            await trio.aclose_forcefully(served)

    async def _serve(self, stream: trio.abc.Stream, address: str, *, https: bool) -> str | None:
        """Requests until the connection ends; the authority of a CONNECT accepted
        (only on a plain connection, and only with TLS), after which it is the tunnel's."""
        conn = h11.Connection(h11.SERVER)
        answered = 0
        while True:
            event = await _next_event(conn, stream)
            if not isinstance(event, h11.Request):
                return None
            if event.method == b"CONNECT" and not https:
                return await _accept_tunnel(conn, stream, event, self.tls is not None)
            answered += 1
            last = self.max_requests is not None and answered >= self.max_requests
            if not await self._answer(conn, stream, event, address, https=https, last=last):
                return None
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return None
            conn.start_next_cycle()

    async def _answer(
        self,
        conn: h11.Connection,
        stream: trio.abc.Stream,
        req: h11.Request,
        address: str,
        *,
        https: bool = False,
        last: bool = False,
    ) -> bool:
        start = trio.current_time()
        self.begin()
        try:
            return await self._answer_counted(conn, stream, req, address, start, https, last)
        finally:
            self.end()

    def begin(self) -> None:
        """A request is read: `wait_idle` waits until its entry is logged (`end`)."""
        self.in_flight += 1

    def end(self) -> None:
        self.in_flight -= 1
        if not self.in_flight:
            self._idle.set()

    def prepare(
        self, method: str, host: str, target: str, conditions: Mapping[str, str] | None = None
    ) -> tuple[Response, float]:
        """The model's answer to one request and the seconds to wait before sending it;
        counts the request (a URL's transient failures and jitter follow its count).
        `conditions`: the request's If-None-Match and If-Modified-Since, if sent."""
        try:
            key = normalize_target(host, target)
        except ValueError:
            key = f"http://{host}{target}"
        n = self.counts.get(key, 0)
        self.counts[key] = n + 1
        if method in ("GET", "HEAD"):
            try:
                response = self.web.respond(
                    host, target, prior_requests=n, now=trio.current_time(), conditions=conditions
                )
            except ValueError:  # an unparsable host or target: the client's fault
                response = Response(400, (("Content-Type", "text/plain"),), b"bad request\n")
        else:
            response = Response(405, (("Allow", "GET, HEAD"),), b"method not allowed\n")
        return response, self.web.latency_for(host, target, n)

    async def _answer_counted(
        self,
        conn: h11.Connection,
        stream: trio.abc.Stream,
        req: h11.Request,
        address: str,
        start: float,
        https: bool = False,
        last: bool = False,
    ) -> bool:
        method = req.method.decode("ascii", "replace").upper()
        headers = {k.lower(): v.decode("latin-1") for k, v in req.headers}
        user_agent = headers.get(b"user-agent", "")
        host, target = _route(req.target.decode("latin-1"), headers.get(b"host", ""))
        if https:
            host = host.removesuffix(":443")
        while True:  # drain any request body; we never use it
            event = await _next_event(conn, stream)
            if isinstance(event, h11.EndOfMessage):
                break
            if not isinstance(event, h11.Data):
                return False
        conditions = {k.decode(): headers[k] for k in CONDITIONS if k in headers}
        response, delay = self.prepare(method, host, target, conditions)
        if https:
            response = _over_tls(response)
        if last:
            response = dataclasses.replace(response, headers=(*response.headers, _CLOSE))
        progress = _Progress()
        try:
            if delay > 0:
                await trio.sleep(delay)
            await _send(conn, stream, response, progress, head_only=method == "HEAD")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False  # the client went mid-response: logged below as abandoned
        finally:
            # Logged even when the client hung up mid-body: the request still happened.
            self.log.append(
                Request(
                    start=start,
                    end=progress.end_time(),
                    host=host,
                    target_path=target,
                    status=progress.status,
                    user_agent=user_agent,
                    peer=peer_from(user_agent, address),
                    bytes_sent=progress.sent,
                    method=method,
                    outcome=progress.outcome,
                    retry_after=dict(response.headers).get("Retry-After", ""),
                    clock_offset=time.time() - trio.current_time(),
                )
            )
        return progress.outcome == outcomes.COMPLETE


_CLOSE = ("Connection", "close")
# Request headers the model may answer 304 to (the changing web's validators).
CONDITIONS = (b"if-none-match", b"if-modified-since")
# An absolute http URL, with the default port if it was written (the model's ":80" links).
_HTTP_URL = re.compile(rb"(?i:http)://([A-Za-z0-9.\-]+)(?::80)?(?=[/\"'\s<>?#]|$)")


def _over_tls(response: Response) -> Response:
    """The answer as an HTTPS site gives it: absolute links and redirects say https."""
    headers = tuple(
        (k, "https://" + v[7:].replace(":80/", "/", 1))
        if k.lower() == "location" and v[:7].lower() == "http://"
        else (k, v)
        for k, v in response.headers
    )
    body = response.body
    if response.stream is None and body[:2] == b"\x1f\x8b":  # a gzipped document
        body = gzip.compress(_HTTP_URL.sub(rb"https://\1", gzip.decompress(body)), mtime=0)
    elif response.stream is None and b"://" in body:
        body = _HTTP_URL.sub(rb"https://\1", body)
    return dataclasses.replace(response, headers=headers, body=body)


async def _accept_tunnel(
    conn: h11.Connection, stream: trio.abc.Stream, req: h11.Request, allowed: bool
) -> str | None:
    """Answer a CONNECT: 200 when TLS is served (the caller speaks it next), else 405."""
    while not isinstance(await _next_event(conn, stream), h11.EndOfMessage):
        pass
    if not allowed:
        refusal = h11.Response(status_code=405, headers=[("Content-Length", "0"), _CLOSE])
        await stream.send_all((conn.send(refusal) or b"") + (conn.send(h11.EndOfMessage()) or b""))
        return None
    await stream.send_all(conn.send(h11.Response(status_code=200, headers=[])) or b"")
    return req.target.decode("latin-1")


def _route(raw_target: str, host_header: str) -> tuple[str, str]:
    """(host, path_and_query) of absolute-form or origin-form; host lower-case, no :80."""
    if raw_target[:7].lower() == "http://" or raw_target[:8].lower() == "https://":
        try:
            parts = urlsplit(raw_target)
        except ValueError:  # e.g. a broken IPv6 literal: answered 400 later
            return "", raw_target
        host = parts.netloc.rsplit("@", 1)[-1]
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    else:
        host, target = host_header, raw_target
    host = host.strip().lower()
    return host.removesuffix(":80"), target


async def _next_event(conn: h11.Connection, stream: trio.abc.Stream) -> object:
    while True:
        event = conn.next_event()
        if event is not h11.NEED_DATA:
            return event
        conn.receive_data(bytes(await stream.receive_some(_READ_SIZE)))


class _Progress:
    """How much of a response went out, and when the last bytes were handed over.

    The end of a request is the moment its last bytes reach the socket, taken
    before the send: the task may resume only later, when the event loop gets to
    it, and a late timestamp would make the next request's gap look short. A
    response never completed ends when the server noticed: the client went (taken
    as soon as the task watching for it wakes, not once the response's task has
    been cancelled and logs, which other tasks' turns can delay by milliseconds),
    or the server cut or reset the connection.
    """

    __slots__ = ("handed_at", "left_at", "outcome", "sent", "status")

    def __init__(self) -> None:
        self.sent = 0
        self.handed_at: float | None = None
        self.left_at: float | None = None  # when the client was seen to go
        self.status = 0  # the status line, once sent; 0 if none was (hang, reset)
        self.outcome = outcomes.ABANDONED  # until the last bytes are handed over

    def end_time(self) -> float:
        if self.outcome == outcomes.COMPLETE and self.handed_at is not None:
            return self.handed_at
        return trio.current_time() if self.left_at is None else self.left_at


async def _send(
    conn: h11.Connection,
    stream: trio.abc.Stream,
    response: Response,
    progress: _Progress,
    *,
    head_only: bool,
) -> None:
    if response.fault == "hang":
        progress.left_at = await _until_client_goes(conn, stream)
        return  # abandoned, status 0
    if response.fault == "reset":
        # SO_LINGER with a zero timeout makes close() send an RST instead of a FIN.
        sock = stream if isinstance(stream, trio.SocketStream) else None
        if isinstance(stream, trio.SSLStream) and isinstance(
            stream.transport_stream, trio.SocketStream
        ):
            sock = stream.transport_stream
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await stream.aclose()
        progress.outcome = outcomes.RESET
        return
    headers = [(k, v) for k, v in response.headers]
    headers.append(("Server", "synthweb"))
    if response.stream is None and response.status != 304:  # a 304 has no body to measure
        headers.append(("Content-Length", str(len(response.body))))
    elif response.content_length is not None:
        headers.append(("Content-Length", str(response.content_length)))

    async def write(data: bytes, *, last: bool = False) -> None:
        if last:  # set before the send: the task may resume long after the bytes left
            progress.outcome = outcomes.COMPLETE
        if data:
            progress.sent += len(data)
            progress.handed_at = trio.current_time()
            try:
                await stream.send_all(data)
            except BaseException:
                progress.outcome = outcomes.ABANDONED  # not all of it left
                raise

    head = conn.send(h11.Response(status_code=response.status, headers=headers)) or b""
    progress.status = response.status
    if head_only:
        await write(head + (conn.send(h11.EndOfMessage()) or b""), last=True)
        return
    if response.stream is not None:
        await write(head)
        if await _stream_body(conn, stream, response, write, progress):
            if response.fault == "cut":
                progress.outcome = outcomes.CUT  # closed without the body's end
            else:
                await write(conn.send(h11.EndOfMessage()) or b"", last=True)
        return
    # One write for a whole response: fewer wake-ups, and one moment it was handed over.
    body = conn.send(h11.Data(data=response.body)) or b"" if response.body else b""
    await write(head + body + (conn.send(h11.EndOfMessage()) or b""), last=True)


async def _stream_body(
    conn: h11.Connection,
    stream: trio.abc.Stream,
    response: Response,
    write: Callable[[bytes], Awaitable[None]],
    progress: _Progress,
) -> bool:
    """Send the streamed body; False if the client went first. A stream may sleep (slow)
    or block on a full socket (endless), so a watcher notices the client leaving meanwhile
    and the log's `end` is when it left, not when the next write would have failed."""
    assert response.stream is not None
    finished = False
    async with trio.open_nursery() as nursery:

        async def watch() -> None:
            progress.left_at = await _until_client_goes(conn, stream)
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch)
        try:
            async with aclosing(response.stream()) as chunks:
                async for chunk in chunks:
                    if chunk:
                        await write(conn.send(h11.Data(data=chunk)) or b"")
            finished = True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went; raised here, it would come out in an exception group
        nursery.cancel_scope.cancel()
    return finished


async def _until_client_goes(conn: h11.Connection, stream: trio.abc.Stream) -> float:
    """Read until EOF or an error, and say when that came; bytes a client sends
    meanwhile go to h11's buffer."""
    try:
        while data := await stream.receive_some(_READ_SIZE):
            conn.receive_data(bytes(data))
    except (trio.BrokenResourceError, trio.ClosedResourceError, h11.RemoteProtocolError):
        pass
    return trio.current_time()


def _check_loopback(host: str) -> None:
    if not ipaddress.ip_address(host).is_loopback:
        raise ValueError(f"synthweb serves on loopback only, not {host}")


async def serve(
    web: SyntheticWeb,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    tls: ssl.SSLContext | None = None,
    max_requests: int | None = None,
    task_status: trio.TaskStatus[SynthServer] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve `web` until cancelled; `await nursery.start(serve, web)` gives the SynthServer.
    `tls`: serve HTTPS through CONNECT too; `max_requests`: answers per connection."""
    _check_loopback(host)
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    server = SynthServer(web=web, host=host, port=bound, tls=tls, max_requests=max_requests)
    task_status.started(server)
    await trio.serve_listeners(server.handle, listeners)
