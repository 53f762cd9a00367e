"""What the churn scenarios share, whether their peers run as processes
(tests/e2e/test_churn.py) or in one process on the in-memory network
(tests/cluster/test_churn_memory.py): the web, the timings and the judgments, so
both are held to the same assertions."""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ubipy.synthweb import Referee, WebSpec

DELAY = 0.01  # what start_peer passes as --delay
SPEC = WebSpec(
    seed=7, hosts=120, pages_per_host=12, latency=0.05, crawl_delay=0.05, cross_link_ratio=0.6
)
# "Mid-crawl": once the server has answered this fraction of the truth.
MID = 1 / 3
RING_PATIENCE = 30.0  # seconds for every live peer to log a membership change
STALL = 20.0  # no request at all for this long and the crawl is not coming back
COVERAGE_LIMIT = 150.0


def stored_urls(data: Path) -> set[str]:
    conn = sqlite3.connect(data / "shard.sqlite3")
    try:
        return {url for (url,) in conn.execute("SELECT url FROM pages")}
    finally:
        conn.close()


def lost_at_kill(
    referee: Referee,
    peer_id: str,
    stored: set[str],
    killed_at: float,
    until: float = float("inf"),
    copy_margin: float = 0.0,
) -> set[str]:
    """The pages a peer killed at ``killed_at`` may have lost, generously: every page
    request of its (first) life, started before ``until``, that was not answered whole,
    or ended less than ``copy_margin`` before the kill, or whose page is not in its
    shard after the kill (served, but the outcome not committed)."""
    lost: set[str] = set()
    for r in referee.requests:
        if r.peer != peer_id or r.start >= until or referee.is_robots(r):
            continue
        url = Referee.url_of(r)
        in_shard = url in stored or r.url in stored
        if not r.complete or r.end >= killed_at - copy_margin or not in_shard:
            lost.add(url)
    return lost


def pages_after(referee: Referee, since: float) -> Counter[str]:
    return Counter(
        r.peer for r in referee.requests if r.start >= since and not referee.is_robots(r)
    )


def wire_figures(status: dict[str, Any]) -> tuple[int, int | None]:
    """Bytes out on the wire over the live peers, and their replica bytes (None: not
    reported yet)."""
    peers: list[dict[str, Any]] = status.get("peers", [])
    wire = sum(int(p["bytes_out_wire"]) for p in peers)
    if not peers or "replica_bytes" not in peers[0]:
        return wire, None
    return wire, sum(int(p["replica_bytes"]) for p in peers)


def missing_message(missing: Iterable[str], truth: set[str]) -> str:
    gone = sorted(missing)
    return f"{len(gone)} of {len(truth)} pages never fetched, e.g. {gone[:5]}"
