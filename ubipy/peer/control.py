"""The peer's control endpoint: a small HTTP/1.1 API on its listen address.

``POST /api/seed`` (a JSON list of URLs) admits seeds, ``GET /api/status``
answers the peer's figures as JSON, ``POST /api/stop`` starts a graceful stop.
It is served with h11 over trio streams and binds to loopback by default.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import h11
import trio

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body.decode("utf-8"))


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    body: bytes
    content_type: str = "application/json"

    @classmethod
    def of_json(cls, status: int, payload: Any) -> Response:
        return cls(status, json.dumps(payload, indent=1).encode() + b"\n")


Handler = Callable[[Request], Awaitable[Response]]


def parse_listen(addr: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``:PORT`` (loopback) into a host and port."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"listen address must be HOST:PORT, got {addr!r}")
    return (host.strip("[]") or "127.0.0.1"), int(port)


async def serve_http(
    handler: Handler,
    host: str,
    port: int,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``handler`` until cancelled; reports the bound port when ready."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound = listeners[0].socket.getsockname()[1]
    task_status.started(int(bound))

    async def connection(stream: trio.SocketStream) -> None:
        await _connection(stream, handler)

    await trio.serve_listeners(connection, listeners)


async def _connection(stream: trio.abc.Stream, handler: Handler) -> None:
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
    try:
        while True:
            request = await _read_request(stream, conn)
            if request is None:
                return
            try:
                response = await handler(request)
            except (ValueError, KeyError, TypeError) as exc:
                response = Response.of_json(400, {"error": str(exc)})
            await _send(stream, conn, response)
            if conn.our_state is h11.MUST_CLOSE or conn.their_state is h11.MUST_CLOSE:
                return
            conn.start_next_cycle()
    except (h11.ProtocolError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
        log.debug("control connection dropped: %s", exc)
    finally:
        await stream.aclose()


async def _read_request(stream: trio.abc.Stream, conn: h11.Connection) -> Request | None:
    method = path = ""
    body = bytearray()
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await stream.receive_some(65536)
            conn.receive_data(bytes(data))
            continue
        if isinstance(event, h11.Request):
            method = event.method.decode()
            path = event.target.decode()
        elif isinstance(event, h11.Data):
            body += event.data
            if len(body) > MAX_REQUEST_BYTES:
                raise h11.RemoteProtocolError("request body too large")
        elif isinstance(event, h11.EndOfMessage):
            return Request(method, path, bytes(body))
        elif isinstance(event, h11.ConnectionClosed):
            return None


async def _send(stream: trio.abc.Stream, conn: h11.Connection, response: Response) -> None:
    headers = [
        ("content-type", response.content_type),
        ("content-length", str(len(response.body))),
    ]
    data = conn.send(h11.Response(status_code=response.status, headers=headers))
    data = (data or b"") + (conn.send(h11.Data(data=response.body)) or b"")
    data += conn.send(h11.EndOfMessage()) or b""
    await stream.send_all(data)
