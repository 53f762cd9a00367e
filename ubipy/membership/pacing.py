"""How often a member exchanges its whole table (push-pull), and how often it answers
one, as a pure class (no I/O, no clock: ``now`` is passed in).

Above 32 members a member sends at most one routine table per period, its own
request or a reply, whichever comes first: at N = 1000 a table is ~35 KB, and
two in one minute alone are over 1 KB/s. Anti-entropy keeps its rate (every table
still goes out once a period), only no member pays for it twice."""

from __future__ import annotations

import math

# Up to this many live members, push-pull keeps its configured interval and every
# request is answered; above it a table is tens of KB and both are paced.
SMALL_CLUSTER = 32


class PushPullPacing:
    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last_table = -math.inf  # the last routine table sent, ours or a reply

    def period(self, live: int) -> float:
        """memberlist's pushPullScale: above 32 members, back off with log2 N so the
        cluster's total push-pull load grows slower than N."""
        if live <= SMALL_CLUSTER:
            return self.interval
        return self.interval * (math.ceil(math.log2(live) - math.log2(SMALL_CLUSTER)) + 1)

    def may_answer_routine(self, now: float, live: int) -> bool:
        """Whether to answer a live member's periodic request now. Being picked by
        several members in a row is luck that made one member send 3 KB/s at N = 1000;
        so above 32 members a member sends one routine table per period (the asker's
        table is taken in either way, and it learns ours from whoever it picks next
        time). Joins and reconnects are always answered."""
        return self._may_send(now, live)

    def next_request(self, now: float, live: int) -> float | None:
        """None: send our periodic request now (counted); else when to ask again,
        because a reply already carried our table this period."""
        if self._may_send(now, live):
            return None
        return self._last_table + self.period(live)

    def _may_send(self, now: float, live: int) -> bool:
        if live <= SMALL_CLUSTER:
            return True
        # Compared as next_request computes the time it gives: ``now - last < period``
        # can hold at ``now == last + period`` (rounding), and a member woken at that
        # time would be told the same time again, for ever (a thousand-member simulation
        # stopped advancing after its sixth crash).
        if now < self._last_table + self.period(live):
            return False
        self._last_table = now
        return True
