"""The crawler's DNS stage: lookups the scheduler asks for (``JobKind.RESOLVE``), run
beside the requests, never in one of their slots.

Two hundred hosts whose names do not resolve used to hold every request slot for
the length of their time-outs while a live web waited; here a lookup costs a place
in the resolver's own bounded pool and the host it serves, nothing else. A host
whose lookups keep failing, or whose address may not be reached, is given up the
way a host whose robots.txt cannot be had is: its URLs are closed with the reason.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import trio

from ubipy.errors import StorageError
from ubipy.fetch import (
    DnsFailure,
    FetchOutcome,
    HostRobots,
    Lookup,
    Resolver,
    Scheduler,
    address_key,
)
from ubipy.peer.commits import Commits

log = logging.getLogger(__name__)
_UNEXPECTED = itertools.count()  # lookups that raised
# How a request ends when none of its host's addresses answered a connection.
_UNREACHED = frozenset({FetchOutcome.CONNECT_ERROR, FetchOutcome.TIMEOUT})


class SeedLookups(Protocol):
    """Where the seeds' first lookups are kept (the shard: ubipy.store.seedlookups)."""

    def seed_lookups(self) -> dict[str, frozenset[str]]: ...

    def save_seed_lookup(self, host: str, allowed: Iterable[str]) -> None: ...


@dataclass(slots=True)
class DnsStats:
    """What the stage did; lookups per host are the resolver's."""

    failures: int = 0
    # Hosts given up because their names did not resolve.
    hosts_given_up: int = 0
    # Hosts refused because their address may not be reached.
    refused: int = 0


class ResolveStage:
    def __init__(
        self,
        resolver: Resolver,
        scheduler: Scheduler,
        commits: Commits,
        *,
        wake: tuple[Callable[[], None], Callable[[], None]],
        seeded: Callable[[str], bool] = lambda host: False,
        kept: SeedLookups | None = None,
        per_ip: bool = True,
    ) -> None:
        """``wake``: (wake the dispatcher, flush the commits now), called after each
        lookup, and the latter when a host's URLs were closed; ``seeded``: whether a
        seed was ever on a host (the shard knows, across restarts); ``kept``: where
        what the first lookup of a seed's host allowed is kept, across restarts;
        ``per_ip``: whether a host is filed under its address (the per-IP rule: one
        request in flight an address), or under none (``--no-per-ip``)."""
        self.resolver = resolver
        self._kept = kept
        if kept is not None:
            resolver.remember(kept.seed_lookups())
        self._scheduler = scheduler
        self._commits = commits
        self._wake, self._flush = wake
        self.seeded = seeded  # whether a seed is on a host
        self.stats = DnsStats()
        self._per_ip = per_ip
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def submit(self, host: str) -> None:
        assert self._nursery is not None, "the stage is not running"
        self._nursery.start_soon(self._lookup, host)

    def ended(self, host: str, outcome: FetchOutcome) -> None:
        """A request to ``host`` ended so. One that got no connection: if the
        transport moved the addresses that did not answer to the back of the name's
        answer, the host is looked up again (from the cache) and filed under the one
        its requests go to now, before its next request; so is a host whose name's
        addresses were moved so by its request (a robots.txt redirected there)."""
        if outcome not in _UNREACHED or not self._per_ip:
            return
        hosts = {host, *self.resolver.demoted}
        self.resolver.demoted.clear()
        for name in hosts:
            if (address := self.resolver.address_of(name)) is not None:
                self._scheduler.readdressed(name, address_key(address))

    def _keep_first_lookups(self) -> None:
        first, self.resolver.first_lookups = self.resolver.first_lookups, []
        if self._kept is None:
            return
        for host, allowed in first:
            try:
                self._kept.save_seed_lookup(host, allowed)
            except StorageError as exc:
                # Kept in memory all the same; after a restart, a lookup of it is taken
                # for its first, as before this was kept. Seeds are few: no flood.
                log.warning("%s: its first lookup not kept: %s", host, exc)

    async def _lookup(self, host: str) -> None:
        try:
            answer = await self.resolver.resolve(host)
        except Exception as exc:
            # No thread to be had (the machine out of them), or worse: the host's
            # lookup failed, as when the resolver did not answer; the peer goes on.
            if next(_UNEXPECTED) % 1000 == 0:
                log.warning("%s: its lookup failed: %r", host, exc)
            answer = Lookup((), DnsFailure.TEMPORARY)
        if self.seeded(host) and self.resolver.exempt(host, answer):
            # The user named this host on a private address: it is theirs to crawl.
            answer = await self.resolver.resolve(host)  # from the cache
        self._keep_first_lookups()
        now = trio.current_time()
        if answer.address is not None:
            until = self.resolver.fresh_until(host)
            address = address_key(answer.address) if self._per_ip else None
            self._scheduler.resolved(host, address, until=until)
        else:
            error = answer.error or DnsFailure.NO_SUCH_NAME
            stats = self.stats
            refused = error is DnsFailure.REFUSED
            stats.failures += not refused  # its name resolved
            stats.refused += refused
            not_before = self.resolver.fresh_until(host)
            transient = error in (DnsFailure.TEMPORARY, DnsFailure.TIMEOUT)
            scheduler = self._scheduler
            closes = scheduler.lookup_failed(
                host, now, final=refused, transient=transient, not_before=not_before
            )
            if closes:
                # A refused one resolved: counted as refused (status said its name did not).
                stats.hosts_given_up += not refused
                log.info("%s: given up: %s", host, error.value)
            # A robots.txt's hop target given up with no URLs here yet is closed too: those
            # that come are closed saying why, not as "robots.txt unreachable" (QA), and it
            # is tried again as other hosts given up are.
            if closes or (
                (slot := scheduler.slot(host)) and slot.robots_state is HostRobots.GIVEN_UP
            ):
                self._commits.close_host(host, error.value)
                self._flush()
        self._wake()
