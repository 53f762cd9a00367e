"""Replication (``--replicas 2``): each owner copies its frontier and its history
to the next distinct peer clockwise, which takes the hosts over if the owner dies.

What is copied: every URL the owner admits (pending) and every page it stores
(done), batched per successor like forwarded URLs (one REPLICA frame per
linger). The successor keeps them in its ``replica`` table. When the ring drops
a dead peer, its hosts fall to exactly that successor, which moves the copies
into its own frontier and ``seen``: pending URLs are fetched, done ones are not
fetched again. When the ring changes, the hosts whose successor changed are
copied whole to the new one.

Copies are sent once, without acknowledgement: a frame lost with a broken
connection is not re-sent (the next ring change re-copies the host whole).
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from ubipy.peer.crawler import Crawler
from ubipy.peer.wire import FrameType
from ubipy.ring import Ring
from ubipy.store.shard import FrontierRow, PageRecord, Shard

log = logging.getLogger(__name__)

_CHUNK = 2_000

Item = list[Any]  # [host, url | None, depth, fp, done]
Send = Callable[[str, FrameType, Any], Awaitable[bool]]
AddressOf = Callable[[str], str | None]


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
        linger: float = 0.2,
    ) -> None:
        self.self_id = self_id
        self.replicas = replicas
        self._crawler = crawler
        self._shard = shard
        self._send = send
        self._address_of = address_of
        self._linger = linger
        self._ring = Ring([self_id])
        self._queues: dict[str, list[Item]] = defaultdict(list)
        self._kick = trio.Event()
        self.items_sent = 0
        if replicas >= 2:
            crawler.on_commit = self.committed

    def _successor(self, host: str) -> str | None:
        members = self._ring.successors(host, 2)
        if len(members) < 2 or members[0] != self.self_id:
            return None
        return members[1]

    def committed(self, rows: Sequence[FrontierRow], pages: Sequence[PageRecord]) -> None:
        for r in rows:
            target = self._successor(r.host)
            if target is not None:
                self._queues[target].append([r.host, r.url, r.depth, r.fp, False])
        for p in pages:
            target = self._successor(p.host)
            if target is not None:
                self._queues[target].append([p.host, None, p.depth, p.fp, True])
        if self._queues:
            self._kick.set()

    def ring_changed(self, ring: Ring) -> None:
        """Copy whole every host of ours whose successor is new."""
        old, self._ring = self._ring, ring
        if self.replicas < 2:
            return
        for host in self._crawler.held_hosts():
            target = self._successor(host)
            if target is None:
                continue
            before = old.successors(host, 2)
            if len(before) > 1 and before[0] == self.self_id and before[1] == target:
                continue
            pending, done, _ = self._shard.host_state(host)
            queue = self._queues[target]
            queue.extend([host, u.url, u.depth, u.fp, False] for u in pending)
            queue.extend([host, None, 0, fp, True] for fp in done)
        if self._queues:
            self._kick.set()

    async def run(self) -> None:
        while True:
            await self._kick.wait()
            self._kick = trio.Event()
            # Let a batch gather, as forwarding does.
            await trio.sleep(self._linger)
            queues, self._queues = self._queues, defaultdict(list)
            for target, items in queues.items():
                address = self._address_of(target)
                if address is None:
                    continue
                for i in range(0, len(items), _CHUNK):
                    chunk = items[i : i + _CHUNK]
                    if await self._send(address, FrameType.REPLICA, {"items": chunk}):
                        self.items_sent += len(chunk)

    def receive(self, payload: dict[str, Any]) -> None:
        items = payload["items"]
        if not isinstance(items, list):
            raise ValueError("replica items must be a list")
        rows: list[tuple[str, str | None, int, int, bool]] = []
        for item in items:
            if not (isinstance(item, list) and len(item) == 5):
                raise ValueError("a replica item is [host, url, depth, fp, done]")
            host, url, depth, fp, done = item
            if not (
                isinstance(host, str)
                and (url is None or isinstance(url, str))
                and type(depth) is int
                and type(fp) is int
                and isinstance(done, bool)
            ):
                raise ValueError("a malformed replica item")
            rows.append((host, url, depth, fp, done))
        self._shard.replica_add(rows)

    def promote(self, ring: Ring) -> int:
        """The ring dropped a dead peer: take over the hosts whose copies are here."""
        taken = 0
        for host in self._shard.replica_hosts():
            if ring.owner(host) != self.self_id:
                continue
            pending, done = self._shard.replica_take(host)
            self._crawler.take_over(host, pending, done, None)
            taken += 1
            log.info(
                "took over 1 hosts (%d URLs) from replica: %s, %d done",
                len(pending),
                host,
                len(done),
            )
        return taken
