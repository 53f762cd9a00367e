"""The synthetic web without sockets: an httpx2 transport that answers from the model in
the caller's own task, its latency a ``trio.sleep`` (so a crawl runs on the autojump
clock in tests), and logs every request in the server's :class:`RequestLog`, as the
socket server would, so the :class:`Referee` judges an in-process crawl unchanged.

Several clients share one :class:`SynthServer` (its log, and its per-URL counts that
drive transient failures and jitter): ``server = in_process(web)``, then one
``SynthTransport(server, client=...)`` per crawler. The times logged are the
server's: ``start`` when the request is asked, ``end`` when the response is handed
back (the whole body at once: no bytes on a wire to wait for).

The ordinary web is modelled whole; of the hostile web's faults, a hang (until the
client's read time-out) and a reset. Streamed bodies (slow, huge, endless) are not:
they need the socket server.
"""

from __future__ import annotations

import time

import httpx2
import trio

from ubipy.synthweb import log as outcomes
from ubipy.synthweb.log import Request, peer_from
from ubipy.synthweb.model import SyntheticWeb
from ubipy.synthweb.server import SynthServer


def in_process(web: SyntheticWeb) -> SynthServer:
    """A server's state (request log, counts) with no socket: reach it through
    :class:`SynthTransport`."""
    return SynthServer(web=web, host="in-process", port=0)


class SynthTransport(httpx2.AsyncBaseTransport):
    """An httpx2 transport whose every request goes to ``server``'s model; ``client``
    names the requester in the log when its User-Agent carries no ``peer=`` token."""

    def __init__(self, server: SynthServer, *, client: str = "in-process") -> None:
        self.server = server
        self.client = client

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        server = self.server
        start = trio.current_time()
        method = request.method.upper()
        # As the server routes an absolute-form target: host lower-case, without :80.
        # The name as sent on the wire (punycode for an internationalised one), as the
        # socket server sees it in the request line; httpx2's ``host`` is decoded.
        host = request.url.raw_host.decode("ascii").lower()
        if request.url.port not in (None, 80):
            host = f"{host}:{request.url.port}"
        target = request.url.raw_path.decode("latin-1")
        user_agent = request.headers.get("user-agent", "")
        read_timeout = request.extensions.get("timeout", {}).get("read")
        conditions = {
            name: request.headers[name]
            for name in ("if-none-match", "if-modified-since")
            if name in request.headers
        }
        response, delay = server.prepare(method, host, target, conditions)
        if response.stream is not None:
            raise NotImplementedError(
                f"{request.url}: streamed bodies are not modelled in process; serve the web"
            )
        status, outcome, sent, end = 0, outcomes.ABANDONED, 0, None
        headers = [*response.headers, ("Server", "synthweb")]
        body = b"" if method == "HEAD" else response.body
        if response.status != 304:  # as the socket server: a 304 has no body to measure
            headers.append(("Content-Length", str(len(response.body))))
        server.begin()
        try:
            # The client's read time-out runs from the request: nothing comes before
            # the latency is over (or ever, for a hang).
            with trio.move_on_after(read_timeout or float("inf")) as waiting:
                await trio.sleep(delay)
                if response.fault == "hang":
                    await trio.sleep_forever()
            if waiting.cancelled_caught:
                raise httpx2.ReadTimeout(f"no data for {read_timeout} s", request=request)
            if response.fault == "reset":
                outcome = outcomes.RESET
                raise httpx2.ReadError("connection reset by peer", request=request)
            status, sent = response.status, len(_head(response.status, headers)) + len(body)
            outcome, end = outcomes.COMPLETE, trio.current_time()
        finally:
            # Logged however the request ends, a client that went away (cancelled)
            # included: the request still happened. No await here: a cancelled task
            # still logs.
            now = trio.current_time()
            server.log.append(
                Request(
                    start=start,
                    end=now if end is None else end,
                    host=host,
                    target_path=target,
                    status=status,
                    user_agent=user_agent,
                    peer=peer_from(user_agent, self.client),
                    bytes_sent=sent,
                    method=method,
                    outcome=outcome,
                    retry_after=dict(response.headers).get("Retry-After", ""),
                    clock_offset=time.time() - now,
                )
            )
            server.end()
        return httpx2.Response(
            status_code=status,
            headers=headers,
            content=body,
            extensions={"http_version": b"HTTP/1.1"},
            request=request,
        )

    async def aclose(self) -> None:
        pass  # nothing held: several clients may share one transport


def _head(status: int, headers: list[tuple[str, str]]) -> bytes:
    """The response head as h11 would write it (for the log's byte count)."""
    lines = [f"HTTP/1.1 {status} ".encode()]
    lines += [f"{k}: {v}".encode("latin-1") for k, v in headers]
    return b"\r\n".join([*lines, b"", b""])
