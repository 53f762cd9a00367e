"""CPython's garbage collector, set for a process that runs a peer.

A peer's process keeps what it imported and built at start-up for its whole life, and
its crawl makes objects by the million that live for a page or a commit. The collector
scans every object that has survived two collections each time it makes a full one,
start-up's among them, and makes one after every 10 collections of the middle
generation. Here what exists when the peer starts is frozen out of every later scan
(``gc.freeze``, as Instagram's servers do after their start-up), and a full collection
waits for 100 collections of the middle generation (CPython also waits, whatever the
threshold, until the objects waiting for one are a quarter of those it would scan).

On ``bench/speed.py``'s default web, alternated: 0.33 s of collection in a crawl of
20,000 pages against 0.17-0.18 s, 7-8 full collections against none, the same peak RSS
(82-83 MB).
"""

from __future__ import annotations

import gc

__all__ = ["FULL_COLLECTION_EVERY", "settle_collector"]

# Collections of the middle generation between two full ones (CPython's default: 10).
FULL_COLLECTION_EVERY = 100


def settle_collector() -> None:
    """Set the process's collector for a peer: call once, when start-up is done (the
    CLI calls it for ``ubipy peer``; a program embedding peers may or may not)."""
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
