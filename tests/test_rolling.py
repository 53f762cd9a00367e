"""The rolling rate shared by the progress line and the control centre."""

from __future__ import annotations

import pytest

from ubipy.rolling import RollingRate


def test_no_rate_until_the_readings_span_some_time() -> None:
    r = RollingRate(5.0)
    assert r.rate() is None and r.last is None
    r.add(1.0, 10)
    assert r.rate() is None and r.last == (1.0, 10)
    r.add(1.0, 12)  # the same moment again
    assert r.rate() is None


def test_the_rate_covers_the_window_and_the_reading_that_spans_it() -> None:
    r = RollingRate(5.0)
    for t in range(11):
        r.add(float(t), 100 * t)  # 100 a second
    r.add(12.0, 1_100)  # then 50 a second
    # Over t=7..12 (the reading at 7 is the one that spans the window): 400 in 5.
    assert r.rate() == pytest.approx((1_100 - 700) / 5)
    r.add(12.5, 1_125)
    # t=7 still spans the window ending at 12.5 (t=8 does not): the count at 7.5 is
    # read between them, 750.
    assert r.rate() == pytest.approx((1_125 - 750) / 5)


def test_a_gap_in_the_readings_is_not_counted_into_the_rate() -> None:
    # A peer stopped for 15 s (SIGSTOP), then fetching again: the rate is the window's
    # 20 pages in 5 s, not 20 over the 17 s since the reading before the stop.
    r = RollingRate(5.0)
    for t in range(11):
        r.add(float(t), 20 * t)
    r.add(26.0, 200)  # back: nothing was fetched while stopped
    r.add(27.0, 220)
    assert r.rate() == pytest.approx(20 / 5)
