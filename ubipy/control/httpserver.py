"""A small HTTP/1.1 server on trio + h11, for the control centre's few routes.

One job: turn bytes on a connection into whole :class:`Request` objects and
:class:`Answer` objects back into bytes, keeping alive what can be kept alive and
surviving whatever a client sends. What to answer is the caller's function.

A client that sends garbage gets 400, an over-long body 413, a request that drips
in too slowly 408, and only its own connection is closed. Bodies are read whole
(they are capped), since every route here wants all of its body before acting.

A connection that never sends a request costs a slot for ``request_timeout`` only,
and at the cap a newcomer pushes out, in this order: a connection lingering after its
last answer (its conversation is over); the one that has waited longest for its next
request (as the peer port pushes out its oldest unauthenticated one); else the one
whose request, or whose answer, began longest ago, over a second ago (a real request
is read, and an answer here taken, in milliseconds). So a stranger holding silent,
dripping or never-reading connections cannot lock everyone else out. Only when every
connection is reading a request or sending an answer begun within the second is a
newcomer turned away with 503.

A client may send requests ahead of its answers (pipelining), but the
``MAX_PIPELINED``-th answer in a row to a request sent ahead closes the connection:
one that sends thousands and reads nothing would have each answered into full
buffers. HTTP/1.1 lets a server close after any answer, and a pipelining client sends
what was not answered again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any, Final, Literal

import h11
import trio

from ubipy.net import remote_host

log = logging.getLogger(__name__)

_READ_SIZE: Final = 65_536
JSON_TYPE: Final = "application/json"
# After an answer that ends the connection, unread input is drained this long.
_LINGER: Final = 1.0
_LINGER_BYTES: Final = 4 << 20
# A request being read, or an answer being sent, this long may be pushed out for a
# newcomer at the cap; one read whole and being answered (a seed request waiting for
# the disk), only this long, after every other: a stranger's connections that said
# "GET / HTTP/1.1" pushed out the operator's request, cancelled (a review).
_READ_GRACE: Final = 1.0
_ANSWER_GRACE: Final = 30.0
# Answers in a row to requests sent before the previous answer went, the last of which
# closes the connection.
MAX_PIPELINED: Final = 16


@dataclass(frozen=True, slots=True)
class HttpLimits:
    max_body: int = 1 << 20
    max_head: int = 16 * 1024
    # A connection's first request must arrive whole within this of its accept, and
    # a later one within this of its first byte.
    request_timeout: float = 10.0
    # A kept-alive connection with no request for this long after its last answer
    # is closed.
    idle_timeout: float = 60.0
    # Even on loopback, one local program should not be able to hold every fd. At
    # the cap a newcomer pushes out the connection idle longest.
    max_connections: int = 64


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    # The target's path, without the query.
    path: str
    # Lower-case names; repeated headers are joined with ", ".
    headers: Mapping[str, str]
    body: bytes
    # The client's address ("?" if it could not be read, as the peer port says it):
    # whom failures are held against.
    source: str = ""


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()
    close: bool = False


def json_answer(status: int, value: object, **extra: Any) -> Answer:
    body = json.dumps(value, allow_nan=False, separators=(",", ":")).encode("utf-8")
    return Answer(status, body, JSON_TYPE, **extra)


def error(status: int, message: str, **extra: Any) -> Answer:
    return json_answer(status, {"error": message}, **extra)


class _TooLarge(Exception):
    pass


class _Refused(Exception):
    """A request refused from its head alone, its body unread."""

    def __init__(self, answer: Answer, method: bytes) -> None:
        super().__init__(answer.status)
        self.answer = answer
        self.method = method


class _TimedOut(Exception):
    pass


_Phase = Literal["waiting", "reading", "answering", "sending", "ending"]


@dataclass(eq=False, slots=True)
class _Slot:
    """One accepted connection's place under the cap; cancelling ``scope`` ends it."""

    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    held: bool = True
    # Waiting for a request, reading one, answering it, sending the answer, or
    # lingering after the last; and since when (a request from its first byte).
    phase: _Phase = "waiting"
    since: float = 0.0


def _begun_by(table: OrderedDict[_Slot, None], when: float) -> _Slot | None:
    """The first slot of ``table``, if its phase began by ``when``."""
    slot = next(iter(table), None)
    return slot if slot is not None and slot.since <= when else None


