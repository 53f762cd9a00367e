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


def test_a_reply_counts_as_the_periods_table_in_large_clusters() -> None:
    pacing = PushPullPacing(30.0)
    assert pacing.may_answer_routine(10.0, 1000)
    # Our own request comes due 50 s later: the reply carried our table already.
    assert pacing.next_request(60.0, 1000) == 190.0
    assert pacing.next_request(190.0, 1000) is None
    assert not pacing.may_answer_routine(200.0, 1000)


def test_small_clusters_send_their_own_request_every_interval() -> None:
    pacing = PushPullPacing(30.0)
    assert pacing.may_answer_routine(10.0, 8)
    assert pacing.next_request(11.0, 8) is None


def test_woken_at_the_time_it_gave_a_member_sends_its_request() -> None:
    # 675.4350870919409 - 495.43508709194094 < 180 in floating point, though the one is
    # the other plus 180: told "ask again at 675.435...", a member woken then must ask,
    # not be told the same time again (a simulation of a thousand members spun there).
    pacing = PushPullPacing(30.0)
    assert pacing.may_answer_routine(495.43508709194094, 1000)
    again = pacing.next_request(600.0, 1000)
    assert again == 675.4350870919409
    assert pacing.next_request(again, 1000) is None
