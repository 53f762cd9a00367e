"""A delay that listens to the server: per host, the wait before its next request grows
with how slowly it answers, and backs off when it says it is overloaded.

The rule is Heritrix's delay factor: the host waits ``delay_factor`` × its response
time. Scrapy's AutoThrottle aims at a number of requests in flight per server
(delay = latency / target concurrency); ubipy never has more than one request in
flight per host, so AutoThrottle's rule is this one with factor = 1 / target, and its
default (target concurrency 1.0) is the default factor here, 1.0: a host is left
alone at least as long as it took to answer, so it spends at most half its time on
this crawler, and a host twice as slow gets half the requests. Heritrix's own default,
5, is one flag away (``--delay-factor 5``).

- The response time is the time to the response's head (what AutoThrottle calls
  latency): the server's work, not the size of the page or our own link. Its estimate
  is an exponentially weighted average, so one slow answer moves it by ``SMOOTHING``
  of the difference, not all the way, and fast answers bring it back down as surely.
  An error answer (429, 5xx) only ever raises it: a quick "overloaded" is no sign
  that the server is fast. A time-out is a sample of the time waited, which only
  raises it too: a server that never answers is at least that slow.
- ``max_delay`` bounds what the factor and the back-off may ask (Heritrix's
  max-delay, 30 s by default); ``--delay`` and robots.txt's Crawl-delay are floors
  that the delay never goes under, whatever they are (the larger wins).
- A 503 or a 429 without a usable Retry-After is a strike: after n strikes in a row
  the host waits ``backoff_base`` · 2^(n-1) (at most ``max_delay``; the base is the
  host's delay if that is longer). Any other answer that is not a 5xx ends the run of
  strikes, and the delay drops back to what the response time asks. A Retry-After
  longer than the back-off is the server's own word, obeyed as such by the caller; it
  neither adds nor ends a strike. One no longer ("0", a date already past) is a strike
  like no Retry-After at all: else "Retry-After: 0" would turn the back-off off.

Pure: no I/O and no clock. The scheduler feeds answers in (:meth:`Pace.heard`) and
asks for the delay (:meth:`Pace.delay`) when it sets the host's next time.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

# Weight of the newest response time in the estimate.
SMOOTHING = 0.3
# Statuses that ask the crawler to slow down when they come without a Retry-After.
BACKOFF_STATUSES = frozenset({429, 503})
# 2^exponent: far beyond any max_delay already, and no float overflow.
_MAX_EXPONENT = 32


@dataclass(frozen=True, slots=True)
class ThrottleRules:
    """How a host's delay follows its answers (the same for every host)."""

    # The host waits this many times its response time; 0 turns the rule off.
    delay_factor: float = 1.0
    # What the factor and the back-off may ask at most (floors may exceed it).
    max_delay: float = 30.0
    # The first back-off after a 503/429 without Retry-After; it doubles per strike.
    backoff_base: float = 2.0

    def __post_init__(self) -> None:
        for name in ("delay_factor", "max_delay", "backoff_base"):
            value = getattr(self, name)
            if not value >= 0:  # NaN too
                raise ValueError(f"{name} must be >= 0, not {value}")


DEFAULT_RULES = ThrottleRules()


