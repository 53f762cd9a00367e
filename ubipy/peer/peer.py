"""A running peer: its shard, HTTP client, crawler, links to other peers, membership,
router, hand-off, replication and monitoring, all in one trio nursery that the peer
owns.

The frames it understands: MEMBERSHIP (gossip), URL_BATCH / URL_ACK (forwarded
URLs and their acknowledgement once durably admitted, usually carried on a batch
going back), SCOPE (the seeds' roots, shared so every peer follows the same
links), SEED / SEED_ACK and STATUS_REQUEST / STATUS (from the command line or
another peer), HANDOFF / HANDOFF_ACK / HANDOFF_DONE (hosts moving to their new
owner), REPLICA (copies for the next peer clockwise), CONTROL / FIGURES / STOP
(the control centre).
"""

from __future__ import annotations

import functools
import logging
import math
import random
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx2
import trio

from ubipy import __version__
from ubipy.config import CrawlConfig
from ubipy.control import Monitor, control_bind, serve_control
from ubipy.fetch import make_client
from ubipy.membership import (
    LIVE_STATES,
    Membership,
    MembershipConfig,
    MemberState,
    Outgoing,
    message_from_wire,
)
from ubipy.net import Links, Reply, is_loopback, request, split_address
from ubipy.peer.acks import AckBook
from ubipy.peer.crawler import Crawler, StorageError
from ubipy.peer.handoff import Handoff, NotOurs
from ubipy.peer.replica import Replicator
from ubipy.peer.router import Batch, Router, url_items
from ubipy.ring import Ring
from ubipy.store import Shard
from ubipy.wire import Frame, FrameType, is_default_secret, secret_from

log = logging.getLogger(__name__)

_ID_META = "peer_id"
_MEMBERS_META = "last_members"
# A leaving peer hands off for at most this long before it goes anyway (what is
# left stays in its shard and moves when it comes back).
_LEAVE_PATIENCE = 60.0
_LEAVE_SWEEPS = 5
# Forwarded URLs not yet acknowledged stay in the outbox on disk; a leaving peer
# waits this long for the owners to take them before leaving them there.
_LEAVE_DRAIN = 5.0
_LEAVE_ANNOUNCE = 2.0


def load_peer_id(shard: Shard) -> str:
    """The peer's id: made once, kept in its shard, so a restart keeps its place."""
    peer_id = shard.get_meta(_ID_META)
    if peer_id is None:
        peer_id = uuid.uuid4().hex[:16]
        with shard.transaction():
            shard.set_meta(_ID_META, peer_id)
    return peer_id


@dataclass(frozen=True, slots=True)
class PeerStatus:
    peer_id: str
    address: str
    version: str
    started_at: float
    uptime: float
    pages: int
    pages_per_second: float
    errors: int
    timeouts: int
    pending: int
    hosts: int
    in_flight: int
    bytes_in: int
    robots_disallowed: int
    out_of_scope: int
    idle: bool
    storage_error: str | None
    forwarded_urls: int
    forward_backlog: int
    frames_out: int
    bytes_out_wire: int
    frames_rejected: int
    # Forwarding on the wire: URL_BATCH and URL_ACK frames sent, and their bytes.
    url_frames: int
    url_bytes: int
    handed_off_hosts: int
    handed_off_urls: int
    handed_off_bytes: int
    taken_over_hosts: int
    replica_bytes: int

    def as_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


