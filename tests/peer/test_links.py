"""Links on loopback: an address that refuses connections is marked unreachable until
a dial to it succeeds again."""

from __future__ import annotations

import socket
from typing import Any

import trio

from ubipy.peer.links import Links, Reply
from ubipy.peer.wire import Frame, FrameType, secret_from

KEY = secret_from("links test")


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


async def test_an_address_that_refuses_connections_is_unreachable_until_it_answers() -> None:
    got: list[Any] = []
    arrived = trio.Event()

    async def handler(frame: Frame, reply: Reply) -> None:
        got.append(frame.payload)
        arrived.set()

    a, b = Links(KEY, "a", handler), Links(KEY, "b", handler)
    async with trio.open_nursery() as nursery:
        await nursery.start(a.run, "127.0.0.1", 0)
        port = await nursery.start(b.run, "127.0.0.1", 0)
        gone = f"127.0.0.1:{closed_port()}"
        assert not await a.send(gone, FrameType.SEED, {"urls": []})
        assert a.unreachable == {gone}
        # b's address failed once (say, while b restarted); a dial that succeeds clears it.
        there = f"127.0.0.1:{port}"
        a.unreachable.add(there)
        with trio.fail_after(5):
            assert await a.send(there, FrameType.SEED, {"urls": ["x"]})
            await arrived.wait()
        assert a.unreachable == {gone} and got == [{"urls": ["x"]}]
        nursery.cancel_scope.cancel()
