"""A stand-in for the Peer behind the control server: a cluster whose figures move.

Every call of ``cluster_view`` is one second of each live peer's life: its uptime
grows by 1 and its pages by its rate, so the rates the book measures are known.
A peer marked dead keeps its last figures, as the control peer would.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ubipy.wire import secret_from

SECRET = "s3cret"


@dataclass
class FakePeer:
    peer_id: str
    address: str
    rate: int
    state: str = "alive"
    started_at: float = 1_700_000_000.0
    uptime: float = 0.0
    pages: int = 0

    def figures(self) -> dict[str, Any]:
        return {
            "peer_id": self.peer_id,
            "address": self.address,
            "version": "0.1.0",
            "started_at": self.started_at,
            "uptime": self.uptime,
            "pages": self.pages,
            "pages_per_second": self.pages / self.uptime if self.uptime else 0.0,
            "errors": self.pages // 10,
            "timeouts": self.pages // 20,
            "pending": 100 * self.rate,
            "hosts": 3 * self.rate,
            "in_flight": self.rate,
            "bytes_in": 2048 * self.pages,
            "bytes_out_wire": 100 * self.pages,
        }


@dataclass
class FakeBackend:
    secret: bytes = field(default_factory=lambda: secret_from(SECRET))
    peers: dict[str, FakePeer] = field(default_factory=dict)
    views: int = 0
    seeded: list[list[str]] = field(default_factory=list)
    stops: int = 0
    # What the next calls should do instead of answering.
    view_error: Exception | None = None
    seed_error: Exception | None = None
    seed_result: dict[str, Any] | None = None

    @classmethod
    def with_peers(cls, *rates: int, secret: str = SECRET) -> FakeBackend:
        backend = cls(secret=secret_from(secret))
        for i, rate in enumerate(rates):
            peer_id = f"peer{i:02d}" + "abcdef"[i % 6] * 8
            backend.peers[peer_id] = FakePeer(peer_id, f"127.0.0.1:{7000 + i}", rate)
        return backend

    def cluster_view(self) -> Mapping[str, Mapping[str, Any]]:
        if self.view_error is not None:
            raise self.view_error
        self.views += 1
        view: dict[str, dict[str, Any]] = {}
        for peer in self.peers.values():
            if peer.state in ("alive", "suspect"):
                peer.uptime += 1.0
                peer.pages += peer.rate
            view[peer.peer_id] = {**peer.figures(), "state": peer.state}
        return view

    async def seed(self, urls: list[str]) -> Mapping[str, Any]:
        if self.seed_error is not None:
            raise self.seed_error
        self.seeded.append(urls)
        if self.seed_result is not None:
            return self.seed_result
        return {"offered": len(urls), "admitted": len(urls), "forwarded": 0, "refused": []}

    def stop_cluster(self) -> None:
        self.stops += 1
