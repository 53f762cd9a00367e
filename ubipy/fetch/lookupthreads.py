"""The threads the DNS stage looks names up on: getaddrinfo blocks, and cannot be
cancelled, so each lookup runs on a thread of the resolver's own bounded pool
(:class:`Ticket`), and a lookup cut by its time-out leaves its thread to finish alone.

The names of one registered domain hold a few of the threads at most
(:class:`Domains`): a page's links to names whose servers never answer (usually of
one zone) kept every thread for the system resolver's own time-outs, and a live name
asked after 64 of them was answered 12 s later (a review).
"""

from __future__ import annotations

import functools
import socket
from collections import Counter
from typing import cast

import trio

# The threads the lookups of one registered domain may hold at once, those left to
# finish alone after a time-out included (and half the lookups at once at most).
PER_DOMAIN = 8


class Domains:
    """Per registered domain, a limiter of the threads its lookups hold, kept while
    a lookup of the domain holds or awaits one."""

    __slots__ = ("_gates", "_users", "per_domain")

    def __init__(self, per_domain: int) -> None:
        self.per_domain = per_domain
        self._gates: dict[str, trio.CapacityLimiter] = {}
        self._users: Counter[str] = Counter()

    def enter(self, domain: str) -> trio.CapacityLimiter:
        """The domain's limiter, for a ticket that will :meth:`leave` it."""
        gate = self._gates.get(domain)
        if gate is None:
            gate = self._gates[domain] = trio.CapacityLimiter(self.per_domain)
        self._users[domain] += 1
        return gate

    def leave(self, domain: str) -> None:
        self._users[domain] -= 1
        if not self._users[domain]:
            del self._users[domain], self._gates[domain]

    def __len__(self) -> int:
        return len(self._gates)


class Ticket:
    """A thread's place in the stage's own pool (not trio's shared one of 40, which
    slow names would fill), taken before a lookup's time-out starts and handed to
    ``trio.to_thread`` as its limiter: the thread gives it back when getaddrinfo
    returns, however late. A lookup cut by its time-out leaves its thread to finish
    alone, holding its place; a lookup that waited for a place was not slow, and
    with the wait inside the time-out, a few hundred dead names timed out the live
    ones before getaddrinfo was called for them."""

    __slots__ = ("_domain", "_domains", "_gate", "_pool", "_released", "_taken", "handed")

    def __init__(self, pool: trio.CapacityLimiter, domains: Domains, domain: str) -> None:
        self._pool = pool
        self._domains = domains
        self._domain = domain
        self._gate = domains.enter(domain)
        self._taken: list[trio.CapacityLimiter] = []
        self._released = False
        self.handed = False

    async def take_domain(self) -> None:
        """A place among the domain's threads: taken before the resolver's lookups at
        once are waited for, a domain's names wait without holding one of those."""
        await self._gate.acquire_on_behalf_of(self)
        self._taken.append(self._gate)

    async def take(self) -> None:
        await self._pool.acquire_on_behalf_of(self)
        self._taken.append(self._pool)

    async def acquire_on_behalf_of(self, borrower: object) -> None:
        self.handed = True  # taken already

    def release_on_behalf_of(self, borrower: object) -> None:
        """Give back what was taken (the thread ended, or none was started)."""
        if not self._released:
            self._released = True
            for limiter in self._taken:
                limiter.release_on_behalf_of(self)
            self._domains.leave(self._domain)


async def getaddrinfo(name: str, ticket: Ticket, most: int) -> list[str]:
    """The addresses the system resolver gives ``name`` (its first ``most``), on the
    thread ``ticket`` holds a place for."""
    infos = await trio.to_thread.run_sync(
        functools.partial(socket.getaddrinfo, name, None, type=socket.SOCK_STREAM),
        limiter=cast(trio.CapacityLimiter, ticket),
        abandon_on_cancel=True,
    )
    return [str(info[4][0]) for info in infos[:most]]
