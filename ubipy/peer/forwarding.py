"""Forwarding on the wire: the router's batches leave when due, acknowledgements
of the batches this peer admitted go back (riding on a batch going the same way
when one leaves within a linger, on their own otherwise), and a batch of ours that
its owner acknowledges is counted off.

The decisions are the router's and the ack book's (both pure); this is the trio
side that runs them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import trio

from ubipy.errors import FrameError
from ubipy.net import Send
from ubipy.peer.acks import AckBook
from ubipy.peer.crawler import Crawler
from ubipy.peer.ids import run_ids
from ubipy.peer.router import Batch, Router, batch_items
from ubipy.peer.scopesharing import widen_to_seeds
from ubipy.peer.wakeup import Wakeup
from ubipy.wire import MAX_ITEMS, BatchURL, Message, UrlAck, UrlBatch

Reply = Callable[[Message], Awaitable[None]]

# The ids of the parts of a batch too large for one frame lie above the router's batch
# ids (below 2**62), so an acknowledgement names one or the other.
_PART_IDS = 2**62


class Forwarder:
    def __init__(
        self,
        router: Router,
        crawler: Crawler,
        send: Send,
        address_of: Callable[[str], str | None],
        synced: Callable[[], Awaitable[None]],
    ) -> None:
        """``synced``: returns once what the shard committed is on disk (see
        :mod:`ubipy.peer.syncing`)."""
        self.router = router
        self._synced = synced
        self._crawler = crawler
        self._send = send
        self._address_of = address_of
        self._kick = Wakeup()
        # Held at most a linger (half the sender's retry) for a batch to ride on.
        self._acks = AckBook()
        self._ack_kick = Wakeup()
        # Set (and replaced) each time the last batch of ours is acknowledged.
        self.drained = trio.Event()
        # A batch too large for one frame (long URLs under a large --batch-size) goes
        # in parts, each under an id of its own, and counts as acknowledged once
        # every part is: batch id -> {part id: its URLs} not yet acknowledged, and
        # part id -> batch id.
        self._parts: dict[int, dict[int, tuple[BatchURL, ...]]] = {}
        self._part_of: dict[int, int] = {}
        self._part_ids = (_PART_IDS + i for i in run_ids())
        self._splitting: set[int] = set()  # batches whose parts are being sent

    def kick(self) -> None:
        """New foreign URLs are in the router: look at its batches again."""
        self._kick.set()

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._ack_loop, nursery)
            router = self.router
            while True:
                await self._kick.wait(router.next_deadline())
                for batch in router.due(trio.current_time()):
                    nursery.start_soon(self._send_batch, batch)

    async def _send_batch(self, batch: Batch) -> None:
        address = self._address_of(batch.owner)
        if address is None:
            return  # resent later, or re-routed when the ring drops the owner
        # Acknowledgements owed to the owner ride along (a lost frame loses them too:
        # the owner's batches are then re-sent and admitted again).
        acks = self._owed(batch.owner)
        parts = self._parts.get(batch.id)
        if parts is not None:  # sent in parts before: those not acknowledged go again
            for part, urls in list(parts.items()):
                await self._send(address, UrlBatch(part, urls, acks))
                acks = ()
            return
        urls = tuple((u.url, u.depth, u.score, u.redirects) for u in batch.urls)
        try:
            await self._send(address, UrlBatch(batch.id, urls, acks))
        except FrameError:  # over the frame cap: nothing was sent
            await self._send_in_parts(address, batch.id, urls, acks)

    async def _send_in_parts(
        self, address: str, batch_id: int, urls: tuple[BatchURL, ...], acks: tuple[int, ...]
    ) -> None:
        """``urls`` in frames under the cap, halved until each fits."""
        parts = self._parts[batch_id] = {}
        # While parts are still to be sent, an acknowledgement of all those sent so far
        # is not the batch's: taken for it, the rest were never sent again if their
        # send failed (found by a review).
        self._splitting.add(batch_id)
        waiting = [urls]
        try:
            while waiting:
                chunk = waiting.pop()
                part = next(self._part_ids)
                parts[part] = chunk
                self._part_of[part] = batch_id
                try:
                    await self._send(address, UrlBatch(part, chunk, acks))
                except FrameError:
                    del parts[part], self._part_of[part]
                    if len(chunk) == 1:
                        raise  # a URL is at most 2,048 characters: no frame too small
                    half = len(chunk) // 2
                    waiting += [chunk[half:], chunk[:half]]
                    continue
                acks = ()  # they rode on the first part
        finally:
            self._splitting.discard(batch_id)
        if not parts:  # each acknowledged while the others were being sent
            self._parts.pop(batch_id, None)
            self._done(batch_id)

    def _owed(self, peer_id: str) -> tuple[int, ...]:
        """The acknowledgements owed to ``peer_id`` that one frame may carry; the
        rest wait for the next."""
        ids = self._acks.take(peer_id)
        now = trio.current_time()
        for later in ids[MAX_ITEMS:]:
            self._acks.add(peer_id, later, now)
        return tuple(ids[:MAX_ITEMS])

    async def _ack_loop(self, nursery: trio.Nursery) -> None:
        """Acknowledgements that found no batch to ride on leave on their own."""
        acks = self._acks
        router = self.router
        while True:
            await self._ack_kick.wait(acks.next_deadline(router.linger))
            for peer_id, ids in acks.due(trio.current_time(), router.linger):
                address = self._address_of(peer_id)
                if address is None:
                    continue
                for start in range(0, len(ids), MAX_ITEMS):
                    ack = UrlAck(tuple(ids[start : start + MAX_ITEMS]))
                    nursery.start_soon(self._send, address, ack)

    def _done(self, batch_id: int) -> None:
        """The owner has the whole batch."""
        batch = self.router.acked(batch_id)
        if batch is not None:
            self._crawler.forwarded(u.fp for u in batch.urls)
            self._kick.set()  # what waited for its owner may be due again now

    def _acked(self, ids: tuple[int, ...]) -> None:
        """An owner has durably admitted these batches of ours."""
        for batch_id in ids:
            whole = self._part_of.pop(batch_id, None)
            if whole is not None:  # one part of a batch sent in parts
                parts = self._parts.get(whole, {})
                parts.pop(batch_id, None)
                if parts or whole in self._splitting:
                    continue
                self._parts.pop(whole, None)
                batch_id = whole
            self._done(batch_id)
        if ids and self.router.reloads():
            self._crawler.reload_outbox()  # an owner that answers may take what waits on disk
        if ids and self._parts:
            # Parts of batches the router no longer holds (re-routed on a ring change,
            # never acknowledged) go: kept until the backlog was empty, which URLs
            # waiting on disk for a silent owner can put off for hours.
            for whole in [w for w in self._parts if not self.router.holds(w)]:
                if whole not in self._splitting:
                    for part in self._parts.pop(whole):
                        self._part_of.pop(part, None)
        if ids and not self.router.backlog():
            self.drained.set()
            self.drained = trio.Event()

    async def on_batch(self, sender: str, batch: UrlBatch, reply: Reply) -> None:
        self._acked(batch.acks)
        if self._crawler.stopped.is_set():
            # Stopping (leaving: this peer's ring is already without it): taken, the
            # URLs would go only into this outbox, and be lost with the peer should
            # its drain not reach their owner in time (a review). Unacknowledged,
            # their sender keeps them, and re-routes them once it sees the leave.
            return
        # A StorageError goes up to the peer, which drops the batch unacknowledged: its
        # sender keeps it and tries again.
        urls = batch_items(batch.urls)
        widen_to_seeds(self._crawler, urls)
        self._crawler.admit_routed(urls)
        # Acknowledged, the batch leaves its sender's outbox: on disk first.
        await self._synced()
        if self._address_of(sender) is None:
            # Not known here yet, so no address to send to later: answer now.
            await reply(UrlAck((batch.id,)))
        else:
            self._acks.add(sender, batch.id, trio.current_time())
            self._ack_kick.set()

    async def on_url_ack(self, sender: str, ack: UrlAck, reply: Reply) -> None:
        self._acked(ack.ids)
