"""A CONNECT tunnel through an HTTP proxy, as the proxy answers: granted (whole, byte
by byte, after an informational answer, with or without a reason phrase), refused,
cut off, too long, not HTTP, or followed by bytes nobody asked for. Every failure
is a connection error that names what the proxy did."""

from __future__ import annotations

import httpx2
import pytest
import trio

from tests.fetch.test_ipv6 import HeadServer
from ubipy.fetch.http1 import MAX_HEAD
from ubipy.fetch.transport import AddressRefused, PooledTransport


def _proxy(reply: bytes, trickle: bool = False) -> HeadServer:
    """Answers a CONNECT with ``reply`` (``trickle``: a byte a send), then hangs up."""
    return HeadServer("127.0.0.1", reply, once=True, trickle=trickle)


async def _through(
    proxy: HeadServer, nursery: trio.Nursery, host: str = "site.test", wire: str = "site.test"
) -> Exception:
    """What a request for an https URL of ``host`` through ``proxy`` raises (the tunnel
    granted, the proxy then hangs up: the handshake fails); the CONNECT names the host
    as ``wire``."""
    await nursery.start(proxy.serve)
    transport = PooledTransport(proxy=f"http://127.0.0.1:{proxy.port}", connect_timeout=5)
    async with httpx2.AsyncClient(transport=transport, trust_env=False) as client:
        with trio.fail_after(10), pytest.raises(httpx2.HTTPError) as caught:
            await client.get(f"https://{host}/")
    authority = f"{wire}:443".encode()
    assert proxy.heads[0] == b"CONNECT %s HTTP/1.1\r\nHost: %s" % (authority, authority)
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
    error = await _through(_proxy(reply, trickle), nursery)
    # Past the tunnel: what fails is TLS, on a stream the proxy closed.
    assert "CONNECT" not in str(error)


@pytest.mark.parametrize("host", ["münchen.test", "xn--mnchen-3ya.test"])
async def test_a_tunnel_to_an_idn_host_names_it_as_on_the_wire(
    nursery: trio.Nursery, host: str
) -> None:
    error = await _through(_proxy(GRANTED), nursery, host, "xn--mnchen-3ya.test")
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
    error = await _through(_proxy(reply, trickle), nursery)
    assert isinstance(error, httpx2.ConnectError)
    assert str(error) == message


async def test_an_endless_answer_to_connect_is_cut_short(nursery: trio.Nursery) -> None:
    reply = b"HTTP/1.1 200 OK\r\n" + b"X-Padding: " + b"a" * (3 * MAX_HEAD) + b"\r\n\r\n"
    error = await _through(_proxy(reply), nursery)
    assert isinstance(error, httpx2.ConnectError)
    assert str(error) == "proxy's answer to CONNECT is too long"


@pytest.mark.parametrize(("code", "final"), [(403, True), (407, True), (451, True), (502, False)])
async def test_a_proxy_refusing_the_host_is_final_a_proxy_failing_is_not(
    nursery: trio.Nursery, code: int, final: bool
) -> None:
    # A proxy told to refuse private names answers 403: a refused address, not asked
    # again, not a failed connection retried (robots.txt's attempts and all, the host
    # given up as unreachable; found by a review). A 502 may pass.
    reply = b"HTTP/1.1 %d No\r\n\r\n" % code
    error = await _through(_proxy(reply), nursery)
    assert isinstance(error, httpx2.ConnectError)
    assert isinstance(error, AddressRefused) is final
    assert str(error) == f"proxy refused CONNECT: {code}"
