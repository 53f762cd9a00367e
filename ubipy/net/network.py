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
import errno
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Final

import trio

from ubipy.net.addresses import split_address
from ubipy.net.guard import Throttle

log = logging.getLogger(__name__)

StreamHandler = Callable[[trio.abc.Stream], Awaitable[None]]

# accept() failing for want of a resource (file descriptors, memory): the listener
# waits a moment and tries again, as trio.serve_listeners does, but says so once a
# minute rather than with a traceback per try.
_CAPACITY_ERRNOS: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_CAPACITY_PAUSE: Final = 0.1
_CAPACITY_LOG_INTERVAL: Final = 60.0


def remote_host(stream: trio.abc.Stream) -> str:
    """The address a stream comes from, without its port (a stranger has many ports),
    or "?" if it cannot be told."""
    remote = getattr(stream, "remote_address", None)
    if isinstance(remote, str):
        return remote.rpartition(":")[0] or remote
    sock = getattr(stream, "socket", None)
    try:
        name = sock.getpeername() if sock is not None else None
    except OSError:
        return "?"
    return str(name[0]) if isinstance(name, tuple) and name else "?"


class Network(abc.ABC):
    """Listening and dialling, and nothing else."""

    @abc.abstractmethod
    async def serve(
        self,
        address: str,
        handler: StreamHandler,
        *,
        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Accept connections on ``address`` (HOST:PORT, port 0 for any) until
        cancelled, each handled by ``handler`` in a task of its own; reports the
        bound HOST:PORT through ``task_status``. Raises OSError if it cannot listen."""

    @abc.abstractmethod
    async def connect(self, address: str) -> trio.abc.Stream:
        """A stream to whoever listens on ``address``; OSError if nobody answers
        (refused, unreachable). Callers bound the wait themselves."""


class TcpNetwork(Network):
    """TCP, as trio opens it."""

    async def serve(
        self,
        address: str,
        handler: StreamHandler,
        *,
        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        host, port = split_address(address)
        listeners = await trio.open_tcp_listeners(port, host=host)
        bound = int(listeners[0].socket.getsockname()[1])
        throttle = Throttle(_CAPACITY_LOG_INTERVAL)
        async with trio.open_nursery() as nursery:
            for listener in listeners:
                nursery.start_soon(_accept_loop, listener, handler, throttle, nursery)
            task_status.started(f"{host}:{bound}")

    async def connect(self, address: str) -> trio.abc.Stream:
        host, port = split_address(address)
        return await trio.open_tcp_stream(host, port)


async def _accept_loop(
    listener: trio.SocketListener,
    handler: StreamHandler,
    throttle: Throttle,
    nursery: trio.Nursery,
) -> None:
    async with listener:
        while True:
            try:
                stream = await listener.accept()
            except OSError as exc:
                if exc.errno not in _CAPACITY_ERRNOS:
                    raise
                since = throttle.hit(trio.current_time())
                if since is not None:
                    log.warning(
                        "cannot accept connections: %s (%d times since the last such line, "
                        "%d in all); members already connected are still served",
                        os.strerror(exc.errno or 0),
                        since,
                        throttle.count,
                    )
                await trio.sleep(_CAPACITY_PAUSE)
            else:
                nursery.start_soon(handler, stream)
