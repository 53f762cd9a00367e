"""Push-pull pacing: memberlist's scale for the interval, and a reply budget above 32
members so that luck cannot make one member answer table after table."""

from __future__ import annotations

from ubipy.membership.pacing import PushPullPacing


def test_the_period_grows_with_log2_n_above_32_members() -> None:
    pacing = PushPullPacing(30.0)
    assert pacing.period(4) == pacing.period(32) == 30.0
    assert pacing.period(64) == 60.0
    assert pacing.period(1000) == 180.0


def test_small_clusters_answer_every_routine_request() -> None:
    pacing = PushPullPacing(30.0)
    assert all(pacing.may_answer_routine(t * 0.1, 8) for t in range(100))


def test_large_clusters_answer_one_routine_request_per_period() -> None:
    pacing = PushPullPacing(30.0)
    answered = [t for t in range(0, 600) if pacing.may_answer_routine(float(t), 1000)]
    assert answered == list(range(0, 600, 180))
