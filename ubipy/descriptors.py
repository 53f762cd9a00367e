"""How many file descriptors one kind of connection may hold: what the peer's
accepted connections (:mod:`ubipy.net.guard`) and the fetcher's idle ones
(:mod:`ubipy.fetch.transport`) are each capped at; and whether a failure was for want
of one."""

from __future__ import annotations

import errno
import os
import resource
from typing import Final

__all__ = ["descriptor_share", "out_of_descriptors"]

# This process's descriptors, or the system's, all taken.
_EXHAUSTED: Final = frozenset({errno.EMFILE, errno.ENFILE})

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


def out_of_descriptors(exc: BaseException) -> str | None:
    """Why ``exc`` is a want of file descriptors, if it is ("Too many open files"): it
    or an error it was raised from (trio's failure of every attempt to connect keeps
    each attempt's). A connection refused for it was said to be the host's failure, or
    an unreachable proxy's (QA, under ``ulimit -n 20``)."""
    left: list[BaseException] = [exc]
    seen: set[int] = set()  # a chain may loop (a review)
    while left and len(seen) < 64:
        e = left.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno in _EXHAUSTED:
            return f"{os.strerror(e.errno)}: this process is out of file descriptors (ulimit -n)"
        if isinstance(e, BaseExceptionGroup):
            left.extend(e.exceptions)
        if e.__cause__ is not None:
            left.append(e.__cause__)
    return None
