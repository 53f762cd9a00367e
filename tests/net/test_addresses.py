"""Reading a peer's address: what the network dials or listens on."""

from __future__ import annotations

import socket

import pytest
import trio

from ubipy.net import split_address
from ubipy.net.network import TcpNetwork
from ubipy.peeraddress import check_peer_address


def test_an_address_splits_into_host_and_port() -> None:
    assert split_address("127.0.0.1:7000") == ("127.0.0.1", 7000)
    assert split_address("[::1]:7000") == ("::1", 7000)
    assert split_address(":0") == ("127.0.0.1", 0)  # listen on loopback, any free port


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "127.0.0.1:",
        "127.0.0.1:x",
        "127.0.0.1:65536",
        "127.0.0.1:" + "9" * 30,
        "127.0.0.1:-1",
        "127.0.0.1:\u0661\u0662",
    ],
)
def test_a_port_no_socket_takes_is_a_value_error(address: str) -> None:
    # A ValueError is what dialling expects of a bad address; a 30-digit port used to
    # reach the socket layer, which raised OverflowError in the task that dialled.
    with pytest.raises(ValueError, match="HOST:PORT"):
        split_address(address)


@pytest.mark.parametrize(
    "address", ["127.0.0.1:0", ":7000", "a b:7000", "x" * 300 + ":1", "127.0.0.1:7000\n"]
)
def test_a_peer_to_reach_needs_a_host_and_a_port_from_1(address: str) -> None:
    with pytest.raises(ValueError, match="address"):
        check_peer_address(address)


async def test_a_peer_listening_on_ipv6_reports_its_address_in_brackets() -> None:
    """It said "listening on ::1:7005", a form --join and --listen refuse (QA)."""
    if not socket.has_ipv6:
        pytest.skip("no IPv6 here")
    async with trio.open_nursery() as nursery:
        try:
            bound = await nursery.start(TcpNetwork().serve, "[::1]:0", _refuse_all)
        except OSError:
            pytest.skip("no IPv6 loopback here")
        host, port = split_address(bound)
        assert bound == f"[::1]:{port}" and host == "::1"
        nursery.cancel_scope.cancel()


async def _refuse_all(stream: trio.SocketStream) -> None:
    await stream.aclose()
