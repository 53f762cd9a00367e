"""Hand-off: when the ring changes, hosts move to their new owners with their history.

The old owner sends each host it no longer owns (pending URLs, fingerprints of
what it fetched, the time of its last request and its delay, and under --recrawl
its pages' revisit state, so that the new owner refreshes them on) in HANDOFF frames,
and forgets the host only when the new owner has acknowledged every frame (the
new owner acknowledges after a commit). A host with a request in flight waits
for it to end. When a sweep is over, the old owner tells everyone with a
HANDOFF_DONE frame.

Meanwhile the new owner holds the hosts it gained from a live peer
(:mod:`ubipy.peer.holds`): no request goes to them until that peer's HANDOFF_DONE
arrives (or it dies, or a safety time-out passes), so a host is never asked by two
peers at once, and the delay after the old owner's last request is kept.

Without replicas, a peer that dies takes its history with it: whoever gains its
hosts would fetch again what it had fetched. So the gainers hold those hosts for
a grace period (``--rejoin-grace``): a peer restarted within it takes them back,
with whatever was admitted for them meanwhile, and nothing is fetched twice. A
peer that stays dead only delays its hosts by the grace.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace

import trio

from ubipy.errors import FrameError, StorageError, UbipyError
from ubipy.net import Handle, Reply, Send
from ubipy.peer.crawler import Crawler
from ubipy.peer.holds import NO_RING, SWEEP_AGAIN, Hold, HoldsMixin
from ubipy.peer.ids import run_ids
from ubipy.peer.refreshpages import revisits_from_wire, revisits_to_wire
from ubipy.peer.replica import Replicator
from ubipy.peer.replicaframes import pieces
from ubipy.peer.router import mark_from_wire, mark_to_wire, url_items
from ubipy.peer.wakeup import Wakeup
from ubipy.ring import Ring
from ubipy.store import HostMark, NewURL
from ubipy.wire import Handoff as HandoffFrame
from ubipy.wire import HandoffAck, HandoffDone, Revisit

log = logging.getLogger(__name__)

_ACK_PATIENCE = 10.0
# A gained host is held at most this long for a peer that neither hands it
# over nor dies (a stuck sweep must not stall the host forever), past the longest
# a request may last (the sweep hands a host over once its request has ended).
_HOLD_LIMIT = 60.0
# How soon a sweep the shard refused is tried again.
_STORAGE_RETRY = 5.0
AddressOf = Callable[[str], str | None]


@dataclass(slots=True)
class HandoffStats:
    hosts_out: int = 0
    urls_out: int = 0
    bytes_out: int = 0
    hosts_in: int = 0
    urls_in: int = 0


@dataclass(slots=True)
class _Waiting:
    address: str
    done: trio.Event = field(default_factory=trio.Event)
    refused: bool = False


class NotOurs(UbipyError, ValueError):
    """A hand-off of a host this peer does not own under its ring: refused, so the
    sender keeps it and hands it to the owner once its own ring has caught up
    (taking it here would come after this peer said its sweep was done)."""


class Handoff(HoldsMixin):
    def __init__(
        self,
        self_id: str,
        crawler: Crawler,
        send: Send,
        address_of: AddressOf,
        *,
        last_members: Collection[str] = (),
        leaves: Mapping[str, str] | None = None,
        handed_on: bool = False,
        grace: float = 0.0,
        fence: float = 0.0,
        copies: int = 1,
        orphan_grace: float = 0.0,
        request_limit: float = 0.0,
        rng: random.Random | None = None,
        synced: Callable[[], Awaitable[None]] | None = None,
        copies_here: Replicator | None = None,
        heard_at: Mapping[str, float] | None = None,
    ) -> None:
        self.self_id = self_id
        # When each peer was last heard from (Links.heard_at; None: not known).
        self._heard_at = heard_at
        # The copies of other peers' hosts kept here (--replicas 2), and the peers
        # seen die or leave (whose copies may be all that is left of some hosts).
        self._copies_here = copies_here
        self._gone_ids: set[str] = set()
        # Those membership says left, and those known dead (HoldsMixin.ring_changed).
        self._left_now: frozenset[str] = frozenset()
        self._known_dead: set[str] = set()
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
        # The peers dead within a minute of the latest death (holds._TOGETHER), with when they died.
        self._dead: dict[str, float] = {}
        self._holds: list[Hold] = []
        self.on_hosts_lost: Callable[[], None] = lambda: None
        # The ring each peer last said it finished sweeping under; those that left,
        # known from the last start (HoldsMixin.leaves).
        self._swept: dict[str, str] = dict(leaves or {})
        self._leaves_kept = dict(self._swept)
        self.remember_leaves: Callable[[dict[str, str]], None] = lambda leaves: None
        # Whether a leave of this peer handed hosts on that the others may still hold,
        # kept in the shard through ``remember_handed`` until they are back.
        self._handed_on = handed_on
        self.remember_handed: Callable[[bool], None] = lambda handed: None
        self._kick = Wakeup()
        # The owners that did not take a host in the last sweep (a leaving peer's).
        self.unanswered: set[str] = set()
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
        others = set(last_members) - {self_id} - self._swept.keys()
        if others:
            # Back from a stop: the hosts the last ring gave to others may still be
            # theirs, in their shards. They are held until each of those peers is
            # back and has swept, is known dead, or the limit passes. After a leave
            # that handed hosts on, none of them was this peer's: the hosts it handed
            # are in their shards (a whole cluster stopped, the others refusing each
            # other's hand-offs: the first back, alone, fetched them again, CI).
            mine = Ring(others) if handed_on else Ring([self_id, *others])
            self._add_hold(mine, NO_RING, others, self._hold_limit, after_leave=handed_on)

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
                again = SWEEP_AGAIN[0] if again is None else min(2 * again, SWEEP_AGAIN[1])

    async def sweep(self, *, wait: bool = True) -> bool:
        """Hand off every host this peer holds but does not own; True if all went.
        Then tell the others: without ``wait``, each HANDOFF_DONE goes on its own
        (the sweeper's: one to a peer across a cut must not hold up the next sweep),
        with it they are all sent before this returns (a peer leaving)."""
        complete = True
        ring = self._ring
        # An owner that did not take one host will not take the next in this sweep: a
        # frozen one had each of its hosts wait out the ack's patience in turn.
        failed = self.unanswered = set()
        own = ((host, False) for host in self._crawler.held_hosts())
        # Then the copies of hosts whose sender went before it handed them over: the
        # peers that wait for this sweep's DONE wait for those too (holds.peer_gone).
        strays = self._copies_here.strays(ring, self._gone_ids) if self._copies_here else ()
        copies = ((host, True) for host in strays)
        for host, copy in itertools.chain(own, copies):
            if ring is not self._ring:
                self._kick.set()  # the ring moved again: start over
                return False
            owner = ring.owner(host)
            if owner in failed:
                complete = False
            elif owner != self.self_id:
                handed = self._hand_copy(host, owner, ring) if copy else self._hand(host, owner)
                if not await handed:
                    complete = False
                    failed.add(owner)
            elif copy and self._copies_here is not None:
                self._copies_here.take_copy(host)  # StorageError: the sweep tries again
        if ring is not self._ring:
            # The ring moved during the last hand-off (which may wait a long time, a
            # partition long): a DONE for the old ring would be believed by any peer
            # whose ring happens to read the same now. Sweep again.
            self._kick.set()
            return False
        if complete:
            key = ring.key
            told = tuple(self.leaves().items())
            for peer in self._alive - {self.self_id}:
                address = self._address_of(peer)
                if address is None or address in self._gone:
                    continue
                done = HandoffDone(key, self._asked.get(peer, 0), left=told)
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
        if self._address_of(owner) is None:
            return False
        if self.self_id not in self._ring.members and not self._handed_on:
            # A leave's hand-off: kept before the first goes (synced below with the
            # pages done), for this peer's next start.
            self._handed_on = True
            self.remember_handed(True)
        if done and self._synced is not None:
            # Its pages go to the new owner done: their records in this peer's archive
            # are on disk first, or a machine's crash after the owner took them lost
            # them for good (raises StorageError: the sweep tries again later).
            await self._synced()
        sent = await self._send_host(host, owner, pending, done, mark, revisits, seed_lookup)
        if sent is None:
            return False
        self._crawler.handed_off(host)
        log.info(
            "handed off 1 hosts (%d URLs, %d bytes) to %s: %s, %d done",
            len(pending),
            sent,
            owner,
            host,
            len(done),
        )
        return True

    async def _hand_copy(self, host: str, owner: str, ring: Ring) -> bool:
        """Hand the copies here of ``host``, from a peer that is gone, to its owner
        under ``ring`` (see Replicator.strays)."""
        assert self._copies_here is not None
        pending, done, mark, rows = self._copies_here.copy_of(host)
        revisits = revisits_to_wire(rows)
        sent = await self._send_host(host, owner, pending, done, mark, revisits, None)
        if sent is None:
            return False
        # Kept as the copy of the owner's successor under the ring now, too: what the
        # owner commits of it may be here already.
        self._copies_here.stray_handed(host, ring, self._ring)  # StorageError: handed again
        log.info(
            "handed a gone peer's copy of %s to %s: %d URLs, %d done",
            host,
            owner,
            len(pending),
            len(done),
        )
        return True

    async def _send_host(
        self,
        host: str,
        owner: str,
        pending: Sequence[NewURL],
        done: Sequence[int],
        mark: HostMark | None,
        revisits: Sequence[tuple[Revisit, ...]],
        seed_lookup: tuple[str, ...] | None,
    ) -> int | None:
        """Send a host's state to ``owner`` in HANDOFF frames; the bytes sent once every
        frame is taken, None if one was not."""
        address = self._address_of(owner)
        if address is None:
            return None
        # Cut by bytes too: 2,000 URLs of 2 KB and a run of revisits made a frame over
        # the cap, which the writer refused, and the peer died of it at each start (a
        # review). At most 2 MiB of URLs and 1 MiB of revisits a frame.
        parts = list(pieces([(u.url, u.depth, u.score) for u in pending], done))
        chunks = max(len(parts), len(revisits))
        sent_bytes = 0
        for i in range(chunks):
            urls, chunk_done, size = parts[i] if i < len(parts) else ((), (), 0)
            floor = self._crawler.config.politeness.delay
            last_mark = None if mark is None or i < chunks - 1 else mark_to_wire(mark, floor)
            run = revisits[i] if i < len(revisits) else ()
            # Each try takes an id of its own (set by _deliver).
            frame = HandoffFrame(0, host, urls, chunk_done, last_mark, run, seed_lookup)
            if not await self._deliver(address, frame, owner):
                # Refused (the owner is leaving too, or its ring lags) or unanswered.
                log.info("hand-off of %s to %s not taken; kept", host, owner)
                return None
            sent_bytes += size + 8 * len(chunk_done) + sum(len(r.url) for r in run)
        self.stats.hosts_out += 1
        self.stats.urls_out += len(pending)
        self.stats.bytes_out += sent_bytes
        return sent_bytes

    async def _deliver(self, address: str, frame: HandoffFrame, owner: str) -> bool:
        tried = -math.inf
        for _ in range(3):
            if address in self._gone:
                return False
            if self._heard_at is not None and self._heard_at.get(owner, -math.inf) < tried:
                # Nothing at all heard from it since the last try (a member pings every
                # second): frozen, or cut off; three tries held a leaving peer 30 s.
                return False
            tried = trio.current_time()
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
            if done.left and self._is_member(sender):
                self.heard_of_leaves(done.left)
            if self._copies_here is not None and self._nursery is not None:
                # In a task, as when this peer's ring catches up (holds.ring_changed):
                # over a big copy it takes a while, and the frames behind this DONE
                # on its connection wait for the handler.
                self._nursery.start_soon(self._copies_here.swept, sender, done.ring)

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
