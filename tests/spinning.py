"""A bound for a test whose failure would be a loop that never yields: trio's time-outs
act only when the loop gives way, so a real-time alarm (SIGALRM) stops it instead."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


def _spun(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError("a loop ran on without ever yielding")


@contextmanager
def no_endless_spin(seconds: float = 10.0) -> Iterator[None]:
    """Raise TimeoutError in the block if it is still running after ``seconds``
    (Unix, main thread: where the tests run)."""
    previous = signal.signal(signal.SIGALRM, _spun)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
