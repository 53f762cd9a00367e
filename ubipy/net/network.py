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
from collections.abc import Awaitable, Callable

import trio

from ubipy.net.addresses import split_address

StreamHandler = Callable[[trio.abc.Stream], Awaitable[None]]


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
        async with trio.open_nursery() as nursery:
            await nursery.start(trio.serve_listeners, handler, listeners)
            task_status.started(f"{host}:{bound}")

    async def connect(self, address: str) -> trio.abc.Stream:
        host, port = split_address(address)
        return await trio.open_tcp_stream(host, port)
