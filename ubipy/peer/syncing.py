"""What this peer tells another it holds is on disk first: a group sync of the shard.

An acknowledgement lets its receiver drop its own copy: a batch's URLs leave the
sender's outbox, a host handed off leaves the old owner's shard, a replica's sender
stops sending it. The shard's commits survive a kill of the process but not of the
machine (``synchronous=NORMAL``: see :meth:`ubipy.store.Shard.sync`), so before any of
those acknowledgements goes, the shard is synced. One sync serves every acknowledgement
waiting when it starts, as a database's group commit does, and it runs in a worker
thread, not on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable

import trio

__all__ = ["GroupSync"]


class GroupSync:
    """``sync``: puts everything committed so far on disk (blocking; raises
    StorageError when the disk refuses); ``inline``: run it on the event loop, not in
    a worker thread; ``changes``: a count of the writes made so far (the shard's),
    which a sync finds on disk once it has begun after them: then none is needed."""

    __slots__ = ("_changes", "_clean", "_done", "_inline", "_running", "_started", "_sync", "syncs")

    def __init__(
        self,
        sync: Callable[[], None],
        *,
        inline: bool = False,
        changes: Callable[[], int] | None = None,
    ) -> None:
        self._sync = sync
        self._inline = inline
        self._changes = changes
        # The count when the last sync that succeeded began (-1: none did).
        self._clean = -1
        # Syncs started and completed, numbered: a caller needs one that started
        # after it asked, since one already running may have missed its commit.
        self._started = 0
        self._done = 0
        self._running: trio.Event | None = None
        self.syncs = 0

    async def synced(self) -> None:
        """Return once everything committed before the call is on disk; raises
        StorageError when the sync failed (then nothing may be acknowledged)."""
        if self._changes is not None and self._changes() == self._clean:
            # Nothing written since a sync began: a hand-off of many hosts between
            # two commits asks once for them all.
            return
        needed = self._started + 1
        while self._done < needed:
            running = self._running
            if running is not None:
                await running.wait()
                continue
            self._started += 1
            number = self._started
            running = self._running = trio.Event()
            at = -1 if self._changes is None else self._changes()
            try:
                if self._inline:
                    self._sync()
                else:
                    await trio.to_thread.run_sync(self._sync)
                self._done = number
                self._clean = at
                self.syncs += 1
            finally:
                self._running = None
                running.set()
