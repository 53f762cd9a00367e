"""Every address a join name stands for: a name of several peers is dialled at each of
them (tests/cluster/test_joining.py), so the network says what the name resolves to."""

from __future__ import annotations

import socket

import pytest
import trio
import trio.testing

from ubipy.net import MemoryNetwork, TcpNetwork
from ubipy.net.network import RESOLVE_TIMEOUT


async def test_an_ip_address_stands_for_itself() -> None:
    net = TcpNetwork()
    assert await net.resolve("10.1.2.3:7000") == ("10.1.2.3:7000",)
    assert await net.resolve("[fe80::1]:7000") == ("[fe80::1]:7000",)


async def test_a_name_stands_for_each_address_in_the_resolver_s_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def getaddrinfo(host: str, port: int, **kw: object) -> list[tuple[object, ...]]:
        assert host == "svc" and port == 7000
        stream = socket.SOCK_STREAM
        return [
            (socket.AF_INET, stream, 6, "", ("10.0.0.2", port)),
            (socket.AF_INET6, stream, 6, "", ("fd00::1", port, 0, 0)),
            (socket.AF_INET, stream, 6, "", ("10.0.0.1", port)),
            (socket.AF_INET, stream, 6, "", ("10.0.0.2", port)),  # said twice
        ]

    monkeypatch.setattr(trio.socket, "getaddrinfo", getaddrinfo)
    assert await TcpNetwork().resolve("svc:7000") == (
        "10.0.0.2:7000",
        "[fd00::1]:7000",
        "10.0.0.1:7000",
    )


async def test_localhost_resolves_on_this_machine() -> None:
    assert "127.0.0.1:7000" in await TcpNetwork().resolve("localhost:7000")


async def test_a_name_that_fails_or_hangs_stands_for_itself(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """The dial to the name then says why it failed, as before."""

    async def fails(host: str, port: int, **kw: object) -> list[tuple[object, ...]]:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    async def hangs(host: str, port: int, **kw: object) -> list[tuple[object, ...]]:
        await trio.sleep_forever()
        raise AssertionError

    net = TcpNetwork()
    monkeypatch.setattr(trio.socket, "getaddrinfo", fails)
    assert await net.resolve("nowhere:7000") == ("nowhere:7000",)
    monkeypatch.setattr(trio.socket, "getaddrinfo", hangs)
    began = trio.current_time()
    assert await net.resolve("nowhere:7000") == ("nowhere:7000",)
    assert trio.current_time() - began == pytest.approx(RESOLVE_TIMEOUT)


async def test_a_memory_network_name_resolves_as_its_test_says() -> None:
    net = MemoryNetwork()
    net.name("svc", lambda asker: [asker, "b"] if asker == "a" else ["b", "a"])
    assert await net.node("a").resolve("svc:7000") == ("a:7000", "b:7000")
    assert await net.node("c").resolve("svc:7000") == ("b:7000", "a:7000")
    assert await net.node("a").resolve("other:7000") == ("other:7000",)
