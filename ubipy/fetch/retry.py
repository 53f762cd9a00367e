"""When a failed request is worth another try, and how long the host waits first."""

from __future__ import annotations

import datetime
import email.utils
import logging
import math
import re

from ubipy.fetch.fetcher import FetchOutcome, FetchResult

log = logging.getLogger(__name__)

# delta-seconds is ASCII digits only: str.isdigit() also takes "²" or "٣", which int()
# refuses or reads as another number.
_DELTA_SECONDS = re.compile(r"[0-9]+")
# More digits than this (30 million years) is only "a very long time": reading it as
# this many seconds lets the caller's cap apply, where int() of 4,300 digits raises and
# float() of 400 overflows.
_LONGEST_DELTA = 15

# Statuses that say "not now" rather than "no": the server may answer later.
RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})
# Statuses whose Retry-After is a request to leave the host alone for a while.
WAIT_STATUSES = frozenset({429, 503})
# Failures of the network or of the server at that moment: another try may go through.
# Not a certificate that did not verify (FetchOutcome.CERTIFICATE_ERROR): it stays bad.
RETRYABLE_OUTCOMES = frozenset(
    {
        FetchOutcome.TIMEOUT,
        FetchOutcome.CONNECT_ERROR,
        FetchOutcome.NETWORK_ERROR,
        FetchOutcome.PROTOCOL_ERROR,
    }
)


# A host's first strikes in a row (throttle.py: 503s and 429s without a Retry-After,
# which the host's back-off answers) spend no retry of the URL asked: the server is
# unavailable, not the page. A seed answered 503 for 6 s at a deploy was given up after
# its 2 retries (2 and 4 s apart), and the whole site with it (QA). With the default
# back-off (2 s doubling to 30) these strikes span about 3.5 minutes; an outage longer
# than that spends the retries as before.
FREE_STRIKES = 10


def spends_a_retry(result: FetchResult, strikes: int, free: int) -> bool:
    """Whether another try after ``result`` spends one of the URL's retries, the host's
    run of strikes being ``strikes`` (this answer's included) and ``free`` the URL's
    tries that spent none so far: at most FREE_STRIKES in all (a host whose run
    starts again and again, its pace shared with hosts that answer, would give a URL
    that always fails tries without end: a review)."""
    if free >= FREE_STRIKES or result.status not in WAIT_STATUSES:
        return True
    return not 0 < strikes <= FREE_STRIKES


def is_retryable(result: FetchResult) -> bool:
    """A network failure, a time-out or a "try later" status."""
    if result.ok:
        return result.status in RETRYABLE_STATUSES
    return result.outcome in RETRYABLE_OUTCOMES


def made_no_connection(result: FetchResult) -> bool:
    """Whether the request made no connection (refused, a TLS handshake that failed):
    the scheme's port failed, and the host's other scheme may answer (backoffs.py)."""
    return result.outcome is FetchOutcome.CONNECT_ERROR


def asked_wait(
    result: FetchResult, now_wall: float, *, cap: float = math.inf, host: str = ""
) -> float | None:
    """Seconds the server asked the host be left alone: a Retry-After on a 429 or a 503,
    at most ``cap`` (a longer wait is cut, and the cut logged for ``host``)."""
    if not result.retry_after or result.status not in WAIT_STATUSES:
        return None
    asked = retry_after(result.retry_after, now_wall)
    if asked is not None and asked > cap:
        log.warning("%s asked for %.0f s of quiet; granted %.0f", host, asked, cap)
        return cap
    return asked


def retry_after(value: str | None, now_wall: float) -> float | None:
    """Seconds asked for by a ``Retry-After`` header (delta-seconds or an HTTP-date).

    A header sent twice comes joined with ", " ("120, 120"): the longest wait of its
    parts counts. None when absent or unparseable; never negative.
    """
    if not value:
        return None
    whole = _one_retry_after(value, now_wall)
    if "," not in value:
        return whole
    # An HTTP-date has a comma of its own ("Wed, 21 Oct 2015 …"): its part after the
    # comma is a date still, and the day's name alone parses as nothing.
    waits = [_one_retry_after(part, now_wall) for part in value.split(",")]
    return max((w for w in (whole, *waits) if w is not None), default=None)


def _one_retry_after(value: str, now_wall: float) -> float | None:
    value = value.strip()
    if _DELTA_SECONDS.fullmatch(value):
        digits = value.lstrip("0")
        if len(digits) > _LONGEST_DELTA:
            return float(10**_LONGEST_DELTA)
        return float(int(digits or "0"))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        # RFC 9110 dates are GMT; "-0000" parses as zone-less and is read as such.
        when = when.replace(tzinfo=datetime.UTC)
    seconds = when.timestamp() - now_wall
    return max(0.0, seconds) if math.isfinite(seconds) else None
