"""The wake-up of a loop that works when told to, or when its next deadline comes.

Most of a peer's loops have that shape: the dispatcher (a job may start, or a host
frees up at a known time), the committer, the replicator's resends, hand-off's
holds. A ``trio.Event`` cannot be cleared, so each loop used to swap its event
for a new one after every wake-up, by hand; ``Wakeup`` is that swap, once.
"""

from __future__ import annotations

import math

import trio

__all__ = ["Wakeup"]


class Wakeup:
    """Set by anyone, any number of times; waited on by one task at a time.

    Nothing is lost between waits: a ``set()`` while the waiting task is busy
    elsewhere makes its next ``wait()`` return at once. Sets before a wait count
    as one.
    """

    __slots__ = ("_event", "_scope")

    def __init__(self) -> None:
        self._event = trio.Event()
        self._scope: trio.CancelScope | None = None  # the wait in progress

    def set(self) -> None:
        """Wake the waiting task, or the next one to wait."""
        self._event.set()

    def is_set(self) -> bool:
        """Whether the next ``wait()`` will return at once."""
        return self._event.is_set()

    async def wait(self, deadline: float | None = None) -> bool:
        """Return once set or at ``deadline`` (trio's clock; None: no deadline),
        whichever is first; True if it was set.

        Returning re-arms it: a ``set()`` from then on wakes the next wait. Always a
        checkpoint, even when set or past the deadline already.
        """
        try:
            with trio.move_on_at(math.inf if deadline is None else deadline) as self._scope:
                await self._event.wait()
        finally:
            self._scope = None
        if not self._event.is_set():
            return False
        # Swapped, not cleared: trio events cannot be, and nothing else waits on it.
        self._event = trio.Event()
        return True

    def reschedule(self, deadline: float | None) -> None:
        """Move the deadline of the wait in progress, if one is, without waking it
        (None: no deadline); the next wait takes its own."""
        if self._scope is not None:
            self._scope.deadline = math.inf if deadline is None else deadline
