"""The seeds' scope, kept in the shard and shared with every member: the roots (hosts
or domains) the crawl follows links into, and the hosts the seeds were on, whose
addresses may be ones a crawler is otherwise refused (the user named them). A seed
given to one peer is often on a host another peer owns, and every peer judges the
links of its own pages, so each must know them all.

A member gets everything when it joins, what is new when seeds come, and, when it
is heard from again after being suspected (a lossy link, a short cut), what came
while it was: a SCOPE frame is not acknowledged, and one sent while a member could
not be reached would be lost, leaving it to drop, as out of scope, every link into
the new seeds' hosts on the hosts it owns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from ubipy.config import BoundsConfig
from ubipy.fetch import ScopeFilter
from ubipy.membership import ChangeKind, MemberEvent
from ubipy.net import Handle, Reply, Send
from ubipy.store import Shard
from ubipy.wire import Scope, batches

_ROOTS_META = "scope_roots"
_SEEDS_META = "seed_hosts"


def load_scope(shard: Shard, bounds: BoundsConfig) -> ScopeFilter:
    """The scope the shard kept. A shard kept before the seeds' hosts were takes the
    hosts of its depth-0 URLs, as seeds were told then (redirects from seeds among
    them), once."""
    roots, seeds = shard.get_meta(_ROOTS_META), shard.get_meta(_SEEDS_META)
    if seeds is None:
        with shard.transaction():
            shard.set_meta(_SEEDS_META, seeds := "\n".join(sorted(shard.depth_zero_hosts())))
    return ScopeFilter.of(bounds, _lines(roots), _lines(seeds))


def _lines(text: str | None) -> list[str]:
    return text.split("\n") if text else []


def keep_scope(shard: Shard, scope: ScopeFilter) -> None:
    """Keep the scope (inside the caller's transaction)."""
    shard.set_meta(_ROOTS_META, "\n".join(sorted(scope.roots)))
    shard.set_meta(_SEEDS_META, "\n".join(sorted(scope.seeds)))


class Scoped(Protocol):
    """What the crawler keeps of the scope (``Crawler``)."""

    def scope_now(self) -> tuple[frozenset[str], frozenset[str]]:
        """The roots and the seeds' hosts."""

    def add_scope_roots(self, roots: Iterable[str], seeds: Iterable[str] = ()) -> bool:
        """Widen the scope with what another peer's seeds brought."""


class ScopeSharing:
    def __init__(self, crawler: Scoped, send: Send, start_soon: Callable[..., object]) -> None:
        self._crawler = crawler
        self._send = send
        self._start_soon = start_soon
        # Every root and seed host learnt while this peer runs, in order, and where
        # each suspected member's view of them stopped.
        self._learnt: list[tuple[str, str]] = []
        self._known: set[tuple[str, str]] = set()
        self._suspected: dict[str, int] = {}

    def install(self, handle: Handle) -> None:
        handle(Scope, self._on_scope)

    def share(self, address: str) -> None:
        """Send a member the whole scope (it has just joined)."""
        roots, seeds = self._crawler.scope_now()
        self._send_scope(address, sorted(roots), sorted(seeds))

    def seeded(self, before: tuple[frozenset[str], frozenset[str]], live: Iterable[str]) -> None:
        """Seeds came (the scope was ``before``): send what is new to every live member,
        suspected ones too."""
        roots, seeds = self._crawler.scope_now()
        new_roots, new_seeds = sorted(roots - before[0]), sorted(seeds - before[1])
        self._learn(new_roots, new_seeds)
        for address in live:
            self._send_scope(address, new_roots, new_seeds)

    def member_changed(self, event: MemberEvent) -> None:
        address = event.member.address
        if event.kind is ChangeKind.SUSPECT:
            self._suspected.setdefault(address, len(self._learnt))
        elif event.kind is ChangeKind.REFUTED and address in self._suspected:
            missed = self._learnt[self._suspected.pop(address) :]
            roots = [item for kind, item in missed if kind == "root"]
            self._send_scope(address, roots, [item for kind, item in missed if kind == "seed"])
        elif event.changes_ring:
            self._suspected.pop(address, None)

    async def _on_scope(self, sender: str, scope: Scope, reply: Reply) -> None:
        self._learn(scope.roots, scope.seeds)
        self._crawler.add_scope_roots(scope.roots, scope.seeds)

    def _learn(self, roots: Iterable[str], seeds: Iterable[str]) -> None:
        for item in [*(("root", r) for r in roots), *(("seed", s) for s in seeds)]:
            if item not in self._known:
                self._known.add(item)
                self._learnt.append(item)

    def _send_scope(self, address: str, roots: list[str], seeds: list[str]) -> None:
        # In frames a receiver takes, however many there are.
        for run in batches(roots):
            self._start_soon(self._send, address, Scope(run))
        for run in batches(seeds):
            self._start_soon(self._send, address, Scope((), run))
