"""The rumour queue: a heap that picks exactly what memberlist's "least sent first,
then newest" rule picks, within a message's byte budget, however rumours replace
each other."""

from __future__ import annotations

import heapq
import random

import pytest

from ubipy.membership import MemberState, Update
from ubipy.membership.broadcasts import Broadcasts, encoded_size


class Reference:
    """The rule written plainly: the k smallest (transmits, -order) each time."""

    def __init__(self) -> None:
        self.queue: dict[str, list[object]] = {}  # id -> [update, order, transmits]
        self.order = 0

    def enqueue(self, update: Update) -> None:
        self.order += 1
        self.queue[update.member_id] = [update, self.order, 0]

    def take(self, limit: int, retransmits: int, budget: int) -> tuple[Update, ...]:
        ranked = heapq.nsmallest(
            limit,
            self.queue.values(),
            key=lambda e: (e[2], -e[1]),  # type: ignore[operator]
        )
        chosen = []
        for e in ranked:
            budget -= encoded_size(e[0])  # type: ignore[arg-type]
            if budget < 0:
                break  # the rest waits for the next message, in the same order
            chosen.append(e)
        for e in chosen:
            e[2] += 1  # type: ignore[operator]
            if e[2] >= retransmits:  # type: ignore[operator]
                del self.queue[e[0].member_id]  # type: ignore[attr-defined]
        return tuple(e[0] for e in chosen)  # type: ignore[misc]


@pytest.mark.parametrize("seed", range(20))
def test_the_heap_picks_what_the_rule_picks(seed: int) -> None:
    rng = random.Random(seed)
    heap, plain = Broadcasts(), Reference()
    # Ids of different lengths, so that the byte budget cuts at different counts.
    members = [f"m{i}" * rng.randint(1, 20) for i in range(rng.randint(1, 40))]
    for step in range(2000):
        if rng.random() < 0.4:
            update = Update(rng.choice(members), "a:1", MemberState.ALIVE, step, "x")
            heap.enqueue(update)
            plain.enqueue(update)
        else:
            limit, retransmits = rng.randint(0, 8), rng.randint(1, 6)
            budget = rng.randint(0, 400)
            assert heap.take(limit, retransmits, budget) == plain.take(limit, retransmits, budget)
        assert bool(heap) == bool(plain.queue)
        assert all((m in heap) == (m in plain.queue) for m in members)


def test_rumours_replaced_many_times_do_not_pile_up() -> None:
    queue = Broadcasts()
    for incarnation in range(1000):
        queue.enqueue(Update("m", "a:1", MemberState.ALIVE, incarnation, "m"))
    assert len(queue._heap) <= 4 + 64 + 1
    [latest] = queue.take(8, 4, 1100)
    assert latest.incarnation == 999


def test_a_message_takes_as_many_rumours_as_fit_its_budget() -> None:
    queue = Broadcasts()
    for i in range(40):
        queue.enqueue(Update(f"{i:016x}", "10.0.0.1:7070", MemberState.ALIVE, 1, f"{i:016x}"))
    size = encoded_size(Update("0" * 16, "10.0.0.1:7070", MemberState.ALIVE, 1, "0" * 16))
    taken = queue.take(32, 4, 1100)
    assert len(taken) == 1100 // size
    assert [u.member_id for u in taken] == [f"{i:016x}" for i in range(39, 39 - len(taken), -1)]
