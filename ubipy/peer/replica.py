"""Replication (``--replicas 2``): each owner copies its frontier and its history
to the next distinct peer clockwise, which takes the hosts over if the owner dies.

What is copied: every URL the owner admits (pending), every page it stores
(done) and each host's politeness mark (when its last request ended, its delay,
its pages), sent to the successor as each commit ends (commits already group up
to 50 ms of work, so this is the batch, as forwarding's linger is). A copy that
lags the owner's commit is a page a crash would have fetched twice, so there is
no linger of its own. The payload is grouped by host, ``[host, pending, done]``
or ``[host, pending, done, [last_end, delay, pages]]``: pending URLs as
``[url, depth]`` (the successor recomputes their fingerprints, as for forwarded
URLs) and done pages as fingerprints only.

The successor keeps the copies in its ``replica`` and ``replica_marks`` tables.
When the ring drops a dead peer, its hosts fall to exactly that successor, which
moves the copies into its own frontier: pending URLs are fetched,
done ones are not fetched again, and the host's first request waits out the
dead owner's delay after its last one (a Crawl-delay longer than the failure
detection included). The copies name their sender: those of a host whose sender is out
of the ring and which the ring gives to another peer (a join moved it, and its old
owner died before handing it over) go to that owner with the hand-off's sweep
(:meth:`Replicator.strays`). When the ring changes, the hosts whose successor changed
are copied whole to the new one: only their names are noted then, and each host's
state is read from the shard as its frame is made, about a frame's worth at a time
with a checkpoint after each read (1,000 hosts read at once held the event loop
5 s, and all their rows in memory). A host no longer ours by then, or whose
successor changed again, is not read; what is committed for a host while its whole
copy waits is in that read, and is not queued besides.

Each frame is acknowledged (REPLICA_ACK) once the successor has stored it. A frame
that cannot be sent (no connection) is kept and tried again every second while its
successor is in the ring; one not acknowledged within two seconds is sent again.

A host gets no new request until the outcome of its last one is stored by its
successor: when a request ends, the host is held until the commit that records it
has been acknowledged. So an owner cut off from its successor stops at the
requests it has in flight, and whoever takes its hosts over knows every other page
it fetched (the delay between a host's requests is far longer than a commit and a
round trip, so a polite crawl does not wait for it; a crawl at delay 0 does).
"""

from __future__ import annotations

import logging
import math
import random
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import trio

from ubipy.errors import StorageError
from ubipy.net import Reply, Send
from ubipy.peer.crawler import Crawler
from ubipy.peer.ids import run_ids
from ubipy.peer.replicaframes import CHUNK, Outgoing
from ubipy.peer.router import mark_from_wire, url_items
from ubipy.peer.wakeup import Wakeup
from ubipy.ring import Ring
from ubipy.store import FrontierRow, HostMark, NewURL, PageRecord, RefreshRow, Shard
from ubipy.wire import HostCopy, Replica, ReplicaAck

log = logging.getLogger(__name__)

# Seconds before copies that could not be sent are tried again.
_RETRY = 1.0
# Seconds a sent frame waits for its REPLICA_ACK before it is sent again.
_ACK_PATIENCE = 2.0
# Entries (URLs plus fingerprints; a host with none weighs one) of the hosts read
# for whole copies at a time, each read followed by a checkpoint: about one frame's
# worth in memory, where all the hosts of a ring change were read at once before.
_READ_AT_ONCE = CHUNK
# Dead peers' hosts taken over from their copies a tick, at most (about 0.35 ms each).
_PROMOTE_AT_ONCE = 200
# A request waits for its host's successor to answer a barrier (an empty REPLICA)
# sent after the request was ready; unanswered this long, the request is not made.
_BARRIER_PATIENCE = 1.0
# What a held host waits for (see Replicator._held): the commit recording its last
# request, or that commit's copies to be sent; otherwise the seq of their frame.
_UNCOMMITTED = -1
_QUEUED = 0

AddressOf = Callable[[str], str | None]


