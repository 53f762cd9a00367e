"""The threads the DNS stage looks names up on: getaddrinfo blocks, and cannot be
cancelled, so each lookup runs on a thread of the resolver's own bounded pool
(:class:`Ticket`), and a lookup cut by its time-out leaves its thread to finish alone."""

from __future__ import annotations

import functools
import socket
from typing import cast

import trio


class Ticket:
    """A thread's place in the stage's own pool (not trio's shared one of 40, which
    slow names would fill), taken before a lookup's time-out starts and handed to
    ``trio.to_thread`` as its limiter: the thread gives it back when getaddrinfo
    returns, however late. A lookup cut by its time-out leaves its thread to finish
    alone, holding its place; a lookup that waited for a place was not slow, and
    with the wait inside the time-out, a few hundred dead names timed out the live
    ones before getaddrinfo was called for them."""

    __slots__ = ("_pool", "_released", "handed")

    def __init__(self, pool: trio.CapacityLimiter) -> None:
        self._pool = pool
        self._released = False
        self.handed = False

    async def take(self) -> None:
        await self._pool.acquire_on_behalf_of(self)

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        self.handed = True  # taken already

    def release_on_behalf_of(self, borrower: object) -> None:
        if not self._released:
            self._released = True
            self._pool.release_on_behalf_of(self)


async def getaddrinfo(name: str, ticket: Ticket, most: int) -> list[str]:
    """The addresses the system resolver gives ``name`` (its first ``most``), on the
    thread ``ticket`` holds a place for."""
    infos = await trio.to_thread.run_sync(
        functools.partial(socket.getaddrinfo, name, None, type=socket.SOCK_STREAM),
        limiter=cast(trio.CapacityLimiter, ticket),
        abandon_on_cancel=True,
    )
    return [str(info[4][0]) for info in infos[:most]]