class HttpServer:
    """Serves connections with ``answer``; pass ``handle`` to ``trio.serve_listeners``."""

    def __init__(
        self,
        answer: Callable[[Request], Awaitable[Answer]],
        limits: HttpLimits,
        *,
        screen: Callable[[Request], Answer | None] | None = None,
    ) -> None:
        """``screen``: the answer a request's head earns before its body is read (a
        refusal), else None."""
        self._answer = answer
        self._screen = screen
        self.limits = limits
        # Connections held under the cap (one pushed out stops counting at once).
        self.connections = 0
        # Those waiting for their next request, longest waiting first; those reading
        # one or sending an answer, begun first first; those answering one, first
        # first; and those lingering after their last answer, first first. Each table
        # is in the order its slots are pushed out.
        self._idle: OrderedDict[_Slot, None] = OrderedDict()
        self._busy: OrderedDict[_Slot, None] = OrderedDict()
        self._answering: OrderedDict[_Slot, None] = OrderedDict()
        self._ending: OrderedDict[_Slot, None] = OrderedDict()
        self.evicted = 0
        self.refused = 0
        self.refusing = 0  # refusals still lingering

    @property
    def idle(self) -> int:
        """How many held connections are waiting for a request (may be pushed out)."""
        return len(self._idle)

    async def handle(self, stream: trio.SocketStream) -> None:
        accepted = trio.current_time()
        while self.connections >= self.limits.max_connections and self._evict(accepted):
            pass
        if self.connections >= self.limits.max_connections:
            self.refused += 1  # every connection answering, or reading a request just begun
            if self.refusing >= self.limits.max_connections:
                # Each refusal lingers for a second: thousands a second held every
                # descriptor of the process (found by a review). Past the bound, the
                # connection is closed unanswered.
                await trio.aclose_forcefully(stream)
                return
            self.refusing += 1
            try:
                await _refuse(stream)
            finally:
                self.refusing -= 1
            return
        slot = _Slot(since=accepted)
        self.connections += 1
        self._idle[slot] = None
        try:
            with slot.scope:
                await self._converse(stream, slot, accepted, remote_host(stream))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the client went; only its own connection ends
        except Exception:
            # Whatever one request does, the server and the peer around it go on.
            log.exception("control: connection failed")
        finally:
            self._release(slot)
            await trio.aclose_forcefully(stream)

    def _evict(self, now: float) -> bool:
        """Push out a connection lingering after its last answer, else the one that has
        waited longest for a request, else the one whose request or answer began
        longest ago, if over _READ_GRACE ago (a byte every few seconds kept a
        connection from being pushed out, and so did a client that never reads its
        answers; a real request is read, and an answer taken, in milliseconds), else
        the one answering a request longest, if over _ANSWER_GRACE. False if none may
        go."""
        slot = (
            next(iter(self._ending), None)
            or next(iter(self._idle), None)
            or _begun_by(self._busy, now - _READ_GRACE)
            or _begun_by(self._answering, now - _ANSWER_GRACE)
        )
        if slot is None:
            return False
        self._release(slot)
        slot.scope.cancel()
        self.evicted += 1
        return True

    def _release(self, slot: _Slot) -> None:
        if slot.held:
            slot.held = False
            self.connections -= 1
            self._idle.pop(slot, None)
            self._busy.pop(slot, None)
            self._answering.pop(slot, None)
            self._ending.pop(slot, None)

    def _enter(self, slot: _Slot, phase: _Phase) -> None:
        """``slot`` begins ``phase`` now: the newest of its table to be pushed out. A
        phase already under way goes on (a request is timed from its first byte, not
        each)."""
        if not slot.held or slot.phase == phase:
            return
        self._idle.pop(slot, None)
        self._busy.pop(slot, None)
        self._answering.pop(slot, None)
        self._ending.pop(slot, None)
        slot.phase, slot.since = phase, trio.current_time()
        if phase == "waiting":
            self._idle[slot] = None
        elif phase == "ending":
            self._ending[slot] = None
        elif phase == "answering":
            self._answering[slot] = None
        else:
            self._busy[slot] = None

    async def _converse(
        self, stream: trio.SocketStream, slot: _Slot, accepted: float, source: str
    ) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_head)
        # The first request is due soon after the accept: a connection that says
        # nothing costs a slot for request_timeout, not idle_timeout.
        deadline = accepted + self.limits.request_timeout
        # Answers in a row to requests that came before the previous answer went.
        ahead = 0
        while True:
            try:
                request = await self._read(conn, stream, slot, deadline, source)
            except h11.RemoteProtocolError as exc:
                answer = error(exc.error_status_hint, str(exc), close=True)
                await self._send(conn, stream, slot, answer)
                await self._linger(stream, slot)
                return
            except _Refused as refused:
                # The body unread: the connection cannot carry another request.
                answer = dataclasses.replace(refused.answer, close=True)
                await self._send(conn, stream, slot, answer, head_only=refused.method == b"HEAD")
                await self._linger(stream, slot)
                return
            except _TooLarge:
                limit = self.limits.max_body
                answer = error(413, f"the body is larger than {limit} bytes", close=True)
                await self._send(conn, stream, slot, answer)
                await self._linger(stream, slot)
                return
            except _TimedOut:
                if conn.their_state is not h11.IDLE or conn.trailing_data[0]:
                    answer = error(408, "the request did not arrive in time", close=True)
                    await self._send(conn, stream, slot, answer)
                return
            if request is None:
                return
            ahead = ahead + 1 if conn.trailing_data[0] else 0
            self._enter(slot, "answering")
            try:
                answer = await self._answer(request)
            except Exception:
                log.exception("control: %s %s failed", request.method, request.path)
                answer = error(500, "internal error")
            if ahead >= MAX_PIPELINED:
                # Requests still come ahead of their answers: no more are read from a
                # client that may not be reading its answers at all.
                answer = dataclasses.replace(answer, close=True)
            await self._send(conn, stream, slot, answer, head_only=request.method == "HEAD")
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                await self._linger(stream, slot)
                return
            conn.start_next_cycle()
            # Kept alive after a whole request was answered: the next may take a while.
            deadline = trio.current_time() + self.limits.idle_timeout

    async def _read(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        slot: _Slot,
        deadline: float,
        source: str,
    ) -> Request | None:
        """The next whole request, due by ``deadline`` and within request_timeout of its
        first byte; None when the client closed between requests."""
        limits = self.limits
        if conn.trailing_data[0]:  # a pipelined request is already under way
            self._enter(slot, "reading")
            deadline = min(deadline, trio.current_time() + limits.request_timeout)
        else:
            self._enter(slot, "waiting")
        head: h11.Request | None = None
        body = bytearray()
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                with trio.move_on_at(deadline):
                    data = await stream.receive_some(_READ_SIZE)
                    conn.receive_data(data)
                    if data and head is None and conn.their_state is h11.IDLE:
                        self._enter(slot, "reading")
                        deadline = min(deadline, trio.current_time() + limits.request_timeout)
                    continue
                raise _TimedOut
            if isinstance(event, h11.Request):
                head = event
                # h11 bounds a head that arrives in pieces; one read can bring more.
                if _head_size(event) > limits.max_head:
                    raise h11.RemoteProtocolError("the request head is too large", 431)
                length = _content_length(event)
                if length is not None and length > limits.max_body:
                    raise _TooLarge
                screen = self._screen
                if screen is not None and (early := screen(_request(event, b"", source))):
                    raise _Refused(early, event.method)
                if conn.they_are_waiting_for_100_continue:
                    interim = h11.InformationalResponse(status_code=100, headers=[])
                    await stream.send_all(conn.send(interim) or b"")
            elif isinstance(event, h11.Data):
                body += event.data
                if len(body) > limits.max_body:
                    raise _TooLarge
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                return _request(head, bytes(body), source)
            elif isinstance(event, h11.ConnectionClosed):
                return None
            else:  # PAUSED cannot come before we answer; anything else is h11's surprise
                raise h11.RemoteProtocolError(f"unexpected {event!r}")

    async def _send(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        slot: _Slot,
        answer: Answer,
        *,
        head_only: bool = False,
    ) -> None:
        if conn.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return  # nothing can be said on this connection any more
        self._enter(slot, "sending")
        headers = [
            ("Content-Type", answer.content_type),
            ("Content-Length", str(len(answer.body))),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Server", "ubipy"),
            *answer.headers,
        ]
        if answer.close:
            headers.append(("Connection", "close"))
        reason = HTTPStatus(answer.status).phrase.encode("ascii")
        data = conn.send(h11.Response(status_code=answer.status, headers=headers, reason=reason))
        out = bytearray(data or b"")
        if answer.body and not head_only:
            out += conn.send(h11.Data(data=answer.body)) or b""
        out += conn.send(h11.EndOfMessage()) or b""
        # A client that does not read its answer holds a connection, not the server.
        with trio.move_on_after(self.limits.request_timeout) as scope:
            await stream.send_all(bytes(out))
        if scope.cancelled_caught:
            raise trio.BrokenResourceError("the client did not take its answer")

    async def _linger(self, stream: trio.SocketStream, slot: _Slot) -> None:
        """After the last answer: the first to give way to a newcomer at the cap."""
        self._enter(slot, "ending")
        await _linger(stream)


