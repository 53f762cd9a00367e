"""The rumour queue: a heap that picks exactly what memberlist's "least sent first,
then newest" rule picks, however rumours replace each other."""

from __future__ import annotations

import heapq
import random

import pytest

from ubipy.membership import MemberState, Update
from ubipy.membership.broadcasts import Broadcasts


class Reference:
    """The rule written plainly: the k smallest (transmits, -order) each time."""

    def __init__(self) -> None:
        self.queue: dict[str, list[object]] = {}  # id -> [update, order, transmits]
        self.order = 0

    def enqueue(self, update: Update) -> None:
        self.order += 1
        self.queue[update.member_id] = [update, self.order, 0]

    def take(self, limit: int, retransmits: int) -> tuple[Update, ...]:
        chosen = heapq.nsmallest(
            limit,
            self.queue.values(),
            key=lambda e: (e[2], -e[1]),  # type: ignore[operator]
        )
        for e in chosen:
            e[2] += 1  # type: ignore[operator]
            if e[2] >= retransmits:  # type: ignore[operator]
                del self.queue[e[0].member_id]  # type: ignore[attr-defined]
        return tuple(e[0] for e in chosen)  # type: ignore[misc]


@pytest.mark.parametrize("seed", range(20))
def test_the_heap_picks_what_the_rule_picks(seed: int) -> None:
    rng = random.Random(seed)
    heap, plain = Broadcasts(), Reference()
    members = [f"m{i}" for i in range(rng.randint(1, 40))]
    for step in range(2000):
        if rng.random() < 0.4:
            update = Update(rng.choice(members), "a:1", MemberState.ALIVE, step, "x")
            heap.enqueue(update)
            plain.enqueue(update)
        else:
            limit, retransmits = rng.randint(0, 8), rng.randint(1, 6)
            assert heap.take(limit, retransmits) == plain.take(limit, retransmits)
        assert bool(heap) == bool(plain.queue)
        assert all((m in heap) == (m in plain.queue) for m in members)


def test_rumours_replaced_many_times_do_not_pile_up() -> None:
    queue = Broadcasts()
    for incarnation in range(1000):
        queue.enqueue(Update("m", "a:1", MemberState.ALIVE, incarnation, "m"))
    assert len(queue._heap) <= 4 + 64 + 1
    [latest] = queue.take(8, 4)
    assert latest.incarnation == 999