@dataclass(slots=True)
class Pace:
    """One host's state: its estimated response time and its run of strikes."""

    # Seconds to the response's head, smoothed; None until the first answer.
    latency: float | None = None
    # 503/429 answers in a row without a Retry-After longer than their back-off.
    strikes: int = 0

    def heard(
        self,
        latency: float | None,
        status: int | None,
        *,
        asked: float | None = None,
        rules: ThrottleRules = DEFAULT_RULES,
        floor: float = 0.0,
    ) -> None:
        """An answer: ``latency`` seconds to its head (``status`` None: a time-out,
        after ``latency`` seconds, a sample that only raises the estimate as an error
        does; ``latency`` None: no answer and no time waited, which changes nothing);
        ``asked``: the seconds its Retry-After asked, which the caller obeys; a strike
        all the same unless longer than the back-off the strike gives (under ``rules``
        and ``floor``, as :meth:`delay`)."""
        if latency is None:
            return
        error = status is None or status == 429 or status >= 500
        sample = max(latency, 0.0)
        if self.latency is None:
            self.latency = sample
        elif not error or sample > self.latency:
            self.latency += SMOOTHING * (sample - self.latency)
        if status is None:
            return  # not an answer: neither a strike nor the end of a run of them
        if status in BACKOFF_STATUSES:
            self.strikes += 1
            if asked is not None and asked > self.delay(rules, floor):
                self.strikes -= 1
        elif status < 500:
            self.strikes = 0

    def delay(self, rules: ThrottleRules, floor: float) -> float:
        """Seconds from the end of a request to the host to its next one; never under
        ``floor`` (``--delay``, raised by the host's Crawl-delay)."""
        wanted = 0.0
        if self.latency is not None:
            wanted = min(rules.max_delay, rules.delay_factor * self.latency)
        delay = max(floor, wanted)
        if self.strikes:
            base = max(rules.backoff_base, delay)
            backoff = base * 2.0 ** min(self.strikes - 1, _MAX_EXPONENT)
            delay = max(delay, min(rules.max_delay, backoff))
        return delay


@dataclass(frozen=True, slots=True)
class SlowHost:
    """A host among a peer's slowest, as its status reports it."""

    host: str
    # Estimated seconds to the response's head.
    latency: float
    # Its wait now: the floor raised by its pace and back-off, or longer where a
    # Retry-After holds it (the seconds left).
    delay: float
    # 503/429 answers in a row without a Retry-After longer than their back-off.
    strikes: int
    # Tries of its robots.txt that failed, its pages held until one answers (latency -1:
    # no answer timed: a refused connection, or a 500, which is not timed).
    robots_tries: int = 0


class Paced(Protocol):
    """A host as the scheduler keeps it (``HostSlot``)."""

    @property
    def host(self) -> str: ...

    @property
    def pace(self) -> Pace | None: ...

    @property
    def next_allowed(self) -> float: ...

    @property
    def robots_tries(self) -> int: ...


P = TypeVar("P", bound=Paced)


def slowest_hosts(
    slots: Iterable[P], n: int, delay_of: Callable[[P], float], now: float | None = None
) -> list[SlowHost]:
    """The ``n`` hosts gone slowest on: the longest wait, then the slowest to answer (a
    time-out counts as a wait that long), of those heard from. The wait is
    ``delay_of``, or with ``now`` the time left until the host's next request if longer
    (a Retry-After, obeyed and said nowhere: QA). Hosts not heard from in this run are
    left out, though one may be held by a Retry-After its last run was given: most are
    held for want of their name or robots.txt, and would fill the list. One whose
    robots.txt failed is heard from (QA: its pages' wait was said nowhere)."""
    rows = []
    for slot in slots:
        pace, tries = slot.pace, slot.robots_tries
        latency = -1.0 if pace is None or pace.latency is None else pace.latency
        if latency < 0 and not tries:
            continue
        delay = delay_of(slot)
        wait = delay if now is None else max(delay, slot.next_allowed - now)
        rows.append(SlowHost(slot.host, latency, wait, pace.strikes if pace else 0, tries))
    return heapq.nlargest(n, rows, key=lambda s: (s.delay, s.latency, s.host))


#: Seconds the slowest hosts, once ranked, are given again to those who ask with a time.
SLOWEST_REFRESH = 10.0


class SlowestHosts(Generic[P]):
    """:func:`slowest_hosts` asked with a time: ranked again at most every
    ``SLOWEST_REFRESH`` s (a status pushed every second would walk 100,000 hosts
    every second)."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        # (n, when, hosts) of the last ranking.
        self._last: tuple[int, float, list[SlowHost]] = (0, -math.inf, [])

    def ranked(
        self, slots: Iterable[P], n: int, delay_of: Callable[[P], float], now: float | None
    ) -> list[SlowHost]:
        """``now`` None: ranked anew, whenever the last was."""
        if now is not None and self._last[0] == n and now - self._last[1] < SLOWEST_REFRESH:
            return self._last[2]
        ranked = slowest_hosts(slots, n, delay_of, now)
        if now is not None:
            self._last = (n, now, ranked)
        return ranked
