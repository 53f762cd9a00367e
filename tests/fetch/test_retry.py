"""Which failures are retried and how long a host is asked to wait."""

from __future__ import annotations

import email.utils

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ubipy.fetch.fetcher import FetchOutcome, FetchResult, failed
from ubipy.fetch.retry import asked_wait, is_retryable, retry_after
from ubipy.fetch.scope import path_repeats, path_trap

NOW = 1_800_000_000.0


def _result(status: int, retry_after: str | None = None) -> FetchResult:
    return FetchResult(
        url="http://a.test/",
        status=status,
        content_type=None,
        charset=None,
        location=None,
        last_modified=None,
        etag=None,
        retry_after=retry_after,
        body=b"",
        truncated=False,
        outcome=FetchOutcome.OK,
        detail=None,
    )


@pytest.mark.parametrize(("status", "retry"), [(200, False), (404, False), (301, False),
                                               (429, True), (500, True), (503, True),
                                               (504, True), (501, False)])  # fmt: skip
def test_statuses_that_mean_try_later(status: int, retry: bool) -> None:
    assert is_retryable(_result(status)) is retry


@pytest.mark.parametrize(
    ("outcome", "retry"),
    [
        (FetchOutcome.TIMEOUT, True),
        (FetchOutcome.CONNECT_ERROR, True),
        (FetchOutcome.NETWORK_ERROR, True),
        (FetchOutcome.PROTOCOL_ERROR, True),
        # The page came and broke the parser: asking again brings the same page.
        (FetchOutcome.PROCESSING_FAILED, False),
    ],
)
def test_network_failures_are_retried(outcome: FetchOutcome, retry: bool) -> None:
    assert is_retryable(failed("http://a.test/", outcome, "what happened")) is retry


def test_retry_after_in_seconds_and_as_an_http_date() -> None:
    assert retry_after("120", NOW) == 120.0
    assert retry_after(" 7 ", NOW) == 7.0
    date = email.utils.formatdate(NOW + 30, usegmt=True)
    assert retry_after(date, NOW) == pytest.approx(30.0)
    # A date in the past means "now", never a negative wait.
    assert retry_after(email.utils.formatdate(NOW - 30, usegmt=True), NOW) == 0.0
    zoneless = email.utils.formatdate(NOW + 10).replace("+0000", "-0000")
    assert retry_after(zoneless, NOW) == pytest.approx(10.0)


def test_a_retry_after_sent_twice_asks_for_its_longest_wait() -> None:
    # Repeated headers come joined with ", " (fetcher._fields, as httpx2's get()).
    assert retry_after("120, 120", NOW) == 120.0
    assert retry_after("5, 10", NOW) == 10.0
    assert retry_after("soon, 30", NOW) == 30.0
    in_40 = email.utils.formatdate(NOW + 40, usegmt=True)  # "Wed, 21 Oct …": a comma
    assert retry_after(in_40, NOW) == pytest.approx(40.0)
    assert retry_after(f"{in_40}, 20", NOW) == pytest.approx(40.0)
    assert retry_after(f"20, {in_40}", NOW) == pytest.approx(40.0)
    assert retry_after("abc, def", NOW) is None


@pytest.mark.parametrize(("status", "wait"), [(429, 120.0), (503, 120.0), (500, None), (200, None)])
def test_only_a_429_or_a_503_asks_the_host_be_left_alone(status: int, wait: float | None) -> None:
    assert asked_wait(_result(status, "120"), NOW) == wait
    assert asked_wait(_result(status), NOW) is None


@pytest.mark.parametrize("value", [None, "", "soon", "-5", "1.5", "Mon, 99 Foo 2026"])
def test_unreadable_retry_after_is_ignored(value: str | None) -> None:
    assert retry_after(value, NOW) is None


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "\uff11\uff12", "1\u00b2"])
def test_a_digit_that_is_not_ascii_is_no_delta_seconds(value: str) -> None:
    # "²" is what httpx2 makes of the Latin-1 byte 0xb2; int() refused it and the
    # ValueError killed the crawler.
    assert retry_after(value, NOW) is None
    assert asked_wait(_result(503, value), NOW, cap=600.0) is None


@pytest.mark.parametrize("value", ["1" + "0" * 400, "9" * 5000, "0" * 30 + "9" * 30])
def test_an_endless_retry_after_is_a_long_wait_cut_to_the_cap(value: str) -> None:
    # float() of 400 digits overflowed and int() of 5,000 raised: either killed the peer.
    assert retry_after(value, NOW) == 1e15
    assert asked_wait(_result(429, value), NOW, cap=600.0) == 600.0
    # Leading zeros are no length: this is five seconds.
    assert retry_after("0" * 40 + "5", NOW) == 5.0


@pytest.mark.parametrize(
    ("url", "repeats"),
    [
        ("http://a.test/", 0),
        ("http://a.test/x", 1),
        ("http://a.test/a/b/c/d", 1),
        ("http://a.test/a/b/a/b/a/b/", 3),
        ("http://a.test/deep/a/a/a/a/", 4),
        ("http://a.test/p?q=/a/a/a/a/a", 1),
        ("http://a.test/a/a#/a/a/a", 2),
    ],
)
def test_path_repeats_counts_the_most_repeated_segment(url: str, repeats: int) -> None:
    assert path_repeats(url) == repeats
    # A trap is a path that repeats a segment more than the limit, whatever shortcut
    # path_trap takes.
    for limit in range(6):
        assert path_trap(url, limit) == (repeats > limit)


@given(
    segments=st.lists(st.sampled_from(["a", "b", "", "a?q=", "#a"]), max_size=9),
    limit=st.integers(0, 6),
)
def test_path_trap_agrees_with_counting(segments: list[str], limit: int) -> None:
    url = "http://a.test/" + "/".join(segments)
    assert path_trap(url, limit) == (path_repeats(url) > limit)
