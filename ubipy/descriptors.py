"""How many file descriptors one kind of connection may hold: what the peer's
accepted connections (:mod:`ubipy.net.guard`) and the fetcher's idle ones
(:mod:`ubipy.fetch.transport`) are each capped at."""

from __future__ import annotations

import resource
from typing import Final

__all__ = ["descriptor_share"]

# Descriptors kept back for everything else a peer opens (its shard, its WARC files,
# its fetches, the connections it dials).
RESERVED: Final = 128


def descriptor_share(floor: int) -> int:
    """A quarter of the file descriptors this process may open, less the reserve: at
    most 1024, at least ``floor``."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(floor, min(1024, (soft - RESERVED) // 4))
