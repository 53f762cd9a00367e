"""A running peer: its shard, its HTTP client, its crawler and its control endpoint,
all in one trio nursery that the peer owns."""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any

import httpx2
import trio

from ubipy import __version__
from ubipy.config import CrawlConfig
from ubipy.fetch.client import make_client
from ubipy.peer.control import Request, Response, parse_listen, serve_http
from ubipy.peer.crawler import Crawler, StorageError
from ubipy.store.shard import Shard

log = logging.getLogger(__name__)

_ID_META = "peer_id"


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

    def as_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


class Peer:
    def __init__(
        self, config: CrawlConfig, *, transport: httpx2.AsyncBaseTransport | None = None
    ) -> None:
        self.config = config
        self._transport = transport
        self.shard = Shard.open(config.data_dir)
        self.peer_id = load_peer_id(self.shard)
        self.address = config.listen
        self._started_wall = time.time()
        self._crawler: Crawler | None = None
        self._stop = trio.Event()

    @property
    def crawler(self) -> Crawler:
        if self._crawler is None:
            raise RuntimeError("the peer is not running")
        return self._crawler

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """Ask for a graceful stop: in-flight requests finish, everything is saved."""
        self._stop.set()

    async def run(self, *, task_status: trio.TaskStatus[Peer] = trio.TASK_STATUS_IGNORED) -> None:
        agent = self.config.agent_string(self.peer_id)
        try:
            async with make_client(self.config, agent, transport=self._transport) as client:
                crawler = self._crawler = Crawler(self.config, self.shard, client)
                async with trio.open_nursery() as nursery:
                    host, port = parse_listen(self.config.listen)
                    bound = await nursery.start(serve_http, self._handle, host, port)
                    self.address = f"{host}:{bound}"
                    await nursery.start(crawler.run)
                    log.info("peer %s listening on %s", self.peer_id, self.address)
                    task_status.started(self)
                    await self._stop.wait()
                    crawler.stop()
                    await crawler.stopped.wait()
                    nursery.cancel_scope.cancel()
        finally:
            self.shard.close()

    def status(self) -> PeerStatus:
        c = self.crawler
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
        )

    async def _handle(self, request: Request) -> Response:
        if request.method == "GET" and request.path == "/api/status":
            return Response.of_json(200, self.status().as_json())
        if request.method == "POST" and request.path == "/api/seed":
            urls = request.json()
            if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
                raise ValueError("expected a JSON list of URL strings")
            try:
                result = self.crawler.seed(urls)
            except StorageError as exc:
                return Response.of_json(503, {"error": str(exc)})
            return Response.of_json(
                200,
                {
                    "offered": result.offered,
                    "admitted": result.admitted,
                    "refused": [list(r) for r in result.refused],
                },
            )
        if request.method == "POST" and request.path == "/api/stop":
            self.stop()
            return Response.of_json(202, {"stopping": True})
        return Response.of_json(
            404, {"error": f"no such endpoint: {request.method} {request.path}"}
        )
