"""Where the links' bytes go: a small :class:`Network` interface with two ends,
``serve`` (listen on an address, hand each accepted stream to a handler) and
``connect`` (dial an address). :class:`TcpNetwork` is the real one; tests run whole
clusters on :class:`~ubipy.net.memory.MemoryNetwork` instead (httpcore's mock
backend and memberlist's ``MockNetwork`` are the models).

Streams are ``trio.abc.Stream``: what a peer writes and reads is the same whichever
network carries it.
"""

from __future__ import annotations

import abc
import contextlib
import errno
import logging
import os
import socket
import struct
import weakref
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from ubipy.net.addresses import is_ip, join_address, split_address
from ubipy.net.guard import Throttle

log = logging.getLogger(__name__)

StreamHandler = Callable[[trio.abc.Stream], Awaitable[None]]
# Whether to close a connection from this host at once (see Network.serve).
Refuse = Callable[[str], bool]

# accept() failing for want of a resource (file descriptors, memory): the listener
# waits a moment and tries again, as trio.serve_listeners does, but says so once a
# minute rather than with a traceback per try.
_CAPACITY_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_CAPACITY_PAUSE: Final = 0.1
RESOLVE_TIMEOUT: Final = 5.0
# A connection that went wrong while it was queued: its client gave up, a firewall
# refused it, or (Linux) any network error the socket met before accept() took it,
# which accept() reports. The same list as trio's listeners ignore: left unhandled,
# one stranger's failed connection would end the listener, and the peer with it.
_GONE_ERRNOS: Final = frozenset(
    getattr(errno, name)
    for name in (
        "EPERM",
        "ECONNABORTED",
        "EPROTO",
        "ENETDOWN",
        "ENOPROTOOPT",
        "EHOSTDOWN",
        "ENONET",
        "EHOSTUNREACH",
        "EOPNOTSUPP",
        "ENETUNREACH",
        "ENOSR",
        "ESOCKTNOSUPPORT",
        "EPROTONOSUPPORT",
        "ETIMEDOUT",
        "ECONNRESET",
    )
    if hasattr(errno, name)
)
_RESET: Final = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() resets
# Connections taken per wake-up at most, so that a flood cannot hold the loop.
_ACCEPT_BATCH: Final = 256
_CAPACITY_LOG_INTERVAL: Final = 60.0
# On a path that died silently (a partition, a host gone without a reset), a peer
# connection fails within a minute instead of after the kernel's 15 minutes of
# retransmissions: data unacknowledged for TCP_USER_TIMEOUT fails the socket, and an
# idle connection is probed (keepalive) after 10 s, every 5 s. Not shorter than the
# longest frame's write allowance (links.py: 52 s for 4 MiB): the time-out also fails
# a live peer that reads nothing for as long (its window full), and at 20 s one whose
# disk held its frames' handlers that long lost its connections (a review).
USER_TIMEOUT_MS: Final = 60_000
_KEEPALIVE: Final = (("TCP_KEEPIDLE", 10), ("TCP_KEEPINTVL", 5), ("TCP_KEEPCNT", 3))


def tune_peer_socket(sock: socket.socket | trio.socket.SocketType) -> None:
    """Keepalive and a user time-out on a peer connection, where the platform has
    them (TCP_USER_TIMEOUT and the keepalive timings are Linux's)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (*_KEEPALIVE, ("TCP_USER_TIMEOUT", USER_TIMEOUT_MS)):
        option = getattr(socket, name, None)
        if option is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, option, value)


# Where each connection we accepted came from, as accept() said: getpeername() fails
# once the client has reset the connection, and a stranger that sent RST was "?", never
# barred (QA: 74,488 connections in 15 s, each read and checked).
_accepted_from: weakref.WeakKeyDictionary[trio.abc.Stream, str] = weakref.WeakKeyDictionary()


def endpoint(stream: trio.abc.Stream, end: str) -> str | None:
    """HOST:PORT of a stream's ``end`` ("local" or "remote"), or None if unknown."""
    named = getattr(stream, f"{end}_address", None)  # an in-memory stream's
    if isinstance(named, str):
        return named
    if end == "remote" and (accepted := _accepted_from.get(stream)) is not None:
        return accepted
    sock = getattr(stream, "socket", None)
    if sock is None:
        return None
    try:
        name = sock.getsockname() if end == "local" else sock.getpeername()
    except OSError:
        return None
    return f"{name[0]}:{name[1]}" if isinstance(name, tuple) and len(name) >= 2 else None


