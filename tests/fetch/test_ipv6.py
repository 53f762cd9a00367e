"""IPv6 literals through the transport: a bracketed host connects, is named in the
Host header and in a proxy's request line, and gets its brackets back in a CONNECT.

The servers listen on ::1; where the sandbox has no IPv6 loopback those tests are
skipped (the CONNECT test needs none: the target is never reached)."""

from __future__ import annotations

import socket

import httpx2
import pytest
import trio

from ubipy.fetch.transport import PooledTransport

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello"


def ipv6_loopback() -> bool:
    """Whether a socket can listen on ::1 here."""
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


needs_ipv6 = pytest.mark.skipif(
    not ipv6_loopback(), reason="no IPv6 loopback (::1) in this sandbox"
)


class HeadServer:
    """Answers every request head with OK, and keeps the heads."""

    def __init__(
        self, host: str, reply: bytes = OK, *, once: bool = False, trickle: bool = False
    ) -> None:
        self.host = host
        self.reply = reply
        self.once = once  # hang up after the first answer
        self.trickle = trickle  # send the answer a byte at a time
        self.heads: list[bytes] = []
        self.port = 0

    async def serve(self, *, task_status: trio.TaskStatus[None]) -> None:
        listeners = await trio.open_tcp_listeners(0, host=self.host)
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")
                self.heads.append(head)
                step = 1 if self.trickle else len(self.reply)
                try:
                    for i in range(0, len(self.reply), step):
                        await stream.send_all(self.reply[i : i + step])
                except trio.BrokenResourceError:
                    return
                if self.once:
                    return


@needs_ipv6
async def test_a_bracketed_literal_connects(nursery: trio.Nursery) -> None:
    server = HeadServer("::1")
    await nursery.start(server.serve)
    async with httpx2.AsyncClient(transport=PooledTransport(), trust_env=False) as client:
        for path in ("/a", "/b?c=1"):
            r = await client.get(f"http://[::1]:{server.port}{path}")
            assert (r.status_code, r.text) == (200, "hello")
    assert server.heads[0].startswith(b"GET /a HTTP/1.1\r\n")
    assert f"\r\nhost: [::1]:{server.port}".encode() in server.heads[0].lower()
    assert server.heads[1].startswith(b"GET /b?c=1 HTTP/1.1\r\n")


@needs_ipv6
async def test_a_proxy_on_an_ipv6_literal(nursery: trio.Nursery) -> None:
    proxy = HeadServer("::1")
    await nursery.start(proxy.serve)
    transport = PooledTransport(proxy=f"http://[::1]:{proxy.port}")
    async with httpx2.AsyncClient(transport=transport, trust_env=False) as client:
        r = await client.get("http://[2001:db8::1]:8080/x")
        assert r.text == "hello"
    assert proxy.heads[0].startswith(b"GET http://[2001:db8::1]:8080/x HTTP/1.1\r\n")


async def test_a_tunnel_to_an_ipv6_literal_names_it_in_brackets(nursery: trio.Nursery) -> None:
    # The proxy grants the tunnel and hangs up: the TLS handshake fails, but the
    # CONNECT that asked for it has been seen.
    proxy = HeadServer("127.0.0.1", b"HTTP/1.1 200 Connection established\r\n\r\n", once=True)
    await nursery.start(proxy.serve)
    transport = PooledTransport(proxy=f"http://127.0.0.1:{proxy.port}", connect_timeout=5)
    async with httpx2.AsyncClient(transport=transport, trust_env=False) as client:
        with pytest.raises(httpx2.HTTPError):
            await client.get("https://[2001:db8::1]/")
    assert proxy.heads[0].startswith(b"CONNECT [2001:db8::1]:443 HTTP/1.1\r\n")
    assert b"\r\nHost: [2001:db8::1]:443" in proxy.heads[0]
