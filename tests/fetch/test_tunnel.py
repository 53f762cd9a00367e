"""A CONNECT tunnel through an HTTP proxy, as the proxy answers: granted (whole, byte
by byte, after an informational answer, with or without a reason phrase), refused,
cut off, too long, not HTTP, or followed by bytes nobody asked for. Every failure
is a connection error that names what the proxy did."""

from __future__ import annotations

from dataclasses import dataclass, field

import httpx2
import pytest
import trio

from ubipy.fetch.transport import PooledTransport


@dataclass
class Proxy:
    """Answers each CONNECT with ``reply`` (``trickle``: a byte a send), then hangs up."""

    reply: bytes
    trickle: bool = False
    port: int = 0
    heads: list[bytes] = field(default_factory=list)

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    return
                data += chunk
            self.heads.append(data)
            try:
                if self.trickle:
                    for i in range(len(self.reply)):
                        await stream.send_all(self.reply[i : i + 1])
                else:
                    await stream.send_all(self.reply)
            except trio.BrokenResourceError:
                return


async def _through(proxy: Proxy, nursery: trio.Nursery) -> Exception:
    """What a request for an https URL through ``proxy`` raises (the tunnel granted,
    the proxy then hangs up: the handshake fails)."""
    await nursery.start(proxy.serve)
    transport = PooledTransport(proxy=f"http://127.0.0.1:{proxy.port}", connect_timeout=5)
    async with httpx2.AsyncClient(transport=transport, trust_env=False) as client:
        with trio.fail_after(10), pytest.raises(httpx2.HTTPError) as caught:
            await client.get("https://site.test/")
    assert proxy.heads[0].startswith(b"CONNECT site.test:443 HTTP/1.1\r\n")
    assert b"\r\nHost: site.test:443\r\n" in proxy.heads[0]
    return caught.value


GRANTED = b"HTTP/1.1 200 Connection established\r\n\r\n"
TRICKLE = [(False, "whole"), (True, "byte-by-byte")]


@pytest.mark.parametrize("trickle", [False, True], ids=["whole", "byte-by-byte"])
@pytest.mark.parametrize(
    "reply",
    [GRANTED, b"HTTP/1.0 200\r\n\r\n", b"HTTP/1.1 100 Continue\r\n\r\n" + GRANTED],
    ids=["reason", "no-reason", "informational-first"],
)
async def test_a_granted_tunnel_goes_on_to_the_handshake(
    nursery: trio.Nursery, reply: bytes, trickle: bool
) -> None:
    error = await _through(Proxy(reply, trickle), nursery)
    # Past the tunnel: what fails is TLS, on a stream the proxy closed.
    assert "CONNECT" not in str(error)


REFUSALS = [
    ("refused", b"HTTP/1.1 407 Proxy Auth Required\r\n\r\n", "proxy refused CONNECT: 407"),
    ("cut-off", b"HTTP/1.1 200 OK\r\n", "proxy closed the connection during CONNECT"),
    ("not-http", b"SSH-2.0-OpenSSH\r\n\r\n", "proxy's answer to CONNECT is not HTTP/1.x"),
]


@pytest.mark.parametrize(
    ("reply", "message", "trickle"),
    [
        *[pytest.param(r, m, t, id=f"{i}-{w}") for i, r, m in REFUSALS for t, w in TRICKLE],
        # Sent with the answer (a byte at a time, they would arrive after it: TLS's).
        pytest.param(
            GRANTED + b"\x16\x03\x01",
            "proxy sent data before the tunnel was up",
            False,
            id="data-early",
        ),
    ],
)
async def test_a_tunnel_not_granted_is_a_connect_error_saying_why(
    nursery: trio.Nursery, reply: bytes, message: str, trickle: bool
) -> None:
    error = await _through(Proxy(reply, trickle), nursery)
    assert isinstance(error, httpx2.ConnectError)
    assert str(error) == message


async def test_an_endless_answer_to_connect_is_cut_short(nursery: trio.Nursery) -> None:
    reply = b"HTTP/1.1 200 OK\r\n" + b"X-Padding: " + b"a" * 200_000 + b"\r\n\r\n"
    error = await _through(Proxy(reply), nursery)
    assert isinstance(error, httpx2.ConnectError)
    assert str(error) == "proxy's answer to CONNECT is too long"
