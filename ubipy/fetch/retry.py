"""When a failed request is worth another try, and how long the host waits first."""

from __future__ import annotations

import datetime
import email.utils
import logging
import math

from ubipy.fetch.fetcher import FetchOutcome, FetchResult

log = logging.getLogger(__name__)

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


def is_retryable(result: FetchResult) -> bool:
    """A network failure, a time-out or a "try later" status."""
    if result.ok:
        return result.status in RETRYABLE_STATUSES
    return result.outcome in RETRYABLE_OUTCOMES


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

    None when absent or unparseable; never negative.
    """
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(int(value))
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        # RFC 9110 dates are GMT; "-0000" parses as zone-less and is read as such.
        when = when.replace(tzinfo=datetime.UTC)
    seconds = when.timestamp() - now_wall
    return max(0.0, seconds) if math.isfinite(seconds) else None
