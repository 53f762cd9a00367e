"""The changing web: pages that change as Poisson processes, and the ground truth of when.

`WebSpec(changing=True)` (or `python -m ubipy.synthweb --changing`) makes the ordinary
or ranked pages change; the special, sitemap-only, hostile, paced and encodings pages
never do, and links never change (so `ground_truth()` is the same). Everything is a pure
function of the spec's seed and the server's clock:

* Groups are hosts. A group's mean interval between changes is drawn in log space between
  `FASTEST` (a minute) and `SLOWEST` (twelve weeks), skewed towards the slow end
  (`u = v ** SKEW` of a uniform v, so most groups change every few days or weeks and a
  few every minutes); a page's rate is its group's times a lognormal factor (sigma
  `PAGE_SIGMA`, small next to the groups' spread), so a group's sampled pages predict its
  other pages (cluster sampling). A page never changes with chance `STATIC_SHARE`.
  At 250 hosts x 200 pages: see docs/synthweb.md for the figures.
* A page's changes are a Poisson process from time 0 (the web's creation: version 0,
  no change yet): exponential gaps drawn from RNGs seeded by (seed, page, chunk), in
  chunks of 1, 2, 4, ... 64 gaps, generated lazily up to the latest time asked and
  cached per page (an array of floats), so a page nobody asks about costs nothing and a
  slow one costs one RNG.
* The clock is the server's (`now` in `SyntheticWeb.respond`): `trio.current_time()`,
  the request log's clock, so the truth is asked at a log entry's `start`. In process on
  the autojump clock that is virtual time from 0; the standalone server with
  `--changing` runs trio on a clock that counts seconds from its start.
* Each change is visible: the body carries the page's version, and on hosts with
  validators (all but `NO_VALIDATORS_SHARE` of them, drawn per host) `ETag` is
  `"<page>-<version>"` and `Last-Modified` the HTTP date of the last change, server time
  0 being `EPOCH`. Those hosts answer `If-None-Match` (which takes precedence, RFC 9110)
  and `If-Modified-Since` with 304 Not Modified and no body. An HTTP date has whole
  seconds: a page that changed twice within one second can answer 304 to an
  `If-Modified-Since` that saw only the first change; the ETag is exact.
"""

from __future__ import annotations

import hashlib
import math
import random
from array import array
from bisect import bisect_right
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime
from itertools import accumulate

from ubipy.synthweb.spec import Response, WebSpec
from ubipy.synthweb.urls import normalize_url

DAY = 86400.0
WEEK = 7 * DAY
FASTEST = 60.0  # the fastest group changes every minute on average
SLOWEST = 12 * WEEK  # the slowest every twelve weeks
SKEW = 0.5  # log-interval fraction u = v ** SKEW: P(u < x) = x ** 2, most groups slow
PAGE_SIGMA = 0.5  # a page's rate = its group's x exp(N(0, PAGE_SIGMA))
STATIC_SHARE = 0.2  # pages that never change
NO_VALIDATORS_SHARE = 0.2  # hosts that send neither ETag nor Last-Modified
# 2026-01-01T00:00:00Z: server time 0 in Last-Modified and the sitemaps' lastmods; the
# cluster harness's wall clock reads it when trio's reads 0 (tests/cluster/harness.py),
# so in process a crawler's visit times and the server's dates are on one clock.
EPOCH = 1_767_225_600.0
_MAX_CHUNK = 256  # gaps drawn per RNG, once a page has shown it changes often

# Where a page is: its number (unique on the web, the ETag's) and its group (host name).
Locate = Callable[[str], tuple[int, str] | None]


@dataclass(frozen=True, slots=True)
class ChangingPage:
    """A page of the changing web: `rate` is in changes per second (0: never changes)."""

    url: str
    number: int
    group: str
    rate: float
    validators: bool


class _Timeline:
    """A page's change times, generated up to `last` (the latest change drawn so far,
    beyond every time asked about)."""

    __slots__ = ("chunks", "last", "rate", "times")

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.times = array("d")
        self.chunks = 0
        self.last = 0.0


def uniform(salt: str, *key: object) -> float:
    """A uniform in [0, 1) that depends only on `salt` and `key` (cheaper than seeding
    an RNG); each use has a salt of its own, so its draws are independent."""
    text = ":".join(map(str, (salt, *key))).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "big") / 2.0**64


def _uniform(*key: object) -> float:
    return uniform("synthweb-change", *key)


