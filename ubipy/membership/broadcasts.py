"""The rumours a member still has to spread: memberlist's transmit-limited queue.

One rumour per member (a newer one makes the older worthless); each message takes
the least-sent first, then the newest, as many as fit its byte budget, and a rumour
is dropped once sent its retransmit limit of times. A heap keeps a message's pick
at O(k log n) however many rumours wait (a thousand at once while a large cluster
forms). No I/O, as in :mod:`ubipy.membership.machine`.
"""

from __future__ import annotations

import heapq

from ubipy.membership.messages import Update


def encoded_size(update: Update) -> int:
    """An upper bound of an update's encoded size: its three strings plus CBOR's
    headers and a 64-bit incarnation. No codec here (the wire package owns it)."""
    return len(update.member_id) + len(update.address) + len(update.source) + 20


class Broadcasts:
    def __init__(self) -> None:
        # member id -> (its rumour, its order): the one rumour to spread about it.
        self._current: dict[str, tuple[Update, int]] = {}
        # (transmits, -order, member id): entries whose order is no longer the
        # member's current one are stale and skipped when they come up.
        self._heap: list[tuple[int, int, str]] = []
        self._order = 0

    def __bool__(self) -> bool:
        return bool(self._current)

    def __contains__(self, member_id: str) -> bool:
        return member_id in self._current

    def enqueue(self, update: Update) -> None:
        self._order += 1
        self._current[update.member_id] = (update, self._order)
        heapq.heappush(self._heap, (0, -self._order, update.member_id))
        if len(self._heap) > 4 * len(self._current) + 64:
            self._compact()

    def take(self, limit: int, retransmits: int, budget: int) -> tuple[Update, ...]:
        """Up to ``limit`` rumours of at most ``budget`` bytes in all for the next
        message, each counted as sent once."""
        chosen: list[tuple[int, int, str, Update]] = []
        heap, current = self._heap, self._current
        while heap and len(chosen) < limit:
            transmits, neg_order, member_id = heap[0]
            entry = current.get(member_id)
            if entry is None or entry[1] != -neg_order:
                heapq.heappop(heap)
                continue  # replaced by a newer rumour, or dropped
            size = encoded_size(entry[0])
            if size > budget:
                break  # the next message takes it first
            budget -= size
            heapq.heappop(heap)
            chosen.append((transmits, neg_order, member_id, entry[0]))
        for transmits, neg_order, member_id, _ in chosen:
            if transmits + 1 >= retransmits:
                del current[member_id]
            else:
                heapq.heappush(heap, (transmits + 1, neg_order, member_id))
        return tuple(update for *_, update in chosen)

    def _compact(self) -> None:
        live = {(mid, order) for mid, (_, order) in self._current.items()}
        self._heap = [e for e in self._heap if (e[2], -e[1]) in live]
        heapq.heapify(self._heap)
