"""Hand-off: when the ring changes, hosts move to their new owners with their history.

The old owner sends each host it no longer owns (pending URLs, fingerprints of
what it fetched, the time of its last request and its delay, and under --recrawl
its pages' revisit state, so that the new owner refreshes them on) in HANDOFF frames,
and forgets the host only when the new owner has acknowledged every frame (the
new owner acknowledges after a commit). A host with a request in flight waits
for it to end. When a sweep is over, the old owner tells everyone with a
HANDOFF_DONE frame.

Meanwhile the new owner holds the hosts it gained from a live peer: no request
goes to them until that peer's HANDOFF_DONE arrives (or it dies, or a safety
time-out passes), so a host is never asked by two peers at once, and the delay
after the old owner's last request is kept.

Without replicas, a peer that dies takes its history with it: whoever gains its
hosts would fetch again what it had fetched. So the gainers hold those hosts for
a grace period (``--rejoin-grace``): a peer restarted within it takes them back,
with whatever was admitted for them meanwhile, and nothing is fetched twice. A
peer that stays dead only delays its hosts by the grace.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field, replace

import trio

from ubipy.errors import FrameError, StorageError, UbipyError
from ubipy.net import Handle, Reply, Send
from ubipy.peer.crawler import Crawler
from ubipy.peer.ids import run_ids
from ubipy.peer.refreshpages import revisits_from_wire, revisits_to_wire
from ubipy.peer.replicaframes import pieces
from ubipy.peer.router import mark_from_wire, mark_to_wire, url_items
from ubipy.peer.wakeup import Wakeup
from ubipy.ring import Ring
from ubipy.wire import Handoff as HandoffFrame
from ubipy.wire import HandoffAck, HandoffDone

log = logging.getLogger(__name__)

_ACK_PATIENCE = 10.0
# A gained host is held at most this long for a peer that neither hands it
# over nor dies (a stuck sweep must not stall the host forever), past the longest
# a request may last (the sweep hands a host over once its request has ended).
_HOLD_LIMIT = 60.0
# Peers that die within this many seconds of each other died of one cut (see
# peer_gone): a host whose every copy was on them has none on this side.
_TOGETHER = 60.0
# How soon a sweep the shard refused is tried again.
_STORAGE_RETRY = 5.0
# How soon a sweep that left hosts here is tried again: the first wait, the longest.
_SWEEP_AGAIN = (2.0, 30.0)
# The ring key of a hold made under no ring change of this peer's own (back from
# a stop, or a peer died): only a sweep under this peer's current ring releases it.
_NO_RING = ""

AddressOf = Callable[[str], str | None]


@dataclass(slots=True)
class HandoffStats:
    hosts_out: int = 0
    urls_out: int = 0
    bytes_out: int = 0
    hosts_in: int = 0
    urls_in: int = 0


@dataclass(slots=True)
class _Hold:
    """Hosts gained in one ring change, held until every peer that might have held
    them has swept under that ring (its HANDOFF_DONE), died, or the limit passed."""

    old_ring: Ring
    ring_key: str
    waiting: set[str]
    until: float
    # Non-zero: only a DONE answering this request, under the current ring, counts.
    token: int = 0
    # Not empty: the hold is on the hosts every copy of which was on these peers (all
    # dead), not on those old_ring gave to others.
    orphans_of: frozenset[str] = frozenset()


def ring_key(ring: Ring) -> str:
    return ",".join(sorted(ring.members))


@dataclass(slots=True)
class _Waiting:
    address: str
    done: trio.Event = field(default_factory=trio.Event)
    refused: bool = False


class NotOurs(UbipyError, ValueError):
    """A hand-off of a host this peer does not own under its ring: refused, so the
    sender keeps it and hands it to the owner once its own ring has caught up
    (taking it here would come after this peer said its sweep was done)."""


class Handoff:
    def __init__(
        self,
        self_id: str,
        crawler: Crawler,
        send: Send,
        address_of: AddressOf,
        *,
        last_members: Collection[str] = (),
        grace: float = 0.0,
        fence: float = 0.0,
        copies: int = 1,
        orphan_grace: float = 0.0,
        request_limit: float = 0.0,
        rng: random.Random | None = None,
        synced: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.self_id = self_id
        # Returns once what the shard committed is on disk (ubipy.peer.syncing).
        self._synced = synced
        self._crawler = crawler
        self._send = send
        self._address_of = address_of
        self._ring = Ring([self_id])
        self._grace = grace
        self._fence = fence
        # With replicas, a host whose owner and successors all died at once (a
        # partition that cut them off together) has no copy on this side: it waits
        # ``orphan_grace`` for one of them rather than being crawled afresh.
        self._copies = copies
        self._orphan_grace = orphan_grace
        # ``request_limit``: the longest a request may last (--fetch-deadline).
        self._hold_limit = request_limit + _HOLD_LIMIT
        # The peers dead within _TOGETHER of the latest death, with when they died.
        self._dead: dict[str, float] = {}
        self._holds: list[_Hold] = []
        # The ring each peer last said it finished sweeping under.
        self._swept: dict[str, str] = {}
        self._kick = Wakeup()
        self._holds_changed = Wakeup()
        self._acks: dict[int, _Waiting] = {}
        # Addresses of peers that left or died: nothing more is sent to them until
        # they are back, so a sweep under a ring that still names them does not wait
        # out the patience once for every host.
        self._gone: set[str] = set()
        self._ids = run_ids(rng)
        self._tokens = rng or random.Random()
        # The latest request token of each peer that asked us to sweep.
        self._asked: dict[str, int] = {}
        # (peer, token) of the asks sent again until answered (_keep_asking).
        self._asking: set[tuple[str, int]] = set()
        self._nursery: trio.Nursery | None = None
        self._alive: frozenset[str] = frozenset({self_id})
        self.stats = HandoffStats()
        crawler.scheduler.hold(self._held)
        others = set(last_members) - {self_id}
        if others:
            # Back from a stop: the hosts the last ring gave to others may still be
            # theirs, in their shards. They are held until each of those peers is
            # back and has swept, is known dead, or the limit passes.
            self._add_hold(Ring([self_id, *others]), _NO_RING, others, self._hold_limit)

    # -- the ring moved ---------------------------------------------------------
    def ring_changed(
        self, ring: Ring, alive: frozenset[str], handing: frozenset[str], *, sweep: bool = True
    ) -> None:
        """The ring is now ``ring``; ``handing`` are the peers that will hand off
        what they held (the live ones and those that left gracefully, not the dead).
        Without ``sweep`` the caller sweeps itself (a peer leaving)."""
        old, self._ring, self._alive = self._ring, ring, alive
        for peer in alive & self._dead.keys():
            del self._dead[peer]
        # One back after leaving holds hosts again: its leave's sweep says nothing now.
        for peer in [p for p in alive if self._left_swept(p)]:
            del self._swept[peer]
        if list(old.members) == [self.self_id] and len(alive) > 1:
            # A peer that was alone (just started, or back after a crash) knows
            # nothing of who held what meanwhile: whatever it owns, it gains.
            old = Ring(alive - {self.self_id})
        # Any other peer may hold a gained host (views of the ring differ for a
        # moment while membership settles), so all of them are waited for.
        key = ring_key(ring)
        # A peer may have finished its sweep under this very ring before this
        # peer saw the ring change: its DONE has already come. One that left and has
        # done its leave's sweep (under a ring without it) holds nothing more: it is
        # not waited for under a later ring, for which it can send no DONE (a second
        # leave held every host gained for the hold's whole limit).
        waiting = {
            p
            for p in handing - {self.self_id}
            if self._swept.get(p) != key and (p in alive or not self._left_swept(p))
        }
        if waiting:
            self._add_hold(old, key, waiting, self._hold_limit)
        for peer, swept in list(self._swept.items()):
            if swept == key:
                self.release_from(peer, key)
        # A DONE answering our request must be under the ring we have now: ask again.
        self._ask_again()
        if sweep:
            self._kick.set()

    def _left_swept(self, peer_id: str) -> bool:
        """Whether ``peer_id``'s last sweep was under a ring without it: its leave's."""
        key = self._swept.get(peer_id)
        return key is not None and peer_id not in key.split(",")

    def peer_gone(self, peer_id: str) -> None:
        """A dead peer hands nothing over: hold what it owned for the grace period, in
        case it comes back with its history, and at least for the fence: cut off
        rather than dead, it stops fetching within its lease, and its hosts must see
        nobody new before then. For the same reason a hold that waited for it waits
        until the fence at most, not until now: what it may hold under an older view
        (a host it was given while this peer was cut off, one it owned before a join)
        is not fetched here before it has stopped."""
        fenced = [h for h in self._holds if peer_id in h.waiting and not h.orphans_of]
        self.release_from(peer_id, None)
        if self._fence > 0 and fenced:
            until = trio.current_time() + self._fence
            for h in fenced:
                self._holds.append(replace(h, waiting={peer_id}, until=min(h.until, until)))
            self._holds_changed.set()
        hold = max(self._grace, self._fence)
        if hold > 0 and peer_id not in self._ring.members:
            with_it = Ring([*self._ring.members, peer_id])
            self._add_hold(with_it, _NO_RING, {peer_id}, hold)
            log.info("holding the hosts of dead %s for %.1f s", peer_id, hold)
        if self._copies > 1 and self._orphan_grace > 0 and peer_id not in self._ring.members:
            # Deaths within a minute of each other are one cut: hours apart, the first
            # one's hosts were copied again in between, and a host whose two copies
            # were on them has a copy here (held a day for nothing, it was).
            now = trio.current_time()
            self._dead[peer_id] = now
            self._dead = {p: t for p, t in self._dead.items() if t > now - _TOGETHER}
            if len(self._dead) >= self._copies:  # fewer cannot hold every copy
                dead = frozenset(self._dead)
                # Holds on every host's path to a job: the newest covers the older ones
                # of the same cut (their dead are its dead still, and more).
                self._holds = [
                    h for h in self._holds if not (h.orphans_of and h.orphans_of <= dead)
                ]
                with_them = Ring([*self._ring.members, *dead])
                self._add_hold(with_them, _NO_RING, set(dead), self._orphan_grace, orphans_of=dead)

    def resumed(self, others: frozenset[str]) -> None:
        """This peer has a majority in sight again after a pause: while it was cut off,
        any of ``others`` may have been given its hosts. Every host it owns waits
        until each of them, asked now, has swept under the ring it has then (or died,
        or the limit passed). Asked, because a DONE it said before may arrive only now,
        held up by the partition, and the ring may read the same again."""
        waiting = set(others - {self.self_id})
        if not waiting:
            return
        token = self._tokens.randrange(1, 2**62)
        self._add_hold(Ring(waiting), _NO_RING, waiting, self._hold_limit, token)
        log.info("every host held until %s have swept", ", ".join(sorted(waiting)))
        self._ask_again()

    def _ask_again(self) -> None:
        """Ask every peer a request-bound hold waits for to sweep and say so, now and
        again until it has (an ask lost on a connection that broke, right after a
        heal, would leave the hold to its limit)."""
        for hold in self._holds:
            for peer in hold.waiting if hold.token else ():
                if self._nursery is None:
                    return
                self._nursery.start_soon(self._ask, peer, hold.token)
                if (peer, hold.token) not in self._asking:
                    self._asking.add((peer, hold.token))
                    self._nursery.start_soon(self._keep_asking, peer, hold.token)

    async def _ask(self, peer: str, token: int) -> None:
        address = self._address_of(peer)
        if address is not None:
            await self._send(address, HandoffDone("", token, ask=True))

    async def _keep_asking(self, peer: str, token: int) -> None:
        wait = _SWEEP_AGAIN[0]
        try:
            while True:
                await trio.sleep(wait)
                if not any(h.token == token and peer in h.waiting for h in self._holds):
                    return
                await self._ask(peer, token)
                wait = min(2 * wait, _SWEEP_AGAIN[1])
        finally:
            self._asking.discard((peer, token))

    def asked(self, peer_id: str, token: int) -> None:
        """``peer_id`` asks for a sweep, and DONEs that say they came after it."""
        self._asked[peer_id] = token
        self._kick.set()

    def release_from(self, peer_id: str, key: str | None, token: int = 0) -> None:
        """``peer_id`` finished its sweep under the ring ``key`` (None: it is dead),
        answering our request ``token`` if not 0."""
        if key is not None:
            self._swept[peer_id] = key
        # A sweep under the ring this peer has now covers every host the sender
        # holds, whatever ring the hold was made under.
        current = key is None or key == ring_key(self._ring)
        changed = False
        for hold in self._holds:
            if hold.token:
                counts = key is None or (current and token == hold.token)
            else:
                counts = current or bool(key and hold.ring_key == key)
            if peer_id in hold.waiting and counts:
                hold.waiting.discard(peer_id)
                changed = True
        if changed:
            self._holds = [h for h in self._holds if h.waiting]
            self._crawler.release_held()

    def _held(self, host: str) -> bool:
        # A host that is no longer ours gets nothing more from here: its state is
        # on its way to the new owner, and must not change under the hand-off.
        if self._ring.owner(host) != self.self_id:
            return True
        for h in self._holds:
            if h.orphans_of:
                if h.orphans_of.issuperset(h.old_ring.successors(host, self._copies)):
                    return True
            elif h.old_ring.owner(host) != self.self_id:
                return True
        return False

    def _add_hold(
        self,
        old_ring: Ring,
        key: str,
        waiting: set[str],
        limit: float,
        token: int = 0,
        orphans_of: frozenset[str] = frozenset(),
    ) -> None:
        until = trio.current_time() + limit
        self._holds.append(_Hold(old_ring, key, waiting, until, token, orphans_of))
        self._holds_changed.set()

    async def _expire_holds(self) -> None:
        """Let go of holds whose time is up, when it is up (a parked host is looked at
        again only when something releases it)."""
        while True:
            await self._holds_changed.wait(min((h.until for h in self._holds), default=None))
            now = trio.current_time()
            expired = [h for h in self._holds if h.until <= now]
            if expired:
                self._holds = [h for h in self._holds if h.until > now]
                for hold in expired:
                    log.info("hold on hosts awaiting %s expired", ", ".join(sorted(hold.waiting)))
                self._crawler.release_held()

    # -- sending ------------------------------------------------------------------
    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._expire_holds)
            await self._sweeper()

    async def _sweeper(self) -> None:
        """Sweep after every ring change; hosts with a request in flight are retried.
        A sweep that could not hand every host over (refused by a peer whose ring lags,
        unanswered across a cut link) is tried again, after 2 s doubling to 30 s: its
        hosts would otherwise stay here, unasked, until the next ring change, and
        the peers waiting for its DONE would wait out their holds."""
        again: float | None = None
        while True:
            await self._kick.wait(None if again is None else trio.current_time() + again)
            try:
                complete = await self.sweep(wait=False)
            except StorageError as exc:
                # A host handed over could not be dropped here: it is handed again
                # (the new owner takes it again as it is) once the shard takes writes.
                log.warning("hand-offs wait for the shard: %s", exc)
                await trio.sleep(_STORAGE_RETRY)
                self._kick.set()
                continue
            if complete or self._kick.is_set():
                again = None
            else:
                again = _SWEEP_AGAIN[0] if again is None else min(2 * again, _SWEEP_AGAIN[1])

    async def sweep(self, *, wait: bool = True) -> bool:
        """Hand off every host this peer holds but does not own; True if all went.
        Then tell the others: without ``wait``, each HANDOFF_DONE goes on its own
        (the sweeper's: one to a peer across a cut must not hold up the next sweep),
        with it they are all sent before this returns (a peer leaving)."""
        complete = True
        ring = self._ring
        for host in self._crawler.held_hosts():
            if ring is not self._ring:
                self._kick.set()  # the ring moved again: start over
                return False
            owner = ring.owner(host)
            if owner == self.self_id:
                continue
            if not await self._hand(host, owner):
                complete = False
        if ring is not self._ring:
            # The ring moved during the last hand-off (which may wait a long time, a
            # partition long): a DONE for the old ring would be believed by any peer
            # whose ring happens to read the same now. Sweep again.
            self._kick.set()
            return False
        if complete:
            key = ring_key(ring)
            for peer in self._alive - {self.self_id}:
                address = self._address_of(peer)
                if address is None or address in self._gone:
                    continue
                done = HandoffDone(key, self._asked.get(peer, 0))
                if not wait and self._nursery is not None:
                    # Sent in turn, one to a peer across a cut waited out its dials,
                    # and the next ring change went unswept for most of a minute
                    # (found by a review).
                    self._nursery.start_soon(self._send, address, done)
                else:
                    await self._send(address, done)
        return complete

    @property
    def ring(self) -> Ring:
        return self._ring

    async def _hand(self, host: str, owner: str) -> bool:
        crawler = self._crawler
        while (state := crawler.host_for_handoff(host)) is None:
            if crawler.scheduler.busy(host):
                # A request in flight: its outcome goes with the host.
                await crawler.request_ended.wait()
            else:
                # The shard refused the outcomes waiting to be written before the host
                # is read. No request starts while it does, so waiting for one to end
                # hung the sweep for good, the disk long back (found by a review):
                # wait out the committer's retry and try again.
                await trio.sleep(crawler.config.store.storage_retry)
        pending, done, mark = state
        revisits = revisits_to_wire(crawler.revisits_of(host))  # one run a frame
        lookup = crawler.seed_lookup_of(host)
        seed_lookup = None if lookup is None else tuple(sorted(lookup))
        address = self._address_of(owner)
        if address is None:
            return False
        if done and self._synced is not None:
            # Its pages go to the new owner done: their records in this peer's archive
            # are on disk first, or a machine's crash after the owner took them lost
            # them for good (raises StorageError: the sweep tries again later).
            await self._synced()
        # Cut by bytes too: 2,000 URLs of 2 KB and a run of revisits made a frame over
        # the cap, which the writer refused, and the peer died of it at each start (a
        # review). At most 2 MiB of URLs and 1 MiB of revisits a frame.
        parts = list(pieces([(u.url, u.depth, u.score) for u in pending], done))
        chunks = max(len(parts), len(revisits))
        sent_bytes = 0
        for i in range(chunks):
            urls, chunk_done, size = parts[i] if i < len(parts) else ((), (), 0)
            last_mark = None if mark is None or i < chunks - 1 else mark_to_wire(mark)
            run = revisits[i] if i < len(revisits) else ()
            # Each try takes an id of its own (set by _deliver).
            frame = HandoffFrame(0, host, urls, chunk_done, last_mark, run, seed_lookup)
            if not await self._deliver(address, frame):
                # Refused (the owner is leaving too, or its ring lags) or unanswered.
                log.info("hand-off of %s to %s not taken; kept", host, owner)
                return False
            sent_bytes += size + 8 * len(chunk_done) + sum(len(r.url) for r in run)
        self._crawler.handed_off(host)
        self.stats.hosts_out += 1
        self.stats.urls_out += len(pending)
        self.stats.bytes_out += sent_bytes
        log.info(
            "handed off 1 hosts (%d URLs, %d bytes) to %s: %s, %d done",
            len(pending),
            sent_bytes,
            owner,
            host,
            len(done),
        )
        return True

    async def _deliver(self, address: str, frame: HandoffFrame) -> bool:
        for _ in range(3):
            if address in self._gone:
                return False
            handoff_id = next(self._ids)
            waiting = self._acks[handoff_id] = _Waiting(address)
            try:
                try:
                    sent = await self._send(address, replace(frame, id=handoff_id))
                except FrameError as exc:
                    # A frame the writer refuses (a bug: frames are cut under the
                    # cap): the host stays here, and the peer goes on.
                    log.error("hand-off of %s not sent: %s", frame.host, exc)
                    return False
                if sent:
                    with trio.move_on_after(_ACK_PATIENCE):
                        await waiting.done.wait()
                        return not waiting.refused
                    # No answer at all: the frame or its acknowledgement was lost.
            finally:
                del self._acks[handoff_id]
        return False

    def abandon(self, address: str) -> None:
        """The peer at ``address`` left or died: it will not answer what it was sent,
        and is sent nothing more until it is back."""
        self._gone.add(address)
        for waiting in self._acks.values():
            if waiting.address == address:
                waiting.refused = True
                waiting.done.set()

    def back(self, address: str) -> None:
        """A peer at ``address`` joined (again): hand-offs may go there."""
        self._gone.discard(address)

    def acked(self, handoff_id: int, *, refused: bool = False) -> None:
        waiting = self._acks.get(handoff_id)
        if waiting is not None:
            waiting.refused = refused
            waiting.done.set()

    # -- receiving ----------------------------------------------------------------
    def install(
        self, handle: Handle, *, stopping: Callable[[], bool], is_member: Callable[[str], bool]
    ) -> None:
        """Take the hand-off frames; ``stopping()``: this peer is leaving;
        ``is_member(peer id)``: whether that peer is a member."""
        self._stopping, self._is_member = stopping, is_member
        handle(HandoffFrame, self._on_handoff)
        handle(HandoffAck, self._on_handoff_ack)
        handle(HandoffDone, self._on_handoff_done)

    async def _on_handoff(self, sender: str, handoff: HandoffFrame, reply: Reply) -> None:
        try:
            if self._stopping():
                # Leaving too: what is handed here would only have to move again.
                raise NotOurs("this peer is leaving")
            self.receive(handoff)
        except NotOurs as exc:
            log.info("hand-off from %s refused: %s", sender, exc)
            await reply(HandoffAck(handoff.id, refused=True))
            return
        if self._synced is not None:
            # Acknowledged, the host leaves its old owner's shard: on disk first.
            await self._synced()
        await reply(HandoffAck(handoff.id))

    async def _on_handoff_ack(self, sender: str, ack: HandoffAck, reply: Reply) -> None:
        self.acked(ack.id, refused=ack.refused)

    async def _on_handoff_done(self, sender: str, done: HandoffDone, reply: Reply) -> None:
        if done.ask:
            # Only members sweep for each other (the request is kept per asker).
            if self._is_member(sender):
                self.asked(sender, done.token)
        else:
            self.release_from(sender, done.ring, done.token)

    def receive(self, handoff: HandoffFrame) -> None:
        """Take over a host; raises StorageError if it could not be made durable."""
        host = handoff.host
        if self._ring.owner(host) != self.self_id:
            raise NotOurs(f"{host} is not ours under this peer's ring")
        pending = url_items(handoff.pending, host=host)
        mark = None if handoff.mark is None else mark_from_wire(handoff.mark)
        revisits = revisits_from_wire(handoff.revisits, host)
        if handoff.seed_lookup is not None:
            self._crawler.adopt_seed_lookup(host, frozenset(handoff.seed_lookup))
        self._crawler.take_over(host, pending, list(handoff.done), mark, revisits)
        self.stats.urls_in += len(pending)
        if mark is not None:
            self.stats.hosts_in += 1
            log.info(
                "took over 1 hosts (%d URLs): %s, %d done", len(pending), host, len(handoff.done)
            )


__all__ = ["Handoff", "HandoffStats", "StorageError"]