class ChangingWeb:
    """The change model of a web. `locate` maps a normalised URL to (page number, group)
    for the pages that change, None for any other URL; `urls` lists those pages."""

    def __init__(self, spec: WebSpec, locate: Locate, urls: Callable[[], list[str]]) -> None:
        self.spec = spec
        self._locate = locate
        self._urls = urls
        self._timelines: dict[int, _Timeline] = {}
        self._group_rates: dict[str, float] = {}

    # -- pages and rates -----------------------------------------------------------------
    def urls(self) -> list[str]:
        """Every page that may change (the static ones included), normalised."""
        return self._urls()

    def page(self, url: str) -> ChangingPage | None:
        """`url`'s page (normalised here), None if it is not one of the changing web's."""
        url = normalize_url(url)
        where = self._locate(url)
        if where is None:
            return None
        number, group = where
        return ChangingPage(url, number, group, self._rate(number, group), self.validators(group))

    def rate(self, url: str) -> float:
        """Changes per second of the page at `url` (0.0 if it never changes)."""
        return self.require(url).rate

    def group(self, url: str) -> str:
        """The group whose rate the page's is drawn around: its host."""
        return self.require(url).group

    def group_rate(self, group: str) -> float:
        """A group's base rate (changes per second), before each page's factor."""
        rate = self._group_rates.get(group)
        if rate is None:
            u = _uniform(self.spec.seed, "group", group) ** SKEW
            rate = 1.0 / (FASTEST * (SLOWEST / FASTEST) ** u)
            self._group_rates[group] = rate
        return rate

    def validators(self, host: str) -> bool:
        """Whether `host` sends ETag and Last-Modified (and answers conditional GETs)."""
        return _uniform(self.spec.seed, "validators", host) >= NO_VALIDATORS_SHARE

    def require(self, url: str) -> ChangingPage:
        """`page(url)`, or a KeyError if `url` is not one of the changing web's pages."""
        page = self.page(url)
        if page is None:
            raise KeyError(f"{url} is not a page of the changing web")
        return page

    def _rate(self, number: int, group: str) -> float:
        seed = self.spec.seed
        if _uniform(seed, "static", number) < STATIC_SHARE:
            return 0.0
        # Box-Muller: one normal from two uniforms (1 - u keeps the log finite).
        u1, u2 = 1.0 - _uniform(seed, "factor", number), _uniform(seed, "angle", number)
        normal = math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)
        return self.group_rate(group) * math.exp(PAGE_SIGMA * normal)

    # -- change times --------------------------------------------------------------------
    def timeline(self, url: str | ChangingPage, until: float) -> array[float]:
        """The page's change times, ascending, complete up to `until` and holding at
        least one later time unless it never changes: the shared cache, not a copy; do
        not modify it."""
        page = url if isinstance(url, ChangingPage) else self.require(url)
        return self._timeline(page.number, page.rate, until)

    def _timeline(self, number: int, rate: float, until: float) -> array[float]:
        line = self._timelines.get(number)
        if line is None:
            line = self._timelines[number] = _Timeline(rate)
        if rate <= 0.0:
            return line.times
        mean, log, times = 1.0 / rate, math.log, line.times
        while line.last <= until:
            size = min(_MAX_CHUNK, 1 << line.chunks)
            draw = random.Random(f"synthweb-change:{self.spec.seed}:{number}:{line.chunks}").random
            # Exponential gaps by inversion (as expovariate draws them, without its call).
            gaps = [-log(1.0 - draw()) * mean for _ in range(size)]
            gaps[0] += line.last
            times.extend(accumulate(gaps))
            line.chunks += 1
            line.last = times[-1]
        return times

    def change_times(self, url: str, until: float) -> list[float]:
        """The page's change times up to `until` (inclusive), ascending."""
        times = self.timeline(url, until)
        return list(times[: bisect_right(times, until)])

    def version(self, url: str, t: float) -> int:
        """How many times the page has changed by time `t` (0 before its first change)."""
        return bisect_right(self.timeline(url, t), t)

    def last_change(self, url: str, t: float) -> float | None:
        """When the page last changed at or before `t`; None if it has not yet."""
        times = self.timeline(url, t)
        n = bisect_right(times, t)
        return times[n - 1] if n else None

    def next_change(self, url: str, t: float) -> float:
        """The page's first change after `t` (math.inf if it never changes)."""
        page = self.require(url)
        if page.rate <= 0.0:
            return math.inf
        times = self._timeline(page.number, page.rate, t)
        return times[bisect_right(times, t)]

    def fresh(self, url: str, t0: float, t1: float) -> bool:
        """Whether a copy fetched at `t0` is still the live page at `t1` (no change in
        (t0, t1])."""
        return self.next_change(url, t0) > t1

    # -- responses -----------------------------------------------------------------------
    def respond(
        self, url: str, base: Response, now: float, conditions: Mapping[str, str]
    ) -> Response:
        """The page's answer at server time `now`: `base` (its unchanging 200) with its
        version in the body and validators, or a 304 when `conditions` (lower-case
        request headers) name the current version. Any other URL gets `base`."""
        where = self._locate(url)
        if where is None:
            return base
        number, group = where
        times = self._timeline(number, self._rate(number, group), now)
        version = bisect_right(times, now)
        body = base.body
        cut = body.rfind(b"</body>")
        if cut >= 0:
            mark = f'<p id="version">version {version}</p>'.encode()
            body = body[:cut] + mark + body[cut:]
        if not self.validators(group):
            return Response(base.status, base.headers, body)
        changed = times[version - 1] if version else 0.0
        etag = f'"{number}-{version}"'
        validators = (("ETag", etag), ("Last-Modified", formatdate(EPOCH + changed, usegmt=True)))
        if not_modified(conditions, etag, EPOCH + changed):
            return Response(304, validators)
        return Response(base.status, (*base.headers, *validators), body)


def not_modified(conditions: Mapping[str, str], etag: str, changed: float) -> bool:
    """RFC 9110's evaluation for a GET: If-None-Match, when sent, decides alone (weak
    comparison); else If-Modified-Since, a date not before the last change (`changed`, a
    Unix time, compared in whole seconds as the date has no more)."""
    if_none_match = conditions.get("if-none-match")
    if if_none_match is not None:
        tags = {t.strip().removeprefix("W/") for t in if_none_match.split(",")}
        return "*" in tags or etag in tags
    since = conditions.get("if-modified-since")
    if since is None:
        return False
    try:
        date = parsedate_to_datetime(since).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return False  # an invalid date is ignored (RFC 9110, 13.1.3)
    return math.floor(changed) <= date
