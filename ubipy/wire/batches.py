"""Splitting a long list of strings (seeds, scope roots) into runs that each fit one
frame, so a list of any size travels in several frames far under the cap."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Final

from ubipy.wire.payloads import MAX_ITEMS

# The strings one frame carries at most. A receiver handles a frame in one go, on
# the event loop its crawl shares: a thousand seeds are admitted in tens of
# milliseconds, ten thousand can take a second.
BATCH_ITEMS: Final = 1_000
# Their encoded bytes at most: a sixteenth of the 4 MiB cap leaves room for the
# frame's own fields, and for a SEED_ACK that echoes every URL back as refused.
BATCH_BYTES: Final = 256 * 1024
# CBOR's head of a text string is at most 9 bytes (5 below 4 GiB).
_STRING_HEAD: Final = 9


def batches(
    strings: Iterable[str], *, max_items: int = BATCH_ITEMS, max_bytes: int = BATCH_BYTES
) -> Iterator[tuple[str, ...]]:
    """``strings`` in order, in runs of at most ``max_items`` (at most the
    receiver's limit, MAX_ITEMS) and at most ``max_bytes`` of encoded strings; a
    string longer than ``max_bytes`` goes alone."""
    if not 1 <= max_items <= MAX_ITEMS:
        raise ValueError(f"max_items must be in [1, {MAX_ITEMS}]: {max_items}")
    run: list[str] = []
    size = 0
    for text in strings:
        cost = len(text.encode()) + _STRING_HEAD
        if run and (len(run) >= max_items or size + cost > max_bytes):
            yield tuple(run)
            run, size = [], 0
        run.append(text)
        size += cost
    if run:
        yield tuple(run)
