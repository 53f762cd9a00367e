"""A TCP stream whose sends and receives go straight to the socket while the kernel
need not wait, and through trio only when they must.

trio's ``SocketStream`` wraps each send and receive in a conflict check, a
cancellation check and a trip through the scheduler: 40 us for a page's request and
two receives on the slowest machine measured, against 3 us for the system calls
themselves (issue #19). A crawler's connection is used by one task at a time, its
request fits the socket's buffer, and by the time an answer's head is read its body
has usually come too. So a send is first written to the descriptor and a receive
first read from it; only what would block waits, in trio (``wait_readable``, or
the stream's own ``send_all`` for the rest of a large send).

A receive answered at once is not a checkpoint, unlike trio's streams: the transport
waits for every answer's head (the server has not answered the moment the request
goes out), so every fetch still yields to the other tasks and sees a cancellation.

:func:`connect_in_turn` opens the connection: to a name's addresses, one after another.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from collections.abc import Sequence

import trio

__all__ = ["DirectSocketStream", "connect_in_turn", "reset_on_close", "socket_of"]

_READ_SIZE = 65_536


class DirectSocketStream(trio.abc.Stream):
    """``stream``'s socket, read and written directly while that does not block.
    For one task at a time."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self._stream = stream
        self.socket = stream.socket
        self._fd = stream.socket.fileno()

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._fd >= 0 and data:
            try:
                sent = os.write(self._fd, data)
            except BlockingIOError:
                sent = 0
            if sent == len(data):
                return
            data = memoryview(data)[sent:]
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    def receive_now(self, max_bytes: int = _READ_SIZE) -> bytes | None:
        """What the socket has at once (b"" at its end), or None if a receive would
        wait. Raises OSError as a receive does (a reset, among others)."""
        if self._fd < 0:
            return None  # closed: the stream's own receive says so
        try:
            return os.read(self._fd, max_bytes)
        except BlockingIOError:
            return None

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        size = _READ_SIZE if max_bytes is None else max_bytes
        data = self.receive_now(size)
        return data if data is not None else await self.receive_later(size)

    async def receive_later(self, max_bytes: int = _READ_SIZE) -> bytes:
        """What the socket gives once it has something: for a caller that has just
        found it empty (:meth:`receive_now`), with no second try before the wait."""
        while True:
            if self._fd < 0:
                return bytes(await self._stream.receive_some(max_bytes))
            # Closing the stream from another task (trio's notify_closing) wakes
            # this with ClosedResourceError.
            await trio.lowlevel.wait_readable(self._fd)
            data = self.receive_now(max_bytes)
            if data is not None:
                return data

    async def aclose(self) -> None:
        # Forget the descriptor first: its number goes to the next socket opened.
        self._fd = -1
        await self._stream.aclose()


async def connect_in_turn(
    addresses: Sequence[str], port: int, deadline: float
) -> tuple[trio.SocketStream, int]:
    """A TCP connection to the first of ``addresses`` that answers, and its index:
    each is tried in turn with an equal share of the time left until ``deadline``
    (the last, all of it: its time-out is the caller's). A round-robin name with a
    dead member, or an IPv6 address that cannot be reached sorted first, failed every
    connection until its answer expired. Raises OSError naming each failure."""
    failures: list[str] = []
    errors: list[OSError] = []  # the cause, where a caller looks (out of descriptors)
    last = len(addresses) - 1
    for i, address in enumerate(addresses):
        try:
            if i == last:
                return await trio.open_tcp_stream(address, port), i
            with trio.move_on_after((deadline - trio.current_time()) / (last + 1 - i)):
                return await trio.open_tcp_stream(address, port), i
            failures.append(f"{address}: no answer")
        except OSError as exc:
            if i == last and not failures:
                raise
            failures.append(f"{address}: {exc or type(exc).__name__}")
            errors.append(exc)
    raise OSError("; ".join(failures)) from (ExceptionGroup("attempts", errors) if errors else None)


# SO_LINGER on, 0 s: close() resets the connection, dropping what is left to send.
_RESET = struct.pack("ii", 1, 0)


def socket_of(stream: object) -> trio.socket.SocketType | None:
    """The socket under a plain or a TLS stream (None: another kind, a test's)."""
    inner = getattr(stream, "transport_stream", stream)
    sock = getattr(inner, "socket", None)
    return sock if isinstance(sock, trio.socket.SocketType) else None


def reset_on_close(stream: object) -> None:
    """Make the stream's close a reset: what the kernel holds to send is dropped."""
    if (sock := socket_of(stream)) is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