def remote_host(stream: trio.abc.Stream) -> str:
    """The address a stream comes from, without its port (a stranger has many ports),
    or "?" if it cannot be told."""
    remote = endpoint(stream, "remote")
    if remote is None:
        return "?"
    return remote.rpartition(":")[0] or remote


class Network(abc.ABC):
    """Listening and dialling, and nothing else."""

    @abc.abstractmethod
    async def serve(
        self,
        address: str,
        handler: StreamHandler,
        *,
        refuse: Refuse | None = None,
        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept connections on ``address`` (HOST:PORT, port 0 for any) until
        cancelled, each handled by ``handler`` in a task of its own; reports the
        bound HOST:PORT through ``task_status``. Raises OSError if it cannot listen.
        A connection from a host for which ``refuse`` is true is closed at once,
        before it costs a task."""

    @abc.abstractmethod
    async def connect(self, address: str) -> trio.abc.Stream:
        """A stream to whoever listens on ``address``; OSError if nobody answers
        (refused, unreachable). Callers bound the wait themselves."""

    async def resolve(self, address: str) -> tuple[str, ...]:
        """Every HOST:PORT that ``address`` stands for, in the resolver's order: one
        name may stand for several peers (round-robin DNS, a headless Kubernetes
        service), and a dial to the name reaches only the first, which the system's
        resolver puts first when it is this machine (RFC 6724's longest matching
        prefix). ``(address,)`` for an IP address, or when the name gives nothing
        within ``RESOLVE_TIMEOUT`` (a dial to it then says why)."""
        return (address,)


class TcpNetwork(Network):
    """TCP, as trio opens it."""

    async def serve(
        self,
        address: str,
        handler: StreamHandler,
        *,
        refuse: Refuse | None = None,
        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        host, port = split_address(address)
        listeners = await trio.open_tcp_listeners(port, host=host)
        # trio opens the sockets (its choice of families and options); the accept
        # loop is ours, on the plain sockets.
        sockets = [socket.socket(fileno=listener.socket.detach()) for listener in listeners]
        bound = int(sockets[0].getsockname()[1])
        throttle = Throttle(_CAPACITY_LOG_INTERVAL)
        async with trio.open_nursery() as nursery:
            for sock in sockets:
                nursery.start_soon(_accept_loop, sock, handler, refuse, throttle, nursery)
            task_status.started(join_address(host, bound))

    async def connect(self, address: str) -> trio.abc.Stream:
        host, port = split_address(address)
        stream = await trio.open_tcp_stream(host, port)
        tune_peer_socket(stream.socket)
        return stream

    async def resolve(self, address: str) -> tuple[str, ...]:
        host, port = split_address(address)
        if is_ip(host):
            return (address,)
        found: dict[str, None] = {}
        with trio.move_on_after(RESOLVE_TIMEOUT), contextlib.suppress(OSError):
            for *_, sockaddr in await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
                found[join_address(str(sockaddr[0]), port)] = None
        return tuple(found) or (address,)


async def _accept_loop(
    sock: socket.socket,
    handler: StreamHandler,
    refuse: Refuse | None,
    throttle: Throttle,
    nursery: trio.Nursery,
) -> None:
    """Accept whatever is queued each time the socket is readable, not one connection
    per turn of the scheduler (as trio's listeners do): under a flood of strangers, a
    member's or ``ubipy status``'s connection must not wait behind the queue while a
    busy peer takes one connection per round."""
    sock.setblocking(False)
    with sock:
        while True:
            await trio.lowlevel.wait_readable(sock)
            for _ in range(_ACCEPT_BATCH):
                try:
                    conn, peer = sock.accept()
                except BlockingIOError:
                    break
                except OSError as exc:
                    if exc.errno in _GONE_ERRNOS:
                        continue  # the client gave up while queued
                    if exc.errno not in _CAPACITY_ERRNOS:
                        raise
                    since = throttle.hit(trio.current_time())
                    if since is not None:
                        log.warning(
                            "cannot accept connections: %s (%d times since the last such "
                            "line, %d in all); connections already open are still served",
                            os.strerror(exc.errno or 0),
                            since,
                            throttle.count,
                        )
                    await trio.sleep(_CAPACITY_PAUSE)
                    break
                if refuse is not None and refuse(str(peer[0])):
                    # A reset, not a close: no TIME_WAIT left behind for each of a
                    # flood of connections turned away.
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
                    conn.close()
                    continue
                tune_peer_socket(conn)
                stream = trio.SocketStream(trio.socket.from_stdlib_socket(conn))
                _accepted_from[stream] = f"{peer[0]}:{peer[1]}"
                nursery.start_soon(handler, stream)
