"""How often a member exchanges its whole table (push-pull), and how often it answers
one, as a pure class (no I/O, no clock: ``now`` is passed in)."""

from __future__ import annotations

import math

# Up to this many live members, push-pull keeps its configured interval and every
# request is answered; above it a table is tens of KB and both are paced.
SMALL_CLUSTER = 32


class PushPullPacing:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last_reply = -math.inf  # the last routine request answered

    def period(self, live: int) -> float:
        """memberlist's pushPullScale: above 32 members, back off with log2 N so the
        cluster's total push-pull load grows slower than N."""
        if live <= SMALL_CLUSTER:
            return self.interval
        return self.interval * (math.ceil(math.log2(live) - math.log2(SMALL_CLUSTER)) + 1)

    def may_answer_routine(self, now: float, live: int) -> bool:
        """Whether to answer a live member's periodic request now. Being picked by
        several members in a row is luck that made one member send 3 KB/s at N = 1000;
        so above 32 members one is answered at most once per period, as often as the
        member asks itself (the asker's table is taken in either way, and it learns
        ours from whoever it picks next time). Joins and reconnects are always
        answered."""
        if live <= SMALL_CLUSTER:
            return True
        if now - self._last_reply < self.period(live):
            return False
        self._last_reply = now
        return True
