"""Joining that never gives up: while a peer is alone, its ``--join`` addresses are
tried again and again, with a back-off from 1 s doubling to 30 s, until one
answers. A service manager starts peers in any order; the first ones up must keep
knocking until the others are there.

Each try is a membership join (a push-pull with every address); it has worked once
the peer is no longer alone. After a failed try the log says why each address did
not answer, as far as the links know: the connection was refused, the other end has
another secret, it speaks no ubipy, or it simply did not answer. Once the peer has
company, dead members and the join addresses are dialled by membership's reconnect
(every 30 s), which is what heals a partition; should the peer find itself alone
again (everyone else gone), the back-off starts over.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Protocol

import trio

from ubipy.net import Network
from ubipy.peer.wakeup import Wakeup

log = logging.getLogger(__name__)


class Dialled(Protocol):
    """What the links know of the addresses dialled (ubipy.net.Links)."""

    @property
    def own(self) -> Mapping[str, float]:
        """When each address last reached this peer itself."""

    def why(self, address: str) -> str | None:
        """Why ``address`` last failed; None: nothing known."""


FIRST_WAIT = 1.0
MAX_WAIT = 30.0


def other_addresses(addresses: Sequence[str], own: Iterable[str]) -> tuple[str, ...]:
    """The join addresses less this peer's ``own``: a deployment that gives every peer
    one --join list names each peer too, and a new peer alone, dialling itself, would
    wait for itself for ever."""
    mine = set(own)
    if skipped := sorted(mine.intersection(addresses)):
        log.info("--join %s: this peer itself, skipped", ", ".join(skipped))
    return tuple(dict.fromkeys(a for a in addresses if a not in mine))


class Joiner:
    def __init__(
        self,
        addresses: Sequence[str],
        *,
        alone: Callable[[], bool],
        join: Callable[[Sequence[str]], None],
        links: Dialled,
        network: Network,
        mine: Iterable[str] = (),
        nobody: Callable[[], None] = lambda: None,
        ours: Callable[[str], Awaitable[object]] | None = None,
    ) -> None:
        """``alone()`` says whether the peer has no live member besides itself,
        ``join(addresses)`` sends a try, ``links`` say why an address failed and
        which reached this peer itself, ``network`` gives every address a join
        address stands for (each is dialled), ``mine`` are this peer's own addresses,
        never dialled, ``nobody()`` is called when a try reached nobody else, and
        ``ours(address)`` asks, in the background, whether an address that did not
        answer a try is another process under this peer's id (its frames taken there
        for reflections of that one's own: a copied data directory joining its
        original)."""
        self.addresses = tuple(dict.fromkeys(addresses))
        self._alone = alone
        self._join = join
        self._links = links
        self._network = network
        self._mine = frozenset(mine)
        self._nobody = nobody
        self._ours = ours
        self.changed = Wakeup()  # set by the peer whenever membership changes
        self.attempt = 0
        # The last try reached this peer alone, at every address (see run).
        self.by_itself = False

    @property
    def joining(self) -> int:
        """The try under way while the peer is alone and has somewhere to join other
        than itself; 0 otherwise."""
        return self.attempt if self.addresses and self._alone() and not self.by_itself else 0

    async def run(self) -> None:
        if not self.addresses:
            return
        async with trio.open_nursery() as nursery:
            await self._tries(nursery)

    async def _tries(self, nursery: trio.Nursery) -> None:
        wait = FIRST_WAIT
        while True:
            if not self._alone():
                self.attempt, wait, self.by_itself = 0, FIRST_WAIT, False
                await self.changed.wait()
                continue
            self.attempt += 1
            began = trio.current_time()
            stands_for = await self._expand()
            targets = [t for ts in stands_for.values() for t in ts if t not in self._mine]
            if targets:
                self._join(list(dict.fromkeys(targets)))
            deadline = began + wait
            while self._alone() and trio.current_time() < deadline:
                await self.changed.wait(deadline)
            if not self._alone():
                if self.attempt > 1:
                    log.info("joined the cluster at attempt %d", self.attempt)
                continue
            own = self._links.own
            selves = {
                t
                for ts in stands_for.values()
                for t in ts
                if t in self._mine or own.get(t, -math.inf) >= began
            }
            if all(selves.intersection(ts) for ts in stands_for.values()):
                # Every address is a name for this peer, or one for several that gave
                # it this time: it starts a cluster of its own (nothing happens if it
                # has one), and goes on trying, so as to meet the others if there are.
                self._nobody()
            # A name that gave only this peer is no failure to warn of at every try (the
            # first peer of a deployment whose one --join name is every peer's), and
            # such a peer is not shown joining: it crawls, the cluster's first.
            self.by_itself = all(selves.issuperset(ts) for ts in stands_for.values())
            for address, ts in stands_for.items():
                if self._ours is not None:
                    for target in set(ts) - selves:
                        nursery.start_soon(self._ours, target)
                log.log(
                    logging.INFO if selves.issuperset(ts) else logging.WARNING,
                    # The next begins now, and waits longer for an answer (QA: "next
                    # try in 2 s" after a first attempt that had waited 1 s; then "the
                    # next now, given 2 s" was read as cryptic).
                    "join attempt %d: %s: %s (after %.0f s); trying again now, waiting up "
                    "to %.0f s for an answer",
                    self.attempt,
                    address,
                    self._failures(address, ts),
                    wait,
                    min(wait * 2, MAX_WAIT),
                )
            wait = min(wait * 2, MAX_WAIT)

    async def _expand(self) -> dict[str, tuple[str, ...]]:
        """Each join address and the addresses it stands for now (a name of several
        peers is dialled at each of them: a dial to the name would reach only the
        first, this peer itself when it is one of them)."""
        stands_for: dict[str, tuple[str, ...]] = {}
        for address in self.addresses:
            found = await self._network.resolve(address)
            if found != (address,) and self.attempt == 1:
                log.info("--join %s: %s", address, ", ".join(found))
            stands_for[address] = found or (address,)
        return stands_for

    def _failures(self, address: str, targets: tuple[str, ...]) -> str:
        if targets == (address,):
            return self._links.why(address) or "no answer"
        return "; ".join(
            f"{t}: {'this peer itself' if t in self._mine else self._links.why(t) or 'no answer'}"
            for t in targets
        )
