"""Work done in steps, for the event loop's sake.

A generator yields between two steps of a long piece of work and returns its result;
its caller runs it at once (:func:`finished`), or in slices of the loop's time with
other tasks running between two (:func:`in_slices`). Read at once, a sitemap of
50,000 URLs in 50 MB held a peer's loop 11 s, and with it its answers to the pings
that tell the others it lives (QA).
"""

from __future__ import annotations

import time
from collections.abc import Generator
from typing import TypeVar

import trio

__all__ = ["Steps", "finished", "in_slices"]

T = TypeVar("T")
#: A piece of work in steps: nothing is sent in, nothing comes out of a step, and the
#: result at the end.
Steps = Generator[None, None, T]


def finished(steps: Steps[T]) -> T:
    """The result of ``steps``, all run now."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result


async def in_slices(steps: Steps[T], seconds: float) -> T:
    """The result of ``steps``, run in slices of about ``seconds`` of the loop's time
    (a step at least), other tasks running between two."""
    while True:
        until = time.perf_counter() + seconds
        try:
            while True:
                next(steps)
                if time.perf_counter() >= until:
                    break
        except StopIteration as done:
            result: T = done.value
            return result
        await trio.lowlevel.checkpoint()
