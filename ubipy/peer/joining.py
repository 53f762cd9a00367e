"""Joining that never gives up: while a peer is alone, its ``--join`` addresses are
tried again and again, with a back-off from 1 s doubling to 30 s, until one
answers. A service manager starts peers in any order; the first ones up must keep
knocking until the others are there.

Each try is a membership join (a push-pull with every address); it has worked once the
peer is no longer alone, and, for a new peer, once a peer has answered at one of its
join addresses (asked who it is): a new peer reached by others while none of its join
addresses answers goes on trying, founding no cluster with them, since the one it was
told to join may be there (QA: peers whose first named a bootstrap not up yet, and the
next the first, made a cluster of their own beside the bootstrap's). After a failed
try the log says why each address did not answer, as far as the links know: the
connection was refused, the other end has another secret, it speaks no ubipy, or it
simply did not answer. Once the peer has company, dead members and the join addresses
are dialled by membership's reconnect (every 30 s), which is what heals a partition;
should the peer find itself alone again (everyone else gone), the back-off starts
over.
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
        ask: Callable[[str], Awaitable[str | None]] | None = None,
        expecting: Callable[[], bool] = lambda: False,
        answered: Callable[[str, str], None] = lambda address, peer_id: None,
    ) -> None:
        """``alone()`` says whether the peer has no live member besides itself,
        ``join(addresses)`` sends a try, ``links`` say why an address failed and
        which reached this peer itself, ``network`` gives every address a join
        address stands for (each is dialled), ``mine`` are this peer's own addresses,
        never dialled, ``nobody()`` is called when a try reached nobody else, and
        ``ask(address)`` asks, in the background, who answers at an address (a peer id,
        or None), and stops the peer if that is another process under its id (its frames
        taken there for reflections of that one's own: a copied data directory joining
        its original): each address a try dialled in vain, and, while the peer is
        ``expecting``, each one a try dials. ``expecting()`` says whether the peer, new,
        waits for one of its join addresses to answer (it founds no cluster meanwhile,
        and the tries go on however many peers reach it), and ``answered(address,
        peer_id)`` is called when one does: a peer answered the ask (membership's own
        answers come on connections the other peer dials, not from the address dialled)."""
        self.addresses = tuple(dict.fromkeys(addresses))
        self._alone = alone
        self._join = join
        self._links = links
        self._network = network
        self._mine = frozenset(mine)
        self._nobody = nobody
        self._ask = ask
        self._expecting = expecting
        self._answered = answered
        self._targets: list[str] = []  # those the last try dialled
        self._heard: dict[str, str] = {}  # where a peer answered an ask: its id
        self._said_waiting = False
        self.changed = Wakeup()  # set by the peer whenever membership changes
        self.attempt = 0
        # The last try reached this peer alone, at every address (see run).
        self.by_itself = False

    @property
    def joining(self) -> int:
        """The try under way while the peer is alone (or new, its join addresses not
        answered) and has somewhere to join other than itself; 0 otherwise."""
        waiting = self._alone() or (self._expecting() and self._answer() is None)
        return self.attempt if self.addresses and waiting and not self.by_itself else 0

    def _answer(self) -> str | None:
        """An address the tries dialled where a peer answered, if any."""
        return next((t for t in self._targets if t in self._heard), None)

    async def _asked(self, target: str) -> None:
        assert self._ask is not None
        if (peer_id := await self._ask(target)) is not None:
            self._heard[target] = peer_id
            if self._expecting():
                self.changed.set()  # the tries may be over

    def _joined(self) -> bool:
        """Whether the tries are over: the peer has company, and is not new and waiting
        for a join address to answer (one that answers is said)."""
        if self._expecting() and (address := self._answer()) is not None:
            self._answered(address, self._heard[address])
        return not self._alone() and not self._expecting()

    async def run(self) -> None:
        if not self.addresses:
            return
        async with trio.open_nursery() as nursery:
            await self._tries(nursery)

    async def _tries(self, nursery: trio.Nursery) -> None:
        wait = FIRST_WAIT
        while True:
            if self._joined():
                self.attempt, wait, self.by_itself = 0, FIRST_WAIT, False
                await self.changed.wait()
                continue
            self.attempt += 1
            began = trio.current_time()
            stands_for = await self._expand()
            targets = [t for ts in stands_for.values() for t in ts if t not in self._mine]
            self._targets = targets = list(dict.fromkeys(targets))
            if targets:
                self._join(targets)
            if self._ask is not None and self._expecting():
                for target in targets:
                    nursery.start_soon(self._asked, target)
            deadline, alone = began + wait, self._alone()
            while not self._joined() and trio.current_time() < deadline:
                if alone and not self._alone():
                    break  # company, but no join address answered: dial them again now
                await self.changed.wait(deadline)
            if self._joined():
                if self.attempt > 1:
                    log.info("joined the cluster at attempt %d", self.attempt)
                continue
            if trio.current_time() < deadline:
                continue  # cut short: tried again at once, saying nothing of this one
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
            if not self._alone() and not self._said_waiting:  # once; the failures go on
                self._said_waiting = True
                log.warning(
                    "peers reached this one, but no --join address answered: it founds no "
                    "cluster with them until one does (or a member of one counts it)"
                )
            for address, ts in stands_for.items():
                if self._ask is not None and not self._expecting():  # asked at the start if so
                    for target in set(ts) - selves:
                        nursery.start_soon(self._asked, target)
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
