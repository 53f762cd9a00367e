"""Frames carried by a third peer when two members cannot reach each other directly.

One cut link between two peers (a firewall rule that drops, a route lost between two)
leaves both in the ring: membership's indirect probes see each alive through the
others. Without a relay, nothing else they send each other arrives for as long as
the cut lasts: URL batches wait in the outbox, hand-offs are not taken, and under
``--replicas 2`` the hosts whose owner and successor they are get no request (each
waits for a barrier its successor never answers).

So a frame for a member whose address did not answer a dial goes, whole, inside a
RELAY frame (:mod:`ubipy.wire.relay`) to another live member, which forwards it
once to its recipient; the recipient checks it as any frame of its sender (tag,
freshness, replay window, recipient) and answers the same way back. Dials to the
address are tried again every ``REDIAL`` seconds; meanwhile frames go by relay at
once rather than after a dial's five seconds each. A connection open at the cut
loses what is written on it until TCP gives up (a minute): the links close it once
membership finds the member answering only through others (``path_lost``), and its
frames go the same way. A relay forwards only authentic RELAY frames (the cluster's
secret), each once, to a member that takes them, over a link it dialled itself, and
at most MAX_FORWARDS at a time to one target.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Collection
from typing import Final, Generic, Protocol, TypeVar

import trio
import xxhash

from ubipy.errors import FrameError
from ubipy.wire import (
    MAX_RELAYED,
    Frame,
    FrameReader,
    FrameType,
    FrameWriter,
    Message,
    Relay,
    ReplayGuard,
)

log = logging.getLogger(__name__)

__all__ = ["MAX_FORWARDS", "REDIAL", "Carrier", "Relays", "refused_dial"]

# Seconds after a failed dial to an address before it is dialled again (frames to the
# member there go by relay meanwhile).
REDIAL: Final = 10.0
# Frames a relay forwards to one target at once; more are dropped (their senders send
# again what must arrive): a target that reads nothing holds at most this many here.
MAX_FORWARDS: Final = 16
# How long a member found answering only through others counts as alive behind a
# firewall that refuses dials (a probe reaches each member at least once a pass over
# them; a death, declared within seconds of it, forgets this at once).
INDIRECT_MEMORY: Final = 60.0

ConnT = TypeVar("ConnT")


class Carrier(Protocol[ConnT]):
    """What relaying needs of the links (:class:`ubipy.net.links.Links`)."""

    secret: bytes
    guard: ReplayGuard
    self_id: str
    writer: FrameWriter

    @property
    def nursery(self) -> trio.Nursery | None: ...

    async def connection(self, address: str) -> ConnT | None: ...

    async def send_on(self, conn: ConnT, message: Message, to: str) -> bool: ...

    async def dispatch(self, frame: Frame, conn: ConnT, *, via: str = "") -> bool: ...


def refused_dial(exc: BaseException) -> bool:
    """Whether a dial failed only by refusals (trio's gathers its attempts' errors
    in the cause)."""
    cause = exc.__cause__
    if isinstance(cause, BaseExceptionGroup):
        return all(refused_dial(e) for e in cause.exceptions)
    return isinstance(exc, ConnectionRefusedError)


def _no_one(peer_id: str) -> str | None:
    return None


def _no_others() -> Collection[str]:
    return ()


class Relays(Generic[ConnT]):
    """A peer's relaying, both ways (see the module's docstring)."""

    def __init__(self, links: Carrier[ConnT]) -> None:
        self._links = links
        # Frames by relay: sent, forwarded, opened, refused (the recipient's checks),
        # not_forwarded, lost (no dial or write to the target), dropped (MAX_FORWARDS),
        # too_large; and paths_lost (connections that lost what was sent on them).
        self.stats: Counter[str] = Counter()
        self._address_of: Callable[[str], str | None] = _no_one
        self._members: Callable[[], Collection[str]] = _no_others
        # When a dial to each address last failed (until one works).
        self._failed_at: dict[str, float] = {}
        # The addresses of members that said they take RELAY frames (an earlier
        # version refuses a frame of a kind it does not know, and a run of them cut
        # the connection that carried its other frames too).
        self._takers: set[str] = set()
        self._heard: set[str] = set()  # members' addresses heard from at all
        # The addresses whose frames go by relay, said in the log once.
        self._said: set[str] = set()
        # Addresses whose last dial was refused (nothing listens there).
        self._refused: set[str] = set()
        # When membership last found the member at each address answering only through
        # others: alive, so a refusal there is a firewall's, not a peer that is down.
        self._indirect: dict[str, float] = {}
        # Frames being forwarded, by target (at most MAX_FORWARDS each).
        self._forwarding: Counter[str] = Counter()

    def route(
        self, address_of: Callable[[str], str | None], members: Callable[[], Collection[str]]
    ) -> None:
        """Relay through the live members ``members()`` (ids, this peer's excepted),
        found at ``address_of(id)``."""
        self._address_of, self._members = address_of, members

    def heard(self, address: str, takes: Collection[int]) -> None:
        """The member at ``address`` said which of the later frame kinds it takes."""
        self._heard.add(address)
        if FrameType.RELAY in takes:
            self._takers.add(address)
        else:
            self._takers.discard(address)

    # -- sending ------------------------------------------------------------------
    def dial_failed(self, address: str, exc: BaseException) -> None:
        """A dial to ``address`` failed with ``exc``. A refusal says the machine is up
        and nothing listens: the peer is down (its frames are not relayed, to be lost
        at the relay with the sender none the wiser), unless membership found it
        answering through others lately (a firewall's REJECT); an unanswered dial may
        be a cut."""
        if refused_dial(exc) and not self._answers_others(address):
            self._refused.add(address)
            self._failed_at.pop(address, None)
        else:
            self._refused.discard(address)
            self._failed_at[address] = trio.current_time()

    def may_carry(self, address: str) -> bool:
        """Whether frames for the member at ``address``, whose dial failed, may go by
        relay: nothing refused it, and a member that takes RELAY may carry them."""
        others = [self._address_of(m) for m in self._members()]
        return address not in self._refused and any(
            a in self._takers for a in others if a != address
        )

    def forget(self, address: str) -> None:
        """The member at ``address`` left or died: one back there is dialled afresh."""
        self._failed_at.pop(address, None)
        self._refused.discard(address)
        self._said.discard(address)
        self._indirect.pop(address, None)

    def reached_indirectly(self, address: str) -> None:
        """Membership's probe of the member at ``address`` was answered only through
        others: a refusal of dials there is a firewall's, and its frames go by relay."""
        now = trio.current_time()
        self._indirect[address] = now
        if address in self._refused:
            self._refused.discard(address)
            self._failed_at[address] = now

    def _answers_others(self, address: str) -> bool:
        at = self._indirect.get(address)
        return at is not None and trio.current_time() - at < INDIRECT_MEMORY

    def path_lost(self, address: str) -> None:
        """The connection to ``address`` was closed as one that loses what is sent on
        it: as after an unanswered dial, frames for the member there go by relay, the
        first of them starting a dial in the background (which, answered, sends them
        directly again)."""
        self.stats["paths_lost"] += 1
        self._refused.discard(address)
        self._failed_at[address] = trio.current_time() - REDIAL

    def dialled(self, address: str) -> None:
        self._failed_at.pop(address, None)
        self._refused.discard(address)
        self._indirect.pop(address, None)
        if address in self._said:
            self._said.discard(address)
            log.info("%s answers a dial again: its frames go to it directly", address)

    def first(self, address: str, target: str) -> bool:
        """Whether a frame for ``target`` at ``address`` goes by relay without a dial
        of its own: one failed there lately. Every REDIAL seconds the address is
        dialled again, in the background (a dial nobody answers takes 5 s, which a
        send that waited for it would have spent: a barrier given up, a host's
        request not made), and once one works the frames go directly."""
        failed = self._failed_at.get(address)
        if not target or failed is None or not self.may_carry(address):
            return False
        now = trio.current_time()
        if now - failed >= REDIAL and (nursery := self._links.nursery) is not None:
            self._failed_at[address] = now  # one dial at a time
            nursery.start_soon(self._links.connection, address)
        return True

    def _relays_for(self, target: str) -> list[tuple[str, str]]:
        """(id, address) of the members that may carry a frame to ``target`` (they
        said they take RELAY): those whose last dial did not fail first, each frame in
        an order of its own. A relay that cannot reach the target loses what it is
        given and nobody is told: spread frame by frame, those the caller sends again
        (what must arrive is acknowledged) go another way too (a review)."""
        links = self._links
        turn = links.writer.next_seq
        found = [
            (member, address)
            for member in self._members()
            if member not in (target, links.self_id)
            and (address := self._address_of(member)) is not None
            and address in self._takers
        ]
        found.sort(
            key=lambda m: (
                m[1] in self._failed_at,
                xxhash.xxh64_intdigest(f"{target} {m[0]} {turn}".encode()),
            )
        )
        return found

    async def send(self, message: Message, target: str) -> bool:
        """Send ``message`` to the member ``target`` by way of another; False if no
        relay took it (or the frame is too large to wrap)."""
        target_address = self._address_of(target) if target else None
        # Whether the target takes RELAY is the relay's to know: it hears the target,
        # which this peer may never have (a link cut before they met: a review). One
        # heard here not to take it is not sent any (the relay would drop it).
        if target_address is None or target_address in self._refused:
            return False
        if target_address in self._heard and target_address not in self._takers:
            return False
        links = self._links
        for relay_id, address in self._relays_for(target):
            conn = await links.connection(address)
            if conn is None:
                continue
            try:
                inner = links.writer.frame(message.KIND, message.to_wire(), time.time(), to=target)
            except FrameError:
                return False  # too large for any frame: the caller's own mistake shows
            if len(inner) > MAX_RELAYED:
                self.stats["too_large"] += 1
                return False
            if await links.send_on(conn, Relay(target, inner), relay_id):
                self.stats["sent"] += 1
                if target_address not in self._said:  # once until it answers a dial
                    self._said.add(target_address)
                    log.warning(
                        "cannot reach %s (%s) directly: its frames go by way of %s",
                        target,
                        target_address,
                        relay_id,
                    )
                return True
        return False

    # -- receiving ----------------------------------------------------------------
    async def received(self, frame: Frame, relay: Relay, conn: ConnT) -> None:
        """A RELAY frame from ``frame.sender``: open it if it is for this peer, else
        forward it once to its recipient."""
        links = self._links
        if relay.to == links.self_id:
            reader = FrameReader(links.secret, links.guard)
            reader.receive_data(relay.frame)
            inner = reader.next_event(time.time())
            if not isinstance(inner, Frame) or inner.type is FrameType.RELAY:
                # Checked as any frame: a replay, a stale one, one for another peer.
                self.stats["refused"] += 1
                return
            self.stats["opened"] += 1
            # A member behind a REJECT answers by relay from now on (its probes' Acks
            # among them, direct to membership): still alive, its refusals still a
            # firewall's (a review: every INDIRECT_MEMORY it went back to refused).
            address = self._address_of(inner.sender)
            if address is not None and address in self._indirect:
                self._indirect[address] = trio.current_time()
            await links.dispatch(inner, conn, via=frame.sender)
        elif (
            relay.hops == 0
            and (address := self._address_of(relay.to)) is not None
            and address in self._takers  # an earlier version refuses RELAY
            and (nursery := links.nursery) is not None
        ):
            if self._forwarding[relay.to] >= MAX_FORWARDS:
                # A target that takes nothing in: what waits for it here is bounded,
                # and the sender sends again what must arrive.
                self.stats["dropped"] += 1
                return
            self._forwarding[relay.to] += 1
            # In a task: not to hold up the frames behind it on ``conn``.
            nursery.start_soon(self._forward, address, relay)
        else:
            self.stats["not_forwarded"] += 1

    async def _forward(self, address: str, relay: Relay) -> None:
        links = self._links
        try:
            conn = await links.connection(address)  # directly: one relay at most
            forwarded = Relay(relay.to, relay.frame, 1)
            if conn is not None and await links.send_on(conn, forwarded, relay.to):
                self.stats["forwarded"] += 1
            else:
                self.stats["lost"] += 1
        finally:
            self._forwarding[relay.to] -= 1
            if not self._forwarding[relay.to]:
                del self._forwarding[relay.to]

    async def reply(self, conn: ConnT, message: Message, target: str, via: str) -> None:
        """Answer ``target``'s frame that came by the relay ``via``: the same way back,
        on its connection (lost with it, as any answer)."""
        links = self._links
        inner = links.writer.frame(message.KIND, message.to_wire(), time.time(), to=target)
        if len(inner) > MAX_RELAYED:  # no answer is near it today; lost if one were
            self.stats["too_large"] += 1
            return
        await links.send_on(conn, Relay(target, inner), via)
