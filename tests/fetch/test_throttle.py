"""The delay that listens to the server: a host's delay against the answers it gave."""

from __future__ import annotations

import math

import pytest

from ubipy.fetch.throttle import SMOOTHING, Pace, ThrottleRules

RULES = ThrottleRules(delay_factor=2.0, max_delay=30.0, backoff_base=1.0)


def _paced(*latencies: float, status: int = 200) -> Pace:
    pace = Pace()
    for latency in latencies:
        pace.heard(latency, status)
    return pace


def test_a_host_not_heard_from_waits_the_floor() -> None:
    assert Pace().delay(RULES, 0.5) == 0.5
    assert Pace().delay(RULES, 0.0) == 0.0


@pytest.mark.parametrize("latency", [0.0, 0.01, 0.1, 0.3, 1.0, 2.5, 7.0])
def test_the_delay_is_the_factor_times_the_response_time_over_the_floor(latency: float) -> None:
    pace = _paced(latency)
    assert pace.delay(RULES, 0.5) == pytest.approx(max(0.5, 2.0 * latency))


def test_the_delay_grows_with_the_response_time() -> None:
    delays = [_paced(latency).delay(RULES, 0.1) for latency in (0.01, 0.1, 0.2, 0.5, 1.0, 3.0)]
    assert delays == sorted(delays)
    assert delays[0] == 0.1 and delays[-1] == pytest.approx(6.0)


def test_the_factor_and_the_floor_a_crawl_delay_raised() -> None:
    # A Crawl-delay of 10 s (the floor) wins over a fast server; a slow one wins over it.
    assert _paced(0.2).delay(RULES, 10.0) == 10.0
    assert _paced(8.0).delay(RULES, 10.0) == pytest.approx(16.0)
    # A floor beyond max_delay is obeyed all the same: max_delay bounds only the pace.
    assert _paced(100.0).delay(RULES, 45.0) == 45.0
    assert _paced(100.0).delay(RULES, 1.0) == 30.0


def test_factor_zero_turns_the_rule_off() -> None:
    off = ThrottleRules(delay_factor=0.0)
    assert _paced(5.0, 5.0, 5.0).delay(off, 0.25) == 0.25


def test_one_slow_answer_moves_the_estimate_only_part_of_the_way() -> None:
    pace = _paced(*[0.1] * 10)
    pace.heard(10.0, 200)
    assert pace.latency == pytest.approx(0.1 + SMOOTHING * 9.9)
    assert pace.delay(RULES, 0.0) < 0.5 * 2.0 * 10.0


def test_a_server_that_turned_slow_is_followed_and_one_that_recovered_too() -> None:
    pace = _paced(*[0.05] * 5)
    fast = pace.delay(RULES, 0.0)
    for _ in range(20):
        pace.heard(2.0, 200)
    assert pace.delay(RULES, 0.0) == pytest.approx(4.0, rel=0.01)
    slow = pace.delay(RULES, 0.0)
    steps = []
    for _ in range(20):
        pace.heard(0.05, 200)
        steps.append(pace.delay(RULES, 0.0))
    # Down at every fast answer, and back to where it was.
    assert all(b < a for a, b in zip([slow, *steps], steps, strict=False))
    assert steps[-1] == pytest.approx(fast, rel=0.05)


def test_a_quick_error_does_not_lower_the_estimate_a_slow_one_raises_it() -> None:
    pace = _paced(1.0)
    pace.heard(0.001, 500)
    pace.heard(0.001, 429)
    assert pace.latency == 1.0
    pace.heard(3.0, 502)
    assert pace.latency == pytest.approx(1.0 + SMOOTHING * 2.0)


def test_no_answer_and_no_wait_changes_nothing() -> None:
    pace = _paced(0.4)
    pace.heard(None, None)  # a refused connection
    pace.heard(None, 200)
    assert (pace.latency, pace.strikes) == (0.4, 0)


