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

from ubipy.net import Send
from ubipy.peer.acks import AckBook
from ubipy.peer.crawler import Crawler
from ubipy.peer.router import Batch, Router, url_items
from ubipy.peer.wakeup import Wakeup
from ubipy.wire import Message, UrlAck, UrlBatch

Reply = Callable[[Message], Awaitable[None]]


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
        acks = tuple(self._acks.take(batch.owner))
        urls = tuple((u.url, u.depth, u.score) for u in batch.urls)
        await self._send(address, UrlBatch(batch.id, urls, acks))

    async def _ack_loop(self, nursery: trio.Nursery) -> None:
        """Acknowledgements that found no batch to ride on leave on their own."""
        acks = self._acks
        router = self.router
        while True:
            await self._ack_kick.wait(acks.next_deadline(router.linger))
            for peer_id, ids in acks.due(trio.current_time(), router.linger):
                address = self._address_of(peer_id)
                if address is not None:
                    nursery.start_soon(self._send, address, UrlAck(tuple(ids)))

    def _acked(self, ids: tuple[int, ...]) -> None:
        """An owner has durably admitted these batches of ours."""
        for batch_id in ids:
            batch = self.router.acked(batch_id)
            if batch is not None:
                self._crawler.forwarded(u.fp for u in batch.urls)
                self._kick.set()  # what waited for its owner may be due again now
        if ids and not self.router.backlog():
            self.drained.set()
            self.drained = trio.Event()

    async def on_batch(self, sender: str, batch: UrlBatch, reply: Reply) -> None:
        self._acked(batch.acks)
        # A StorageError goes up to the peer, which drops the batch unacknowledged: its
        # sender keeps it and tries again.
        self._crawler.admit_routed(url_items(batch.urls))
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
