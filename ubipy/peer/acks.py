"""Acknowledgements of forwarded batches, held back a little so they can ride on the
next batch going the other way.

Every peer forwards to every other, so a batch from B is usually followed, within a
linger, by a batch to B: its acknowledgement goes in that batch's ``acks`` field and
costs no frame of its own. An acknowledgement that has waited ``patience`` seconds
(well under the sender's retry time) leaves alone, in a URL_ACK frame, with any
others owed to the same peer. No I/O here: the peer feeds it and sends what it says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(slots=True)
class _Owed:
    since: float
    ids: list[int] = field(default_factory=list)


class AckBook:
    """``patience`` is given with each question: it follows the ring (a linger)."""

    def __init__(self) -> None:
        self._owed: dict[str, _Owed] = {}

    def add(self, peer_id: str, batch_id: int, now: float) -> None:
        """``peer_id``'s batch ``batch_id`` is durably admitted here."""
        owed = self._owed.get(peer_id)
        if owed is None:
            owed = self._owed[peer_id] = _Owed(now)
        owed.ids.append(batch_id)

    def take(self, peer_id: str) -> list[int]:
        """What is owed to ``peer_id``, to ride on a frame going there now."""
        owed = self._owed.pop(peer_id, None)
        return [] if owed is None else owed.ids

    def due(self, now: float, patience: float) -> list[tuple[str, list[int]]]:
        """What has waited ``patience`` seconds and must go on its own."""
        late = [peer for peer, owed in self._owed.items() if owed.since + patience <= now]
        return [(peer, self._owed.pop(peer).ids) for peer in late]

    def next_deadline(self, patience: float) -> float:
        return min((o.since + patience for o in self._owed.values()), default=math.inf)

    def __len__(self) -> int:
        return sum(len(o.ids) for o in self._owed.values())