def test_a_time_out_is_a_sample_of_the_time_waited_that_only_raises() -> None:
    pace = _paced(9.0)
    pace.heard(10.0, None)  # over a 10 s deadline
    assert pace.latency == pytest.approx(9.0 + SMOOTHING * 1.0)
    pace.heard(0.5, None)  # cut short by a shorter --timeout: no sign of speed
    assert pace.latency == pytest.approx(9.0 + SMOOTHING * 1.0)
    first = Pace()
    first.heard(10.0, None)
    assert first.latency == 10.0 and first.delay(RULES, 0.0) == 20.0


def test_a_time_out_neither_adds_nor_ends_a_run_of_strikes() -> None:
    pace = _paced(0.1, status=503)
    pace.heard(10.0, None)
    assert pace.strikes == 1


@pytest.mark.parametrize("status", [503, 429])
def test_503_and_429_without_retry_after_double_the_wait(status: int) -> None:
    pace = _paced(0.01)
    waits = []
    for _ in range(8):
        pace.heard(0.01, status)
        waits.append(pace.delay(RULES, 0.5))
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert pace.strikes == 8


def test_the_backoff_starts_from_the_hosts_delay_when_that_is_longer() -> None:
    pace = _paced(3.0)  # delay 6 s from its pace
    pace.heard(3.0, 503)
    assert pace.delay(RULES, 0.5) == pytest.approx(6.0)
    pace.heard(3.0, 503)
    assert pace.delay(RULES, 0.5) == pytest.approx(12.0)


def test_a_success_ends_the_backoff_the_delay_comes_back_down() -> None:
    pace = _paced(0.1)
    for _ in range(4):
        pace.heard(0.1, 503)
    assert pace.delay(RULES, 0.5) == 8.0
    pace.heard(0.1, 200)
    assert pace.strikes == 0
    assert pace.delay(RULES, 0.5) == 0.5
    # A 404 or a redirect is an answer too; another 5xx neither adds nor ends a strike.
    pace.heard(0.1, 503)
    pace.heard(0.1, 500)
    assert pace.strikes == 1
    pace.heard(0.1, 404)
    assert pace.strikes == 0


def test_a_long_retry_after_is_the_callers_and_is_no_strike() -> None:
    pace = _paced(0.1)
    pace.heard(0.1, 503, asked=60.0, rules=RULES)
    pace.heard(0.1, 429, asked=60.0, rules=RULES)
    assert pace.strikes == 0
    pace.heard(0.1, 503, rules=RULES)
    pace.heard(0.1, 503, asked=60.0, rules=RULES)  # neither adds nor ends the run
    assert pace.strikes == 1


def test_a_retry_after_no_longer_than_the_back_off_is_a_strike() -> None:
    # "Retry-After: 0" or a date already past: obeyed, it would turn the back-off off.
    pace = _paced(0.1)
    for _ in range(3):
        pace.heard(0.1, 503, asked=0.0, rules=RULES)
    assert pace.strikes == 3
    pace.heard(0.1, 429, asked=8.0, rules=RULES)  # what the fourth strike gives: 1 s · 2³
    assert pace.strikes == 4
    pace.heard(0.1, 429, asked=16.5, rules=RULES)  # more than the fifth's 16 s
    assert pace.strikes == 4


def test_a_long_run_of_strikes_stays_finite() -> None:
    pace = _paced(0.1)
    for _ in range(5000):
        pace.heard(0.1, 503)
    assert pace.delay(RULES, 0.0) == 30.0
    unbounded = ThrottleRules(max_delay=math.inf, backoff_base=1.0)
    assert math.isfinite(pace.delay(unbounded, 0.0))


@pytest.mark.parametrize("field", ["delay_factor", "max_delay", "backoff_base"])
@pytest.mark.parametrize("value", [-1.0, math.nan])
def test_rules_refuse_negative_or_nan(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        ThrottleRules(**{field: value})