def _same_successor(ring: Ring, host: str, owner: str, successor: str) -> bool:
    before = ring.successors(host, 2)
    return len(before) > 1 and before[0] == owner and before[1] == successor


class _Round:
    """One barrier to a successor and the requests waiting for its answer."""

    __slots__ = ("acked", "done", "ok")

    def __init__(self) -> None:
        self.acked = trio.Event()
        self.done = trio.Event()
        self.ok = False


@dataclass(slots=True)
class _Sent:
    target: str
    hosts: list[HostCopy]
    at: float


class Replicator:
    def __init__(
        self,
        self_id: str,
        replicas: int,
        crawler: Crawler,
        shard: Shard,
        send: Send,
        address_of: AddressOf,
        *,
        rng: random.Random | None = None,
        synced: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.self_id = self_id
        self.replicas = replicas
        self._promote_failed = False  # its warning given, until a take-over works
        # Returns once what the shard committed is on disk (ubipy.peer.syncing).
        self._synced = synced
        self._crawler = crawler
        self._shard = shard
        self._send = send
        self._address_of = address_of
        self._ring = Ring([self_id])
        self._queues: dict[str, Outgoing] = defaultdict(Outgoing)
        # Hosts to copy whole, by successor, in the order noted; their state is read
        # when their frame is made (see _read_whole). No key holds an empty dict.
        self._whole: dict[str, dict[str, None]] = {}
        self._kick = Wakeup()
        self.items_sent = 0
        # Hosts whose last request's outcome the successor has not stored yet: no
        # request goes to them meanwhile. The value is what each waits for.
        self._held: dict[str, int] = {}
        self._sent: dict[int, _Sent] = {}
        self._sending: set[str] = set()
        # Barriers: the round the requests arriving now wait for, per successor, and
        # the rounds in flight by their seq.
        self._next_round: dict[str, _Round] = {}
        self._rounds_out: set[str] = set()
        self._barriers: dict[int, _Round] = {}
        self._nursery: trio.Nursery | None = None
        self._stopped = False
        # When a successor that could not be reached is tried again.
        self._not_before: dict[str, float] = {}
        # The ring each peer last said it swept under, as far as its copies here go.
        self._swept_last: dict[str, str] = {}
        self._seqs = run_ids(rng)
        if replicas >= 2:
            crawler.on_commit = self.committed
            crawler.on_taken = self.taken
            crawler.on_request_end = self.request_ended
            crawler.clear_to_fetch = self.clear_to_fetch
            crawler.scheduler.hold(self._held.__contains__)

    def _successor(self, host: str) -> str | None:
        members = self._ring.successors(host, 2)
        if len(members) < 2 or members[0] != self.self_id:
            return None
        return members[1]

    def _queue_for(self, host: str) -> Outgoing | None:
        """The queue of the host's successor, or None: no successor, or a whole copy of
        the host is still to be read for it (it will hold what is committed now)."""
        target = self._successor(host)
        if target is None or host in self._whole.get(target, ()):
            return None
        return self._queues[target]

    def committed(
        self,
        rows: Sequence[FrontierRow],
        pages: Sequence[PageRecord],
        marks: Mapping[str, HostMark],
    ) -> None:
        for r in rows:
            if (queue := self._queue_for(r.host)) is not None:
                queue.add(r.host, [r])
        for p in pages:
            if (queue := self._queue_for(p.host)) is not None:
                queue.add(p.host, done=[p.fp])
        for host, mark in marks.items():
            # This commit records the host's last request: the frame holding it (or
            # the whole copy read from now on) releases the host.
            carries = self._held.get(host) == _UNCOMMITTED
            if carries:
                self._held[host] = _QUEUED
            if (queue := self._queue_for(host)) is not None:
                queue.add(host, mark=mark, carries=carries)
        if self._queues:
            self._kick.set()

    def taken(self, host: str, done: Sequence[int], mark: HostMark | None) -> None:
        """A host taken over (one chunk of its hand-off): the pages done at its previous
        owner, and its mark, go to its successor as a commit's would."""
        if (done or mark is not None) and (queue := self._queue_for(host)) is not None:
            queue.add(host, done=done, mark=mark)
            self._kick.set()

    def request_ended(self, host: str) -> None:
        """A request to ``host`` ended: hold the host until its successor has stored
        the commit that records it."""
        if self._successor(host) is not None:
            self._held[host] = _UNCOMMITTED

    async def clear_to_fetch(self, host: str) -> bool:
        """Whether a request to ``host`` may start: its successor answered a barrier
        sent after this was asked. So a request never starts after a cut between the
        owner and its successor (a peer cut off stops at the requests it has in
        flight), and the successor, taking the host over, knows of every other."""
        if self._stopped:
            return False  # the peer is stopping: no request it cannot stand behind
        target = self._successor(host)
        if target is None or self._nursery is None:
            return True
        round_ = self._next_round.get(target)
        if round_ is None:
            round_ = self._next_round[target] = _Round()
            if target not in self._rounds_out:
                self._rounds_out.add(target)
                self._nursery.start_soon(self._barrier_rounds, target)
        await round_.done.wait()
        return round_.ok

    async def _barrier_rounds(self, target: str) -> None:
        """Send one barrier at a time to ``target``; the requests that arrive while one
        is out wait for the next."""
        round_: _Round | None = None
        try:
            while (round_ := self._next_round.pop(target, None)) is not None:
                seq = next(self._seqs)
                self._barriers[seq] = round_
                address = self._address_of(target)
                with trio.move_on_after(_BARRIER_PATIENCE):
                    if address is not None and await self._send(address, Replica((), seq)):
                        await round_.acked.wait()
                        round_.ok = True
                del self._barriers[seq]
                round_.done.set()
        finally:
            self._rounds_out.discard(target)
            # Stopped (the peer is stopping): nobody waits for an answer that will
            # not come; their requests are not made.
            for left in (round_, self._next_round.pop(target, None)):
                if left is not None:
                    left.done.set()

    async def on_replica(self, sender: str, replica: Replica, reply: Reply) -> None:
        # A shard that refuses the write raises: unacknowledged, the copies come again.
        self.receive(replica, sender)
        if replica.seq:
            if self._synced is not None:
                await self._synced()  # acknowledged, its sender stops sending it
            await reply(ReplicaAck(replica.seq))

    async def on_ack(self, sender: str, ack: ReplicaAck, reply: Reply) -> None:
        self.acked(ack)

    def acked(self, ack: ReplicaAck) -> None:
        barrier = self._barriers.get(ack.seq)
        if barrier is not None:
            barrier.acked.set()
            return
        sent = self._sent.pop(ack.seq, None)
        if sent is None:
            return
        released = False
        for entry in sent.hosts:
            if self._held.get(entry.host) == ack.seq:
                del self._held[entry.host]
                released = True
        if released:
            self._crawler.release_held()

    @property
    def holding(self) -> int:
        """Hosts waiting for their successor to store their last request."""
        return len(self._held)

    def ring_changed(self, ring: Ring) -> None:
        """Copy whole every host of ours whose successor is new."""
        old, self._ring = self._ring, ring
        self._swept_last.clear()  # what a DONE drops depends on this peer's ring too
        if self.replicas < 2:
            return
        for gone in [t for t in {*self._queues, *self._whole} if t not in ring.members]:
            # Its hosts' new successor is copied whole below.
            self._queues.pop(gone, None)
            self._whole.pop(gone, None)
            self._not_before.pop(gone, None)
        for seq in [q for q, sent in self._sent.items() if sent.target not in ring.members]:
            del self._sent[seq]
        released = False
        for host, waits in list(self._held.items()):
            target = self._successor(host)
            if target is None:  # not ours any more, or no one to copy to
                del self._held[host]
                released = True
            elif waits != _UNCOMMITTED and not _same_successor(old, host, self.self_id, target):
                self._held[host] = _QUEUED  # the whole copy below carries it
        if released:
            self._crawler.release_held()
        self.copy_whole(self._crawler.held_hosts(), unless_under=old)

    def copy_whole(self, hosts: Iterable[str], *, unless_under: Ring | None = None) -> None:
        """Copy these hosts of ours whole to their successors, but those whose successor
        was the same under the ring ``unless_under`` (after a ring change). None is
        left out for hosts taken over late: the ring change found them not ours yet.

        Only their names are noted here: each host's state is read when its frame is
        made (:meth:`_read_whole`), so what is queued for it already is dropped."""
        if self.replicas < 2:
            return
        for host in hosts:
            target = self._successor(host)
            if target is None:
                continue
            if unless_under is not None and _same_successor(
                unless_under, host, self.self_id, target
            ):
                continue
            self._whole.setdefault(target, {})[host] = None
            queued = self._queues.get(target)
            if queued is not None:
                queued.discard(host)
        if self._whole:
            self._kick.set()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                while True:
                    now = trio.current_time()
                    self._send_again(now)
                    # One sender per successor: one that cannot be reached (a dial waits
                    # up to 5 s) must not hold up the copies for the others.
                    wake = math.inf
                    for target in dict.fromkeys([*self._queues, *self._whole]):
                        if target in self._sending:
                            continue  # its sender looks at the queue again when done
                        not_before = self._not_before.get(target, now)
                        if not_before <= now:
                            self._sending.add(target)
                            outgoing = self._take_queue(target)
                            nursery.start_soon(self._send_to, target, outgoing)
                        else:
                            wake = min(wake, not_before)
                    if self._sent:
                        wake = min(wake, min(s.at for s in self._sent.values()) + _ACK_PATIENCE)
                    await self._kick.wait(None if wake == math.inf else wake)
            finally:
                # Closed to new arrivals from here: no barrier can be sent any more.
                self._nursery = None
                self._stopped = True

    def _take_queue(self, target: str) -> Outgoing:
        return self._queues.pop(target) if target in self._queues else Outgoing()

    async def _send_to(self, target: str, outgoing: Outgoing) -> None:
        """Send what is queued for ``target``, then its whole copies a frame's worth of
        hosts at a time, each with what was queued meanwhile."""
        try:
            while True:
                address = self._address_of(target)
                if address is None:
                    self._whole.pop(target, None)  # as its queue is: not a member
                    return
                await self._read_whole(target, outgoing)
                if outgoing.hosts and not await self._send_frames(target, address, outgoing):
                    return
                if target not in self._whole:
                    return
                outgoing = self._take_queue(target)
        finally:
            self._sending.discard(target)
            self._kick.set()

    async def _read_whole(self, target: str, outgoing: Outgoing) -> None:
        """Read the state of hosts waiting to be copied whole to ``target`` into
        ``outgoing``, about _READ_AT_ONCE entries of them, with a checkpoint after each
        read (one takes about 5 ms at 2M rows). Each is read as it is now: a host no
        longer ours, or whose successor changed again since (the ring change noted it
        for the new one), is not."""
        weight = 0
        while weight < _READ_AT_ONCE and (hosts := self._whole.get(target)):
            host = next(iter(hosts))
            del hosts[host]
            if not hosts:
                del self._whole[target]
            if self._successor(host) != target:
                continue
            pending, done, mark = self._shard.host_state(host)
            outgoing.discard(host)  # older than this read
            # Read after the commit of the host's last request, it holds its outcome.
            carries = self._held.get(host) == _QUEUED
            outgoing.add(host, pending, done, mark, carries=carries)
            weight += max(len(pending) + len(done), 1)
            await trio.lowlevel.checkpoint()

    async def _send_frames(self, target: str, address: str, outgoing: Outgoing) -> bool:
        """Send ``outgoing`` to ``target``; False if the connection broke."""
        frames = outgoing.frames(self._crawler.config.politeness.delay)
        for hosts, count, carrying in frames:
            seq = next(self._seqs)
            if not await self._send(address, Replica(tuple(hosts), seq)):
                if target in self._ring.members:
                    # The connection broke: keep the copies for a later try (a
                    # successor that is gone gets its hosts whole from ring_changed).
                    self._not_before[target] = trio.current_time() + _RETRY
                    self._put_back(target, hosts, carrying)
                    for rest, _, rest_carrying in frames:
                        self._put_back(target, rest, rest_carrying)
                return False
            self._not_before.pop(target, None)
            self.items_sent += count
            self._sent[seq] = _Sent(target, hosts, trio.current_time())
            # Only a frame holding the outcome of a host's last request, to its
            # successor now, with no whole copy of it still to be read for it, is
            # waited for: not any frame naming the host (one made before that commit
            # and sent while it was made, or one to the successor before a ring
            # change, was; its acknowledgement released the host too soon).
            for host in carrying:
                if (
                    self._held.get(host) == _QUEUED
                    and self._successor(host) == target
                    and host not in self._whole.get(target, ())
                ):
                    self._held[host] = seq
        return True

    def _put_back(
        self, target: str, entries: Sequence[HostCopy], carrying: Collection[str]
    ) -> None:
        """Queue again entries that did not reach ``target``, but those of hosts whose
        whole copy for it is still to be read (that read holds them)."""
        whole = self._whole.get(target, {})
        entries = [e for e in entries if e.host not in whole]
        if entries:
            self._queues[target].put_back(entries, carrying)

    def _send_again(self, now: float) -> None:
        """Frames not acknowledged in time go back in the queue (storing a copy twice
        is harmless)."""
        for seq, sent in list(self._sent.items()):
            # The same sum as the wake-up time, so that waking at it always resends.
            if sent.at + _ACK_PATIENCE > now:
                continue
            del self._sent[seq]
            carrying = [e.host for e in sent.hosts if self._held.get(e.host) == seq]
            for host in carrying:
                self._held[host] = _QUEUED
            self._put_back(sent.target, sent.hosts, carrying)

    def receive(self, replica: Replica, source: str) -> None:
        """Store the copies ``source`` sent (raises StorageError if the shard refuses)."""
        rows: list[tuple[str, str | None, int, int, bool]] = []
        marks: dict[str, HostMark] = {}
        for entry in replica.hosts:
            host = entry.host
            pending = url_items(entry.pending, host=host)
            rows.extend((host, u.url, u.depth, u.fp, False) for u in pending)
            rows.extend((host, None, 0, fp, True) for fp in entry.done)
            if entry.mark is not None:
                marks[host] = mark_from_wire(entry.mark)
        self._shard.replica_add(rows, marks, source=source)

    @property
    def ring(self) -> Ring:
        """The ring of the last change it was told of."""
        return self._ring

    def take_copies(self, ring: Ring, *, again: bool, whole: bool = False) -> bool:
        """Take over some of the hosts whose copies are here and whose owner died
        (:meth:`promote`), at most a few hundred: all at once held the event loop 5 s
        for 15,000, and pings left unanswered so long could make this peer the next
        one declared dead. Returns whether to be called again on the next tick: some
        are left, or the shard refused them (a peer died of it before). ``again``: a
        call after such a one, whose hosts the ring change's whole copies missed;
        ``whole``: all that are left (the ring is about to change)."""
        try:
            taken, more = self.promote(ring, at_most=None if whole else _PROMOTE_AT_ONCE)
        except StorageError as exc:
            if not self._promote_failed:
                log.warning("the copies of dead peers' hosts not taken over yet: %s", exc)
            self._promote_failed = True
            return True
        if again:
            self.copy_whole(taken)
        self._promote_failed = False
        return more

    def promote(self, ring: Ring, *, at_most: int | None = None) -> tuple[list[str], bool]:
        """The ring dropped a dead peer: take over the hosts whose copies are here, at
        most ``at_most`` of them; returns them, and whether more are left.

        Raises StorageError while the shard refuses writes: a host's copies are
        dropped only once it is taken over, so the caller tries again later."""
        taken: list[str] = []
        for host in self._shard.replica_hosts():
            if ring.owner(host) != self.self_id:
                continue
            if at_most is not None and len(taken) >= at_most:
                return taken, True
            self.take_copy(host)
            taken.append(host)
        return taken, False

    def take_copy(self, host: str) -> None:
        """Take a host over from its copies here (raises StorageError if the shard
        refuses: taking over is idempotent, and the copies go only once it is done)."""
        pending, done, mark, revisits = self.copy_of(host)
        self._crawler.take_over(host, pending, done, mark, revisits)
        self._shard.replica_drop(host)
        log.info(
            "took over 1 hosts (%d URLs) from replica: %s, %d done", len(pending), host, len(done)
        )

    def copy_of(
        self, host: str
    ) -> tuple[list[NewURL], list[int], HostMark | None, list[RefreshRow]]:
        """What the copies here hold of a host: pending URLs, done fingerprints, its mark,
        and under --recrawl its pages as revisits (their history went with their owner)."""
        pending, done, mark = self._shard.replica_of(host)
        revisits: list[RefreshRow] = []  # a continuous crawl's pages, asked again
        if (refresher := self._crawler.refresher) is not None:
            revisits = refresher.history_lost(host, self._shard.replica_fetched(host))
        return pending, done, mark, revisits

    def strays(self, ring: Ring, gone: Collection[str]) -> list[str]:
        """Hosts with copies here from a peer that membership saw die or leave
        (``gone``), out of ``ring``, that did not say it had handed over every host it
        held (:meth:`swept`): it may have held hosts a join gave to others, and then
        these copies are all that is left of what it knew of them. The hand-off's
        sweep hands them to their owners under ``ring``, or takes over those it gives
        this peer (:meth:`take_copy`; a death's are taken over first, by
        :meth:`promote`). Only peers seen gone: a peer back from a stop has a ring of
        some members for a while, and those it lacks may be well."""
        if self.replicas < 2:
            return []
        return self._shard.replica_strays({p for p in gone if p not in ring.members})

    def stray_handed(self, host: str, *rings: Ring) -> None:
        """The copies of ``host`` reached its owner: kept here only as that owner's
        successor's copy under one of ``rings`` (what it commits of them comes back as
        its own); raises StorageError if the shard refuses."""
        for ring in rings:
            successors = ring.successors(host, 2)
            if len(successors) > 1 and successors[1] == self.self_id:
                self._shard.replica_unsource(host, ring.members)
                return
        self._shard.replica_drop(host)

    async def swept(self, peer_id: str, key: str) -> None:
        """``peer_id`` handed over every host it held that the ring ``key`` (its members'
        ids, comma-joined) gives to another: its copies here of those hosts are stale
        (their owners have them), and are forgotten, the rows with them unless another
        peer's copy names them. Else they piled up with every join, and went to their
        owners, one hand-off each, when it died (a review). Only under this peer's own
        ring, and only while it stays that: a DONE of another ring (overtaken by a
        change here or there) must not drop a copy the sender made since, of a host
        it owns again (a review). Checkpoints between chunks (a copy may hold hundreds
        of thousands of hosts)."""
        ring = self._ring
        if self.replicas < 2 or key != ring.key or self._swept_last.get(peer_id) == key:
            return
        self._swept_last[peer_id] = key
        hosts = self._shard.replica_hosts_from(peer_id)
        for start in range(0, len(hosts), _READ_AT_ONCE):
            if self._ring is not ring:
                return  # the ring moved: the sender's next DONE says what is stale
            gone = [h for h in hosts[start : start + _READ_AT_ONCE] if ring.owner(h) != peer_id]
            if gone:
                try:
                    self._shard.replica_forget(peer_id, gone)
                except StorageError:
                    self._swept_last.pop(peer_id, None)  # the next sweep's word, then
                    return
            await trio.lowlevel.checkpoint()
