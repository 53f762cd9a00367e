"""DirectSocketStream: a stream's sends and receives straight on its socket, and
through trio when they must wait."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio

from ubipy.fetch.sockets import DirectSocketStream


@pytest.fixture
async def pair() -> AsyncIterator[tuple[DirectSocketStream, trio.SocketStream]]:
    a, b = trio.socket.socketpair()
    ours, theirs = DirectSocketStream(trio.SocketStream(a)), trio.SocketStream(b)
    yield ours, theirs
    await ours.aclose()
    await theirs.aclose()


async def test_what_has_come_is_taken_at_once_and_nothing_is_none(
    pair: tuple[DirectSocketStream, trio.SocketStream],
) -> None:
    ours, theirs = pair
    assert ours.receive_now() is None
    await theirs.send_all(b"hello")
    assert ours.receive_now() == b"hello"
    assert ours.receive_now() is None
    await theirs.send_all(b"again")
    assert await ours.receive_some() == b"again"


async def test_a_receive_waits_for_what_comes_later(
    pair: tuple[DirectSocketStream, trio.SocketStream], nursery: trio.Nursery
) -> None:
    ours, theirs = pair
    got: list[bytes] = []
    done = trio.Event()

    async def receive() -> None:
        got.append(await ours.receive_some(100))
        done.set()

    nursery.start_soon(receive)
    await trio.testing.wait_all_tasks_blocked()
    assert got == []
    await theirs.send_all(b"late")
    with trio.fail_after(5):
        await done.wait()
    assert got == [b"late"]


async def test_the_end_of_the_stream_is_empty_bytes(
    pair: tuple[DirectSocketStream, trio.SocketStream],
) -> None:
    ours, theirs = pair
    await theirs.send_all(b"last")
    await theirs.aclose()
    assert await ours.receive_some() == b"last"
    assert ours.receive_now() == b""
    assert await ours.receive_some() == b""


async def test_a_send_larger_than_the_buffers_goes_whole_as_the_peer_reads(
    pair: tuple[DirectSocketStream, trio.SocketStream], nursery: trio.Nursery
) -> None:
    ours, theirs = pair
    data = bytes(range(256)) * 40_000  # 10 MB: more than a socket pair buffers
    received = bytearray()
    drained = trio.Event()

    async def drain() -> None:
        while len(received) < len(data):
            received.extend(await theirs.receive_some(1 << 16))
        drained.set()

    nursery.start_soon(drain)
    with trio.fail_after(10):
        await ours.send_all(data)
        await drained.wait()
    assert bytes(received) == data


async def test_closing_wakes_a_waiting_receive_and_later_ones_are_refused(
    pair: tuple[DirectSocketStream, trio.SocketStream], nursery: trio.Nursery
) -> None:
    ours, _ = pair
    failed: list[type[BaseException]] = []
    done = trio.Event()

    async def receive() -> None:
        try:
            await ours.receive_some()
        except trio.ClosedResourceError as exc:
            failed.append(type(exc))
        done.set()

    nursery.start_soon(receive)
    await trio.testing.wait_all_tasks_blocked()
    await ours.aclose()
    with trio.fail_after(5):
        await done.wait()
    assert failed == [trio.ClosedResourceError]
    assert ours.receive_now() is None
    with pytest.raises(trio.ClosedResourceError):
        await ours.receive_some()
    with pytest.raises(trio.ClosedResourceError):
        await ours.send_all(b"x")


async def test_a_send_into_a_full_buffer_waits_for_room(
    pair: tuple[DirectSocketStream, trio.SocketStream], nursery: trio.Nursery
) -> None:
    ours, theirs = pair
    filler, filled = trio.CancelScope(), trio.Event()

    async def fill() -> None:
        with filler:
            while True:
                await ours.send_all(b"a" * 65_536)
        filled.set()

    nursery.start_soon(fill)
    await trio.testing.wait_all_tasks_blocked()  # the filler waits for room
    filler.cancel()
    await filled.wait()
    done = trio.Event()

    async def send_marker() -> None:
        await ours.send_all(b"END")
        done.set()

    nursery.start_soon(send_marker)
    await trio.testing.wait_all_tasks_blocked()
    assert not done.is_set()  # the buffers are still full: it waits
    received = bytearray()
    with trio.fail_after(10):
        while not received.endswith(b"END"):
            received.extend(await theirs.receive_some(1 << 16))
        await done.wait()
    # What the cancelled filler had written of its last send is unknown; nothing
    # else came, and the marker came last and whole.
    assert len(received) > 65_536 and set(received[:-3]) == {ord("a")}