def _head_size(event: h11.Request) -> int:
    return len(event.target) + sum(len(k) + len(v) + 4 for k, v in event.headers)


def _content_length(event: h11.Request) -> int | None:
    for name, value in event.headers:
        if name == b"content-length":
            return int(value)  # h11 has checked it is a number
    return None


def _request(head: h11.Request, body: bytes, source: str) -> Request:
    headers: dict[str, str] = {}
    for name, value in head.headers:  # h11 gives names in lower case
        key = name.decode("ascii")
        text = value.decode("latin-1")
        headers[key] = f"{headers[key]}, {text}" if key in headers else text
    target = head.target.decode("latin-1")
    method = head.method.decode("ascii").upper()
    return Request(method, target.partition("?")[0], headers, body, source)


async def _linger(stream: trio.SocketStream) -> None:
    """Half-close, then read and drop what the client is still sending for a moment.

    Closing with unread bytes in the socket makes the kernel send a reset, which can
    destroy our answer (a 413, a 400) before the client has read it.
    """
    with (
        trio.move_on_after(_LINGER),
        contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError),
    ):
        await stream.send_eof()
        drained = 0
        while drained < _LINGER_BYTES and (data := await stream.receive_some(_READ_SIZE)):
            drained += len(data)


async def _refuse(stream: trio.SocketStream) -> None:
    with (
        trio.move_on_after(_LINGER),
        contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError),
    ):
        await stream.send_all(
            b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
            b"Retry-After: 1\r\nConnection: close\r\n\r\n"
        )
    await _linger(stream)
    await trio.aclose_forcefully(stream)
