"""The rumours a member still has to spread: memberlist's transmit-limited queue.

One rumour per member (a newer one makes the older worthless); each message takes
the least-sent first, then the newest, and a rumour is dropped once sent its
retransmit limit of times. No I/O, as in :mod:`ubipy.membership.machine`.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from ubipy.membership.messages import Update


@dataclass(slots=True)
class _Broadcast:
    update: Update
    order: int
    transmits: int = 0


class Broadcasts:
    def __init__(self) -> None:
        self._queue: dict[str, _Broadcast] = {}
        self._order = 0

    def __bool__(self) -> bool:
        return bool(self._queue)

    def __contains__(self, member_id: str) -> bool:
        return member_id in self._queue

    def enqueue(self, update: Update) -> None:
        self._order += 1
        self._queue[update.member_id] = _Broadcast(update, self._order)

    def take(self, limit: int, retransmits: int) -> tuple[Update, ...]:
        """Up to ``limit`` rumours for the next message, each counted as sent once."""
        if limit <= 0 or not self._queue:
            return ()
        chosen = heapq.nsmallest(limit, self._queue.values(), key=lambda b: (b.transmits, -b.order))
        for b in chosen:
            b.transmits += 1
            if b.transmits >= retransmits:
                del self._queue[b.update.member_id]
        return tuple(b.update for b in chosen)
