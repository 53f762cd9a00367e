"""A running peer: its shard, HTTP client, crawler, links to other peers, membership
(with joining that never gives up and the majority lease that pauses the crawl when
no majority is in sight), router, hand-off, replication and reporting, all in one trio
nursery that the peer owns.

Frames reach it already typed (:mod:`ubipy.wire`) and go to the handler each
subsystem registers for its kind (:meth:`Peer.handle`): membership (MEMBERSHIP),
forwarding (URL_BATCH, URL_ACK), the crawl (SCOPE, SEED, STATUS_REQUEST),
hand-off (HANDOFF, HANDOFF_ACK, HANDOFF_DONE), replicas (REPLICA) and reporting
(CONTROL, STOP); FIGURES are dropped quietly unless a control centre is attached
and takes them. A frame of a kind nobody handles is dropped and counted, as a
malformed one is."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final, TypeVar

import httpx2
import trio

from ubipy.config import CrawlConfig
from ubipy.errors import StorageError, WireError
from ubipy.fetch import Resolver, make_client
from ubipy.membership import (
    Membership,
    MemberState,
    Outgoing,
    fence,
    message_from_wire,
)
from ubipy.net import Links, Network, Reply, TcpNetwork, is_ip, is_loopback, split_address
from ubipy.peer.advertised import answer_at, said_elsewhere, who_answers
from ubipy.peer.crawler import Crawler
from ubipy.peer.forwarding import Forwarder
from ubipy.peer.handoff import Handoff
from ubipy.peer.idclash import stops_for_clash
from ubipy.peer.ids import open_data
from ubipy.peer.ipleases import IpLeases, start_grace
from ubipy.peer.joining import Joiner, other_addresses
from ubipy.peer.lease import Lease, load_quorum
from ubipy.peer.leaving import leave
from ubipy.peer.members import MemberBook
from ubipy.peer.replica import Replicator
from ubipy.peer.reporting import Reporter
from ubipy.peer.router import Router
from ubipy.peer.scopesharing import ScopeSharing
from ubipy.peer.stalls import say_if_stalled
from ubipy.peer.status import PeerStatus, gather_status, status_of
from ubipy.peer.syncing import GroupSync
from ubipy.peer.wakeup import Wakeup
from ubipy.ring import Ring
from ubipy.store import SHARD_FILES
from ubipy.wire import (
    Control,
    Figures,
    Frame,
    FrameType,
    Gossip,
    MemberRow,
    Message,
    Replica,
    ReplicaAck,
    Seed,
    SeedAck,
    Status,
    StatusRequest,
    Stop,
    UrlAck,
    UrlBatch,
    is_default_secret,
    secret_doubt,
    secret_from,
)

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)

# The frame kinds added since the first version that this peer takes: said in every
# membership frame, so that a peer of an earlier version is sent none of them.
TAKES: Final = (int(FrameType.SCOPE_ACK), int(FrameType.RELAY))


class Peer:
    def __init__(
        self,
        config: CrawlConfig,
        *,
        transport: httpx2.AsyncBaseTransport | None = None,
        network: Network | None = None,
        rng: random.Random | None = None,
        resolver: Resolver | None = None,
        inline_syncs: bool = False,
    ) -> None:
        """``transport`` carries the HTTP requests (httpx2's by default), ``network`` the
        frames between peers (TCP by default), ``rng`` every random choice the peer makes
        (its id when new, membership's probe order) and ``resolver`` the names of hosts
        (``config.dns``'s by default): tests give them to run clusters in one process.
        ``inline_syncs``: the shard's syncs run on the event loop, not in a worker
        thread (a thread lets trio's mock clock jump while it runs)."""
        self._inline_syncs = inline_syncs
        self.config = config
        self._transport = transport
        self.resolver = resolver
        self.network = network or TcpNetwork()
        self._rng = rng or random.Random()
        self.secret = secret_from(config.secret)
        host, _ = split_address(config.listen)
        if is_default_secret(self.secret) and not is_loopback(host):
            named = "" if is_ip(host) else " (a name other than localhost: mistyped?)"
            raise ValueError(
                f"refusing to listen on {host}{named} without a cluster secret: frames "
                "would be forgeable; give --secret (or UBIPY_SECRET), or listen on loopback"
            )
        # What others dial (the advertised address, else the listening one): membership
        # gossips it and the status shows it; ``bound`` is where the socket listens.
        self.bound = config.listen
        self.address = config.advertise or config.listen
        self._lock, self.shard, self.peer_id, self.new = open_data(
            config.data_dir, config.store, self.address, self._rng
        )
        self._members = MemberBook(self.shard)
        self._started_wall = time.time()
        self._crawler: Crawler | None = None
        self._membership: Membership | None = None
        self._router: Router | None = None
        self._links: Links | None = None
        self._handoff: Handoff | None = None
        self._replicator: Replicator | None = None
        self._reporter: Reporter | None = None
        self._forwarder: Forwarder | None = None
        self._joiner: Joiner | None = None
        self.scopes: ScopeSharing  # the seeds' scope, shared with the members
        self.takes: tuple[int, ...] = TAKES
        self._promote_again = False
        self._lease: Lease | None = None
        # Each frame kind's handler, filled by the subsystems (and the control centre).
        self._handlers: dict[type, Callable[[str, Any, Reply], Awaitable[None]]] = {}
        self._joined_callbacks: list[Callable[[str], None]] = []
        self._nursery: trio.Nursery | None = None
        self._stop = trio.Event()
        self._failed = False  # see start_failed
        # Set when run() is over: crawler stopped, leave announced, hosts handed off.
        self.finished = trio.Event()
        # Another live peer's address, under this one's id: this one stopped for it.
        self.clashed_with: str | None = None
        # The id of the live peer this one's advertised address reached: it stopped.
        self.advertised_elsewhere: str | None = None
        self._gossip_kick = Wakeup()
        self.ring_changes = 0

    # -- accessors ------------------------------------------------------------
    @property
    def crawler(self) -> Crawler:
        if self._crawler is None:
            raise RuntimeError("the peer is not running")
        return self._crawler

    @property
    def membership(self) -> Membership:
        if self._membership is None:
            raise RuntimeError("the peer is not running")
        return self._membership

    @property
    def links(self) -> Links:
        if self._links is None:
            raise RuntimeError("the peer is not running")
        return self._links

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """Ask for a graceful stop: in-flight requests finish, everything is saved."""
        self._stop.set()

    def start_failed(self) -> None:
        """What had to start with the peer could not (its control centre's address in
        use): a new directory holding nothing taken in goes as the peer stops (QA)."""
        self._failed = True

    # -- running --------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[Peer] = trio.TASK_STATUS_IGNORED) -> None:
        config = self.config
        agent = config.agent_string(self.peer_id)
        if is_default_secret(self.secret):
            log.warning("no cluster secret: listening on loopback only")
        elif doubt := secret_doubt(config.secret):
            log.warning("the cluster secret: %s", doubt)
        if self.resolver is None:
            direct = config.fetch.proxy is None and self._transport is None
            self.resolver = Resolver.of(config.dns, system=direct)
        try:
            async with (
                make_client(
                    config.fetch, agent, transport=self._transport, resolver=self.resolver
                ) as client,
                trio.open_nursery() as nursery,
            ):
                self._nursery = nursery
                crawler = await self._start(nursery, client)
                log.info("peer %s listening on %s", self.peer_id, self.address)
                task_status.started(self)
                await self._stop.wait()
                self.lease.stopping()  # what it keeps: before others' leaves shrink its base
                crawler.stop()
                await crawler.stopped.wait()
                if self.clashed_with is None:  # the leave and hand-off are the other's
                    await self._leave()
                nursery.cancel_scope.cancel()
        finally:  # a new peer that never crawled leaves no directory behind
            failed = self._crawler is None or (self._failed and self.shard.holds_nothing())
            self.shard.close()
            self._lock.release(unmake=SHARD_FILES if failed else ())
            self.finished.set()

    async def _start(self, nursery: trio.Nursery, client: httpx2.AsyncClient) -> Crawler:
        config = self.config
        links = self._links = Links(self.secret, self.peer_id, self._on_frame, self.network)
        self.bound = await nursery.start(links.run, config.listen)
        self.address = config.advertise or self.bound
        self._lock.note(self.address)
        links.advertised, links.advertised_elsewhere = self.address, self._advertised_elsewhere
        self._membership = Membership(
            self.peer_id,
            self.address,
            config.membership.machine(),
            self._rng,
            now=trio.current_time(),
        )
        router = self._router = Router(
            self.peer_id,
            Ring([self.peer_id]),
            batch_size=config.forwarding.batch_size,
            linger=config.forwarding.batch_linger,
            linger_cap=config.forwarding.batch_linger_max,
            retry_after=config.forwarding.batch_retry,
            hold_cap=config.forwarding.held_max,
            rng=self._rng,
        )
        crawler = self._crawler = Crawler(config, self.shard, client, router, self.resolver)
        syncs = self._syncs = GroupSync(
            self.shard.sync, inline=self._inline_syncs, changes=lambda: self.shard.changes
        )
        self._forwarder = Forwarder(
            router, crawler, self.links.send, self._address_of, syncs.synced
        )
        crawler.on_forward = self._forwarder.kick
        self.links.recipient_of = self._members.recipient
        self.links.relays.route(self._address_of, self._other_ids)  # one cut link: by a third
        term = config.membership.majority_lease
        join = other_addresses(config.join, {self.address, self.bound})
        quorum = load_quorum(self.peer_id, self.shard, lease=term, newcomer=bool(join))
        replicator = self._replicator = Replicator(
            self.peer_id, config.replication.replicas, crawler, self.shard, self.links.send,
            self._address_of, rng=self._rng, synced=syncs.synced,
        )  # fmt: skip
        self._handoff = Handoff(
            self.peer_id, crawler, self.links.send, self._address_of,
            last_members=self._members.last_members, leaves=self._members.leaves,
            handed_on=self._members.handed_on,
            grace=config.replication.rejoin_grace if config.replication.replicas < 2 else 0.0,
            fence=fence(term), copies=config.replication.replicas,
            # As long as the peers that hold a host's copies are dialled.
            orphan_grace=config.membership.reconnect_timeout,
            request_limit=config.fetch.fetch_deadline,
            rng=self._rng, synced=syncs.synced, copies_here=replicator,
            heard_at=self.links.heard_at,
        )  # fmt: skip
        self._handoff.remember_leaves = self._members.remember_leaves
        self._handoff.remember_handed = self._members.remember_handed
        if crawler.refresher is not None:  # a dead peer's hosts lost: links find them again
            self._handoff.on_hosts_lost = crawler.refresher.relink
        ip_leases = self._ip_leases = IpLeases(
            self.peer_id, config, crawler, router, rng=self._rng, grace=start_grace(quorum)
        )
        ip_leases.install(self.handle, self.send, self._address_of, self.start_soon)
        self.scopes = ScopeSharing(
            crawler, self.send, self.start_soon, self._other_ids, self._address_of
        )
        self.scopes.install(self.handle)
        crawler.on_seed_redirect = self.scopes.seed_redirected
        reporter = self._reporter = Reporter(
            self.peer_id, self.membership, self._figures, self.send, self.start_soon, self.stop
        )
        lease = self._lease = Lease(
            quorum, self.membership, crawler, self.handoff, self.shard, self._send_membership
        )
        joiner = self._joiner = Joiner(
            join,
            alone=lambda: self.membership.alone and not self._stop.is_set(),  # not as it stops
            join=lambda addresses: self._send_membership(
                self.membership.join(trio.current_time(), addresses)
            ),
            links=self.links,
            network=self.network,
            mine=(self.address, self.bound),
            nobody=lease.nobody_to_join,
            ask=self._asked_at,
            expecting=lambda: lease.expecting and not self._stop.is_set(),
            answered=lease.join_answered,
        )
        self._register_handlers()
        lease.install(self.handle, self.send, self.start_soon)
        lease.check()
        await nursery.start(crawler.run)
        nursery.start_soon(reporter.push_forever)
        nursery.start_soon(self._replicator.run)
        nursery.start_soon(self._gossip_loop)
        nursery.start_soon(self._forwarder.run)
        nursery.start_soon(self._handoff.run)
        nursery.start_soon(joiner.run)
        nursery.start_soon(lease.run)
        if self.address != self.bound:
            nursery.start_soon(self._check_advertised)
        return crawler

    async def _leave(self) -> None:
        assert self._router is not None
        await leave(
            self.membership, self._send_one, self.lease, self._router, self._reachable_others,
            self.crawler, self.handoff, self.links.heard_at, self.forwarder,
        )  # fmt: skip

    def _reachable_others(self) -> frozenset[str]:
        """The other live members, less those a dial did not reach and no relay may (a
        leaving peer no longer probes: one that exited before its leave came was waited
        for); one behind a cut link is handed its hosts by relay (the third refused)."""
        unreachable, relays = self.links.unreachable, self.links.relays
        return frozenset(
            m for m in self.membership.alive_ids() - {self.peer_id}
            if (a := self._address_of(m)) not in unreachable or relays.may_carry(a or "")
        )  # fmt: skip

    def _other_ids(self) -> frozenset[str]:
        """The ids of the other live members, suspected ones too."""
        return self.membership.alive_ids() - {self.peer_id}

    def _address_of(self, peer_id: str) -> str | None:
        member = self.membership.member(peer_id)
        return None if member is None else member.address

    async def send(self, address: str, message: Message) -> bool:
        """Send one frame to the peer at ``address``; False if it could not be sent."""
        return await self.links.send(address, message)

    def handle(self, kind: type[M], handler: Callable[[str, M, Reply], Awaitable[None]]) -> None:
        """Route frames carrying ``kind`` to ``handler(sender id, message, reply)``."""
        self._handlers[kind] = handler

    def on_member_joined(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(address)`` for every other member that joins from now on."""
        self._joined_callbacks.append(callback)

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Run ``fn`` in the peer's nursery (for its components' background sends)."""
        assert self._nursery is not None
        self._nursery.start_soon(fn, *args)

    @property
    def forwarder(self) -> Forwarder:
        assert self._forwarder is not None
        return self._forwarder

    @property
    def replicator(self) -> Replicator:
        assert self._replicator is not None
        return self._replicator

    @property
    def lease(self) -> Lease:
        assert self._lease is not None
        return self._lease

    @property
    def handoff(self) -> Handoff:
        assert self._handoff is not None
        return self._handoff

    async def _gossip_loop(self) -> None:
        membership = self.membership
        while True:
            deadline, cpu = membership.next_deadline(), time.process_time()
            await self._gossip_kick.wait(deadline)
            say_if_stalled(deadline, now := trio.current_time(), time.process_time() - cpu)
            outgoing = membership.tick(now)
            self._send_membership(outgoing)
            self._membership_events()
            if self._promote_again:
                self._promote()
            # On membership's timed tick (not a frame's arrival before it): the lease's
            # pings go with its probe, on one wake-up.
            if self._lease is not None and deadline is not None and now >= deadline:
                self._lease.tick(now, outgoing)

    def _promote(self) -> None:
        """Take over the hosts whose copies are here and whose owner died, some a tick
        until none is left (see Replicator.take_copies)."""
        ring = self.handoff.ring.for_members(self.membership.alive_ids())
        self._promote_again = self.replicator.take_copies(ring, again=self._promote_again)

    def _send_membership(self, outgoing: list[Outgoing]) -> None:
        assert self._nursery is not None
        for out in outgoing:
            self._nursery.start_soon(self._send_one, out)

    async def _send_one(self, out: Outgoing) -> bool:
        message = Gossip(self.address, out.message.to_wire(), self.takes)
        return await self.links.send(out.address, message, out.to)

    async def _check_advertised(self) -> None:
        other = await who_answers(self.address, self.secret, self.network)
        if other is not None and other != self.peer_id:
            self._advertised_elsewhere(other)

    async def _asked_at(self, address: str) -> str | None:
        """Who answers at ``address`` (joining.py): it stops if that is another live
        process under its id."""
        args = (address, self.secret, self.network, self.peer_id, self.links.writer.epoch)
        if (who := await answer_at(*args)) == self.peer_id and self.clashed_with is None:
            self.clashed_with = address
            self._stop.set()
        return who

    def _advertised_elsewhere(self, other: str) -> None:
        """It stops (with a leave: it is in the others' views): :mod:`.advertised`."""
        if self.advertised_elsewhere is None:
            self.advertised_elsewhere = other
            said_elsewhere(self.address, other)
            self._stop.set()

    def _membership_events(self) -> None:
        other = self.membership.clash
        if other and not self.clashed_with and stops_for_clash(self.peer_id, self.address, other):
            self.clashed_with = other
            self._stop.set()
        answers = self.membership.drain_answers()
        if answers and self._lease is not None:
            self._lease.answered(answers)
        self.links.unreached(self.membership.drain_unreached())
        events = self.membership.drain_events()
        if not events:
            return
        self._members.changed(self.membership.members())
        if self._joiner is not None:
            self._joiner.changed.set()
        if self._lease is not None:
            self._lease.membership_changed(events)
        ring_changed = False
        dead: list[str] = []
        for event in events:
            log.info("member %s %s", event.member.id, event.kind.value)
            if event.changes_ring:
                ring_changed = True
            if event.member.state is MemberState.DEAD:
                dead.append(event.member.id)
            self.scopes.member_changed(event)
            if event.member.state in (MemberState.DEAD, MemberState.LEFT):
                # Unless a live member has that address too (a peer that stopped for
                # advertising another's, a new id on a dead one's address): hand-offs
                # to that one were refused until it restarted (a review).
                live = {self._address_of(m) for m in self.membership.alive_ids()}
                if event.member.address not in live:
                    self.links.forget(event.member.address)
                    self.handoff.abandon(event.member.address)
            elif event.changes_ring and event.member.id != self.peer_id:
                self.handoff.back(event.member.address)
                self.scopes.share(event.member.id)
                for callback in self._joined_callbacks:
                    callback(event.member.address)
        if ring_changed and not self.stopping:
            self.ring_changes += 1
            alive = self.membership.alive_ids()
            gone = {m.id: m.state for m in self.membership.members() if m.id not in alive}
            handing = alive | {p for p, state in gone.items() if state is MemberState.LEFT}
            ring = self.handoff.ring.for_members(alive)  # few members differ: cheap
            if self._promote_again:
                # The rest of the copies, under the ring that made them ours (under this
                # one a newcomer's were lost: a review); the sweep below hands them on.
                replicas = self.replicator
                self._promote_again = replicas.take_copies(replicas.ring, again=True, whole=True)
            self.crawler.ring_changed(ring)
            self._ip_leases.ring_changed(ring)  # the leases of the peers it dropped end
            tombs = frozenset(p for p, state in gone.items() if state is MemberState.DEAD)
            self.handoff.ring_changed(ring, alive, handing, dead=tombs)
            if dead:
                # The dead hand nothing over: their copies here become ours first.
                self._promote()
            self.replicator.ring_changed(ring)
            self._members.remember(self.membership.members())
        for peer_id in dead:
            self.handoff.peer_gone(peer_id)

    # -- frames ---------------------------------------------------------------
    def _register_handlers(self) -> None:
        assert self._reporter is not None
        self.handle(Gossip, self._on_gossip)
        self.handle(UrlBatch, self.forwarder.on_batch)
        self.handle(UrlAck, self.forwarder.on_url_ack)
        self.handoff.install(
            self.handle,
            stopping=lambda: self.stopping,
            is_member=lambda peer_id: self.membership.member(peer_id) is not None,
        )
        self.handle(Replica, self.replicator.on_replica)
        self.handle(ReplicaAck, self.replicator.on_ack)
        self.handle(Seed, self._on_seed)
        self.handle(StatusRequest, self._on_status_request)
        self.handle(Control, self._reporter.on_control)
        self.handle(Stop, self._reporter.on_stop)
        # Figures: dropped quietly unless a control centre served here takes them over.
        self.handle(Figures, self._ignore)

    async def _on_frame(self, frame: Frame, message: Message, reply: Reply) -> None:
        handler = self._handlers.get(type(message))
        if handler is None:
            raise WireError(f"{frame.type.name} is not a frame this peer takes")
        try:
            await handler(frame.sender, message, reply)
        except StorageError as exc:
            # The shard refuses writes (disk full, read-only): unanswered, as if lost. What
            # must arrive (a batch, a host handed off) is acknowledged once durable, so its
            # sender tries again; a replica's copy is sent again whole when the ring changes.
            log.warning("%s from %s not taken: %s", frame.type.name, frame.sender, exc)

    async def _ignore(self, sender: str, message: Message, reply: Reply) -> None:
        """Take a frame and do nothing with it."""

    async def _on_gossip(self, sender: str, gossip: Gossip, reply: Reply) -> None:
        message = message_from_wire(gossip.message)
        self.scopes.heard(gossip.address, gossip.takes)
        self.links.relays.heard(gossip.address, gossip.takes)
        now = trio.current_time()
        self._send_membership(self.membership.receive(now, gossip.address, message))
        self._membership_events()
        self._gossip_kick.set()

    async def _on_seed(self, sender: str, seed: Seed, reply: Reply) -> None:
        await reply(await self.seed(seed.urls))

    async def seed(self, urls: Sequence[str]) -> SeedAck:
        """Seed the crawl, answered once what was admitted is on disk: told admitted,
        the user drops the seeds (`ubipy seed`, ``POST /api/seed``)."""
        answer = self.seed_urls(urls)
        if answer.error is None:
            try:
                await self._syncs.synced()
            except StorageError as exc:
                return SeedAck(error=str(exc))
        return answer

    async def _on_status_request(self, sender: str, asked: StatusRequest, reply: Reply) -> None:
        await reply(await self._status_report(asked.cluster))

    def seed_urls(self, urls: Sequence[str]) -> SeedAck:
        """Seed the crawl (from the wire or the control centre); answers an error
        while storage fails."""
        before = self.crawler.scope_now()
        try:
            result = self.crawler.seed(urls)
        except StorageError as exc:
            return SeedAck(error=str(exc))
        self.scopes.seeded(before)
        return SeedAck(result.offered, result.admitted, result.forwarded, result.refused)

    async def _status_report(self, cluster: bool) -> Status:
        members = self.membership.members()
        rows = tuple(MemberRow(m.id, m.address, m.state.name.lower()) for m in members)
        others = (
            [a for m in sorted(self._other_ids()) if (a := self._address_of(m))] if cluster else []
        )
        own = self.status().as_json()
        return await gather_status(rows, own, others, self.secret, self.network)

    @property
    def joining(self) -> int:  # the join attempt while this peer is alone (0: not joining)
        return self._joiner.joining if self._joiner is not None else 0

    def status(self) -> PeerStatus:
        return status_of(
            self.peer_id,
            self.address,
            self._started_wall,
            self.crawler,
            self.links,
            self._router,
            self.handoff,
            joining=self.joining,
            paused=self.crawler.paused,
            ip_leases=self._ip_leases.stats,
        )

    def _figures(self) -> Figures:
        return Figures(self.status().as_json())
