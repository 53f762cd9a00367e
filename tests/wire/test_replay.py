"""The replay guard: each (sender, epoch, seq) is admitted once, while it is fresh, and
what it remembers stays bounded."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ubipy.wire import Frame, FrameType, RejectReason, ReplayGuard

NOW = 1_700_000_000.0
FUZZ = settings(max_examples=200, deadline=None)


def admit(guard: ReplayGuard, seq: int, *, epoch: int = 1, sent_at: float = NOW,
          now: float = NOW, sender: str = "alice") -> RejectReason | None:  # fmt: skip
    frame = Frame(FrameType.SEED, sender, "", epoch, seq, sent_at, None)
    verdict = guard.admit(frame, now)
    return None if verdict is None else verdict.reason


def test_guard_window_edges() -> None:
    guard = ReplayGuard(window=8)
    assert admit(guard, 100) is None
    assert admit(guard, 100) is RejectReason.REPLAY
    assert admit(guard, 93) is None  # offset 7: the oldest number still in the window
    assert admit(guard, 93) is RejectReason.REPLAY
    assert admit(guard, 92) is RejectReason.REPLAY  # offset 8: outside
    assert admit(guard, 101) is None  # slides by one: 93 is now outside
    assert admit(guard, 94) is None
    assert admit(guard, 93) is RejectReason.REPLAY
    assert admit(guard, 109) is None  # a jump of exactly the window clears it
    assert admit(guard, 101) is RejectReason.REPLAY
    assert admit(guard, 102) is None
    assert admit(guard, 2**63 - 1) is None  # a huge jump costs nothing
    assert admit(guard, 2**63 - 2) is None
    assert admit(guard, 2**63 - 1) is RejectReason.REPLAY
    assert admit(guard, 0) is RejectReason.REPLAY
    assert admit(guard, 0, epoch=2) is None


def test_guard_out_of_order_within_the_window() -> None:
    guard = ReplayGuard(window=64)
    order = [5, 3, 9, 4, 0, 8, 1, 2, 7, 6]
    assert [admit(guard, s) for s in order] == [None] * 10
    assert [admit(guard, s) for s in order] == [RejectReason.REPLAY] * 10


class Monotonic:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_guard_forgets_quiet_epochs_so_memory_stays_bounded() -> None:
    clock = Monotonic()
    guard = ReplayGuard(max_skew=10, clock=clock)
    peak = 0
    for i in range(2000):
        now = NOW + i  # a new epoch every second, e.g. a peer restarting in a loop
        clock.now = i
        assert admit(guard, 0, epoch=i, sent_at=now, now=now) is None
        peak = max(peak, len(guard))
    # About 2.5 * max_skew seconds of epochs at most, not 2000.
    assert peak <= 26
    clock.now += 10_000
    guard.prune(NOW + 10_000)
    assert len(guard) == 0


def test_pruning_never_reopens_a_replay() -> None:
    clock = Monotonic()
    guard = ReplayGuard(max_skew=10, clock=clock)
    sent = NOW + 10  # from a clock running 10 s ahead: the worst case
    assert admit(guard, 0, sent_at=sent, now=NOW) is None
    for later in (NOW + 5, NOW + 15, NOW + 20, NOW + 20.5, NOW + 100):
        clock.now = later - NOW
        guard.prune(later)
        assert admit(guard, 0, sent_at=sent, now=later) in (
            RejectReason.REPLAY,
            RejectReason.STALE,
        )


def test_a_wall_clock_step_forward_and_back_reopens_no_replay() -> None:
    """Pruning went by the wall clock: stepped two minutes ahead (a frame came, from
    anyone), it forgot every window; stepped back, their frames were fresh again."""
    guard = ReplayGuard(max_skew=10)
    assert admit(guard, 0) is None
    assert admit(guard, 0, sender="bob", sent_at=NOW + 120, now=NOW + 120) is None
    guard.prune(NOW + 120)
    assert admit(guard, 0, now=NOW + 1) is RejectReason.REPLAY
    assert len(guard) == 2


def test_a_window_is_forgotten_only_once_quiet_by_both_clocks() -> None:
    clock = Monotonic()
    guard = ReplayGuard(max_skew=10, clock=clock)
    assert admit(guard, 0) is None
    clock.now = 25.0  # quiet for 2.5 * max_skew...
    assert guard.prune(NOW - 30) == 0  # ...but the wall clock went back: still fresh
    assert guard.prune(NOW + 11) == 1


@FUZZ
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # epoch
            st.integers(0, 40),  # seq
            st.floats(-15, 15),  # sent_at - now
            st.floats(0, 8),  # time passing
        ),
        max_size=80,
    )
)
def test_guard_never_admits_a_frame_twice(ops: list[tuple[int, int, float, float]]) -> None:
    # A frame is its (epoch, seq): the first time one is drawn fixes its sent_at, and
    # drawing it again is a replay of those very bytes (a forger cannot change them).
    guard = ReplayGuard(max_skew=10, window=16)
    sent: dict[tuple[int, int], float] = {}
    admitted: set[tuple[int, int]] = set()
    now = NOW
    for epoch, seq, skew, step in ops:
        now += step
        sent_at = sent.setdefault((epoch, seq), now + skew)
        if admit(guard, seq, epoch=epoch, sent_at=sent_at, now=now) is None:
            assert (epoch, seq) not in admitted
            assert abs(sent_at - now) <= 10
            admitted.add((epoch, seq))


def test_guard_argument_checks() -> None:
    for kwargs in ({"max_skew": 0}, {"max_skew": math.nan}, {"window": 0}):
        with pytest.raises(ValueError):
            ReplayGuard(**kwargs)