class Peer:
    def __init__(
        self, config: CrawlConfig, *, transport: httpx2.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self._transport = transport
        self.secret = secret_from(config.secret)
        host, _ = split_address(config.listen)
        if is_default_secret(self.secret) and not is_loopback(host):
            raise ValueError(
                f"refusing to listen on {host} without a cluster secret: frames would be "
                "forgeable; give --secret (or UBIPY_SECRET), or listen on loopback"
            )
        if config.control.address is not None:
            control_bind(config.control.address, config.control.public, self.secret)
        self.shard = Shard.open(config.data_dir)
        self.peer_id = load_peer_id(self.shard)
        self.address = config.listen
        self._started_wall = time.time()
        self._crawler: Crawler | None = None
        self._membership: Membership | None = None
        self._router: Router | None = None
        self._links: Links | None = None
        self._handoff: Handoff | None = None
        self._replicator: Replicator | None = None
        self._monitor: Monitor | None = None
        self._nursery: trio.Nursery | None = None
        self._stop = trio.Event()
        # Set when run() is over: crawler stopped, leave announced, hosts handed off.
        self.finished = trio.Event()
        self._gossip_kick = trio.Event()
        self._router_kick = trio.Event()
        # Held at most a linger (half the sender's retry) for a batch to ride on.
        self._acks = AckBook()
        self._ack_kick = trio.Event()
        self._router_drained = trio.Event()
        self.ring_changes = 0
        self._remembered: str | None = None

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

    # -- running --------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[Peer] = trio.TASK_STATUS_IGNORED) -> None:
        config = self.config
        agent = config.agent_string(self.peer_id)
        if is_default_secret(self.secret):
            log.warning("no cluster secret: listening on loopback only")
        try:
            async with (
                make_client(config.fetch, agent, transport=self._transport) as client,
                trio.open_nursery() as nursery,
            ):
                self._nursery = nursery
                crawler = await self._start(nursery, client)
                log.info("peer %s listening on %s", self.peer_id, self.address)
                task_status.started(self)
                await self._stop.wait()
                crawler.stop()
                await crawler.stopped.wait()
                await self._leave()
                nursery.cancel_scope.cancel()
        finally:
            self.shard.close()
            self.finished.set()

    async def _start(self, nursery: trio.Nursery, client: httpx2.AsyncClient) -> Crawler:
        config = self.config
        links = self._links = Links(self.secret, self.peer_id, self._on_frame)
        host, port = split_address(config.listen)
        bound = await nursery.start(links.run, host, port)
        self.address = f"{host}:{bound}"
        self._membership = Membership(
            self.peer_id,
            self.address,
            MembershipConfig(
                probe_interval=config.membership.probe_interval,
                probe_timeout=config.membership.probe_timeout,
                indirect_checks=config.membership.indirect_checks,
                suspicion_mult=config.membership.suspicion_mult,
                push_pull_interval=config.membership.push_pull_interval,
            ),
            random.Random(),
            now=trio.current_time(),
        )
        router = self._router = Router(
            self.peer_id,
            Ring([self.peer_id]),
            batch_size=config.forwarding.batch_size,
            linger=config.forwarding.batch_linger,
            linger_cap=config.forwarding.batch_linger_max,
            retry_after=config.forwarding.batch_retry,
        )
        crawler = self._crawler = Crawler(config, self.shard, client, router)
        crawler.on_forward = self._kick_router
        last = self._remembered = self.shard.get_meta(_MEMBERS_META)
        self._handoff = Handoff(
            self.peer_id,
            crawler,
            self.links.send,
            self._address_of,
            last_members=last.split(",") if last else (),
            grace=config.replication.rejoin_grace if config.replication.replicas < 2 else 0.0,
        )
        self._replicator = Replicator(
            self.peer_id,
            config.replication.replicas,
            crawler,
            self.shard,
            self.links.send,
            self._address_of,
        )
        monitor = self._monitor = Monitor(self, self.links.send)
        if config.control.address is not None:
            monitor.control_address = await nursery.start(
                functools.partial(serve_control, public=config.control.public),
                monitor,
                config.control.address,
            )
        await nursery.start(crawler.run)
        nursery.start_soon(monitor.push_forever)
        nursery.start_soon(self._replicator.run)
        nursery.start_soon(self._gossip_loop)
        nursery.start_soon(self._router_loop)
        nursery.start_soon(self._ack_loop)
        nursery.start_soon(self._handoff.run)
        if config.join:
            self._send_membership(self.membership.join(trio.current_time(), config.join))
        return crawler

    async def _leave(self) -> None:
        """Announce the leave, then hand everything to the peers that stay.

        When the whole cluster stops at once, the others are leaving too: they
        refuse hand-offs, and once their leave is known here there is nobody to
        hand to, so this peer keeps what it holds (its shard has it all, and a
        restart brings it back) instead of waiting out the patience."""
        # Sent before anything else and waited for: a peer that finds nobody to hand
        # to exits at once, and a leave still being sent then would be lost, leaving
        # the others to wait for its failure to be detected.
        with trio.move_on_after(_LEAVE_ANNOUNCE):
            async with trio.open_nursery() as announcing:
                for out in self.membership.leave(trio.current_time()):
                    announcing.start_soon(self._send_one, out)
        assert self._router is not None
        router = self._router
        with trio.move_on_after(_LEAVE_PATIENCE):
            for _ in range(_LEAVE_SWEEPS):
                others = self._reachable_others()
                if not others:
                    break
                ring = Ring(others)
                self.crawler.ring_changed(ring)
                self.handoff.ring_changed(ring, frozenset(others), frozenset(), sweep=False)
                if await self.handoff.sweep():
                    break
                await trio.sleep(1.0)  # an owner did not answer: try again shortly
        with trio.move_on_after(_LEAVE_DRAIN):
            while router.backlog() and self._reachable_others():
                with trio.move_on_after(1.0):
                    await self._router_drained.wait()
        if not self._reachable_others():
            log.info("no peer left to hand over to: everything stays in the shard")
        if router.backlog():
            log.info("%d forwarded URLs not acknowledged: kept in the outbox", router.backlog())

    def _reachable_others(self) -> frozenset[str]:
        """The other live members, less those whose address refused a connection: a
        leaving peer no longer probes, so one that exited before its own leave reached
        this peer would otherwise be waited for until the patience runs out."""
        unreachable = self.links.unreachable
        return frozenset(
            m
            for m in self.membership.alive_ids() - {self.peer_id}
            if self._address_of(m) not in unreachable
        )

    def _address_of(self, peer_id: str) -> str | None:
        member = self.membership.member(peer_id)
        return None if member is None else member.address

    @property
    def monitor(self) -> Monitor:
        assert self._monitor is not None
        return self._monitor

    @property
    def control_address(self) -> str | None:
        """Where the control centre listens (HOST:PORT), if this peer serves it."""
        return None if self._monitor is None else self._monitor.control_address

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None:
        """Run ``fn`` in the peer's nursery (for its components' background sends)."""
        assert self._nursery is not None
        self._nursery.start_soon(fn, *args)

    @property
    def replicator(self) -> Replicator:
        assert self._replicator is not None
        return self._replicator

    @property
    def handoff(self) -> Handoff:
        assert self._handoff is not None
        return self._handoff

    async def _gossip_loop(self) -> None:
        membership = self.membership
        while True:
            deadline = membership.next_deadline()
            with trio.move_on_at(deadline if deadline is not None else math.inf):
                await self._gossip_kick.wait()
            self._gossip_kick = trio.Event()
            self._send_membership(membership.tick(trio.current_time()))
            self._membership_events()

    def _send_membership(self, outgoing: list[Outgoing]) -> None:
        assert self._nursery is not None
        for out in outgoing:
            self._nursery.start_soon(self._send_one, out)

    async def _send_one(self, out: Outgoing) -> None:
        payload = {"from": self.address, "msg": out.message.to_wire()}
        await self.links.send(out.address, FrameType.MEMBERSHIP, payload)

    def _membership_events(self) -> None:
        events = self.membership.drain_events()
        if not events:
            return
        ring_changed = False
        dead: list[str] = []
        for event in events:
            log.info("member %s %s", event.member.id, event.kind.value)
            if event.changes_ring:
                ring_changed = True
            if event.member.state is MemberState.DEAD:
                dead.append(event.member.id)
            if event.member.state in (MemberState.DEAD, MemberState.LEFT):
                self.links.forget(event.member.address)
                self.handoff.abandon(event.member.address)
            elif event.changes_ring and event.member.id != self.peer_id:
                self.handoff.back(event.member.address)
                self._share_scope(event.member.address)
                self.monitor.member_joined(event.member.address)
        if ring_changed and not self.stopping:
            self.ring_changes += 1
            alive = self.membership.alive_ids()
            handing = alive | {
                m.id for m in self.membership.members() if m.state is MemberState.LEFT
            }
            ring = Ring(alive)
            self.crawler.ring_changed(ring)
            self.handoff.ring_changed(ring, alive, handing)
            if dead:
                # The dead hand nothing over: their copies here become ours first.
                self.replicator.promote(ring)
            self.replicator.ring_changed(ring)
            self._remember_members()
        for peer_id in dead:
            self.handoff.peer_gone(peer_id)

    def _remember_members(self) -> None:
        """Remember every peer known now, so that, back from a stop, this peer holds
        the hosts they may hold until they are back and have swept. Those that left
        or died are kept: a whole cluster stopping hands hosts to peers that are
        leaving too, and a dead peer's shard still holds its hosts' history."""
        known = ",".join(sorted(m.id for m in self.membership.members()))
        if known == self._remembered:
            return
        try:
            with self.shard.transaction():
                self.shard.set_meta(_MEMBERS_META, known)
            self._remembered = known
        except sqlite3.Error as exc:
            log.warning("cannot remember the members: %s", exc)

    def _share_scope(self, address: str) -> None:
        roots = sorted(self.crawler.scope.roots)
        if roots and self._nursery is not None:
            self._nursery.start_soon(self.links.send, address, FrameType.SCOPE, roots)

    def _kick_router(self) -> None:
        # The event is replaced after every wake-up, so it is looked up each time.
        self._router_kick.set()

    async def _router_loop(self) -> None:
        assert self._router is not None and self._nursery is not None
        router = self._router
        while True:
            deadline = router.next_deadline()
            with trio.move_on_at(deadline if deadline is not None else math.inf):
                await self._router_kick.wait()
            self._router_kick = trio.Event()
            for batch in router.due(trio.current_time()):
                self._nursery.start_soon(self._send_batch, batch)

    async def _send_batch(self, batch: Batch) -> None:
        member = self.membership.member(batch.owner)
        if member is None:
            return  # resent later, or re-routed when the ring drops the owner
        payload = {
            "id": batch.id,
            "urls": [[u.url, u.depth] for u in batch.urls],
            # Acknowledgements owed to the owner ride along (a lost frame loses
            # them too: the owner's batches are then re-sent and admitted again).
            "acks": self._acks.take(batch.owner),
        }
        await self.links.send(member.address, FrameType.URL_BATCH, payload)

    async def _ack_loop(self) -> None:
        """Acknowledgements that found no batch to ride on leave on their own."""
        acks = self._acks
        assert self._router is not None
        router = self._router
        while True:
            with trio.move_on_at(acks.next_deadline(router.linger)):
                await self._ack_kick.wait()
            self._ack_kick = trio.Event()
            for peer_id, ids in acks.due(trio.current_time(), router.linger):
                member = self.membership.member(peer_id)
                if member is not None:
                    self.start_soon(
                        self.links.send, member.address, FrameType.URL_ACK, {"ids": ids}
                    )

    def _acked(self, ids: object) -> None:
        """An owner has durably admitted these batches of ours."""
        if not isinstance(ids, list) or not all(type(i) is int for i in ids):
            raise ValueError("acknowledged batch ids must be integers")
        assert self._router is not None
        for batch_id in ids:
            batch = self._router.acked(batch_id)
            if batch is not None:
                self.crawler.forwarded(u.fp for u in batch.urls)
        if ids and not self._router.backlog():
            self._router_drained.set()
            self._router_drained = trio.Event()

    # -- frames ---------------------------------------------------------------
    async def _on_frame(self, frame: Frame, reply: Reply) -> None:
        kind = frame.type
        payload = frame.payload
        if kind is FrameType.MEMBERSHIP:
            sender = payload["from"]
            if not isinstance(sender, str):
                raise ValueError("membership frame without a sender address")
            message = message_from_wire(payload["msg"])
            self._send_membership(self.membership.receive(trio.current_time(), sender, message))
            self._membership_events()
            self._gossip_kick.set()
        elif kind is FrameType.URL_BATCH:
            self._acked(payload.get("acks", []))
            urls = url_items(payload["urls"])
            batch_id = int(payload["id"])
            try:
                self.crawler.admit_routed(urls)
            except StorageError as exc:
                log.warning("batch from %s not admitted: %s", frame.sender, exc)
                return  # not acknowledged: the sender keeps it and retries
            if self.membership.member(frame.sender) is None:
                # Not known here yet, so no address to send to later: answer now.
                await reply(FrameType.URL_ACK, {"ids": [batch_id]})
            else:
                self._acks.add(frame.sender, batch_id, trio.current_time())
                self._ack_kick.set()
        elif kind is FrameType.URL_ACK:
            self._acked(payload["ids"])
        elif kind is FrameType.HANDOFF:
            try:
                if self.stopping:
                    # Leaving too: what is handed here would only have to move again.
                    raise NotOurs("this peer is leaving")
                self.handoff.receive(payload)
            except NotOurs as exc:
                log.info("hand-off from %s refused: %s", frame.sender, exc)
                await reply(FrameType.HANDOFF_ACK, {"id": int(payload["id"]), "refused": True})
                return
            except StorageError as exc:
                log.warning("hand-off from %s not taken: %s", frame.sender, exc)
                return  # not acknowledged: the sender keeps the host
            await reply(FrameType.HANDOFF_ACK, {"id": int(payload["id"])})
        elif kind is FrameType.HANDOFF_ACK:
            self.handoff.acked(int(payload["id"]), refused=payload.get("refused") is True)
        elif kind is FrameType.HANDOFF_DONE:
            key = payload.get("ring")
            if not isinstance(key, str):
                raise ValueError("HANDOFF_DONE without its ring")
            self.handoff.release_from(frame.sender, key)
        elif kind is FrameType.REPLICA:
            self.replicator.receive(payload)
        elif kind is FrameType.SCOPE:
            if not isinstance(payload, list) or not all(isinstance(r, str) for r in payload):
                raise ValueError("scope roots must be a list of strings")
            self.crawler.add_scope_roots(payload)
        elif kind is FrameType.SEED:
            await reply(FrameType.SEED_ACK, self.seed_urls(payload["urls"]))
        elif kind is FrameType.CONTROL:
            self.monitor.on_control(frame.sender, payload)
        elif kind is FrameType.FIGURES:
            self.monitor.on_figures(frame.sender, payload)
        elif kind is FrameType.STOP:
            log.info("stop asked by %s for the whole cluster", frame.sender)
            self.stop()
        elif kind is FrameType.STATUS_REQUEST:
            await reply(FrameType.STATUS, await self._status_report(bool(payload.get("cluster"))))
        else:
            raise ValueError(f"unexpected frame type {kind.name}")

    def seed_urls(self, urls: object) -> dict[str, Any]:
        """Seed the crawl (from the wire or the control centre); raises ValueError for
        what is not a list of strings, and answers an error while storage fails."""
        if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
            raise ValueError("seeds must be a list of strings")
        try:
            result = self.crawler.seed(urls)
        except StorageError as exc:
            return {"error": str(exc)}
        for member in self.membership.members():
            if member.id != self.peer_id and member.state is MemberState.ALIVE:
                self._share_scope(member.address)
        return {
            "offered": result.offered,
            "admitted": result.admitted,
            "forwarded": result.forwarded,
            "refused": [list(r) for r in result.refused],
        }

    async def _status_report(self, cluster: bool) -> dict[str, Any]:
        members = [
            {"id": m.id, "address": m.address, "state": m.state.name.lower()}
            for m in self.membership.members()
        ]
        peers = [self.status().as_json()]
        if cluster:
            others = [
                m
                for m in self.membership.members()
                if m.id != self.peer_id and m.state in LIVE_STATES
            ]
            answers: list[dict[str, Any]] = []

            async def ask(address: str) -> None:
                try:
                    frame = await request(
                        address, self.secret, FrameType.STATUS_REQUEST, {}, patience=2.0
                    )
                except (OSError, PermissionError):
                    return
                answers.extend(frame.payload.get("peers", []))

            async with trio.open_nursery() as nursery:
                for m in others:
                    nursery.start_soon(ask, m.address)
            peers += answers
        return {"members": members, "peers": peers}

    def status(self) -> PeerStatus:
        c = self.crawler
        links = self.links
        router = self._router
        uptime = max(trio.current_time() - c.stats.started_at, 1e-9)
        return PeerStatus(
            peer_id=self.peer_id,
            address=self.address,
            version=__version__,
            started_at=self._started_wall,
            uptime=uptime,
            pages=c.stats.pages,
            pages_per_second=c.stats.pages / uptime,
            errors=c.stats.errors,
            timeouts=c.stats.timeouts,
            pending=c.pending,
            hosts=c.scheduler.hosts,
            in_flight=c.scheduler.in_flight,
            bytes_in=c.stats.bytes_in,
            robots_disallowed=c.stats.robots_disallowed,
            out_of_scope=c.stats.out_of_scope,
            idle=c.scheduler.idle(),
            storage_error=c.storage_error,
            forwarded_urls=router.stats.forwarded_urls if router else 0,
            forward_backlog=router.backlog() if router else 0,
            frames_out=sum(links.stats.frames_out.values()),
            bytes_out_wire=links.stats.bytes_out,
            frames_rejected=sum(links.stats.rejected.values()),
            url_frames=links.stats.frames_out["URL_BATCH"] + links.stats.frames_out["URL_ACK"],
            url_bytes=links.stats.bytes_out_by["URL_BATCH"] + links.stats.bytes_out_by["URL_ACK"],
            handed_off_hosts=self.handoff.stats.hosts_out,
            handed_off_urls=self.handoff.stats.urls_out,
            handed_off_bytes=links.stats.bytes_out_by["HANDOFF"],
            taken_over_hosts=self.handoff.stats.hosts_in,
            replica_bytes=links.stats.bytes_out_by["REPLICA"],
        )
