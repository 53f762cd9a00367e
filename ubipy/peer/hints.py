"""Sitemap ``lastmod`` as a hint for recrawling, trusted per host only as far as the
visits bear it out (issue #18: "a hint, not trusted blindly").

A sitemap's lastmod later than the crawler's last visit of a page says the page changed
since. Sitemaps in the wild often say "now" for every page (generated on the fly) or
never update the date (written once), so each host's lastmods are checked against what
visits see, and used only once enough checks agree. A check is one of two kinds, each
exact for a sitemap that tells the truth:

* a *claim*: a page is visited while its known lastmod is after the visit before; the
  page must have changed (a new digest, not a 304). A liar saying "now" fails these.
* a *change*: a visit saw the page changed since the visit before (at ``t0``); the next
  reading of the sitemap must give a lastmod after ``t0``. A frozen date fails these.

A visit that neither was claimed changed nor saw a change checks nothing (an unchanged
page under a sitemap that says so is no evidence for either kind of liar). A lastmod is
a W3C datetime of some precision (a year down to a fraction of a second): a claim needs
its whole span after the visit, a change is contradicted only when its span ends before
``t0``, so a date-only lastmod is never held against its host for its precision.

The counts are kept per page in the shard (``refresh`` table), and summed per host on
load: a restart keeps them exactly. What a check pending at a restart waited for, and
when each lastmod was read, are not kept: such checks are lost, never miscounted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from ubipy.fetch import parse_w3c

__all__ = [
    "TRUST_MIN_AGREEMENT",
    "TRUST_MIN_CHECKS",
    "HostTrust",
    "LastmodHints",
    "Said",
]

# A host's lastmods are trusted after at least this many checks, of which at least this
# share agreed. An honest sitemap agrees with every check (above), so 80% leaves room
# only for what a visit can misread (a page changed back, a clock a second off); a liar
# saying "now" over pages that change between one visit in five and never stays under
# it. Five checks: a host is not trusted on one or two lucky ones, and an honest host's
# pages give five within a few of their visits.
TRUST_MIN_CHECKS = 5
TRUST_MIN_AGREEMENT = 0.8


class Said(NamedTuple):
    """What the latest reading of a sitemap said of a page: its lastmod (first instant
    and span) and when it was read (-inf: before a restart). Held as a plain tuple (a
    tuple of numbers is one the cyclic garbage collector stops tracking: a million
    objects of a class, one a page its sitemap lists, were 0.1 s a full collection)."""

    at: float
    span: float
    read: float


@dataclass(slots=True)
class HostTrust:
    checks: int = 0
    agreed: int = 0

    @property
    def trusted(self) -> bool:
        return self.checks >= TRUST_MIN_CHECKS and self.agreed >= TRUST_MIN_AGREEMENT * self.checks


class LastmodHints:
    """What sitemaps said of each page, and each host's record against the visits."""

    def __init__(self) -> None:
        self._said: dict[int, tuple[float, float, float]] = {}
        # Pages whose last visit saw a change since the visit before (at this time),
        # waiting for the next reading of their lastmod.
        self._pending: dict[int, float] = {}
        # Pages whose lastmod's claim a visit has checked: once a reading. A date in
        # the future (a typo's year, a post scheduled) stays after every visit until
        # the clock passes it, and each visit of the unchanged page counted against
        # its host again (10 visits took an honest host's 5 of 5 to 5 of 15).
        self._claimed: set[int] = set()
        self.hosts: dict[str, HostTrust] = {}
        # Hints (a lastmod newer than the last visit, newly read) per host: acted on
        # (the host trusted), or not.
        self.used: Counter[str] = Counter()
        self.ignored: Counter[str] = Counter()

    def load(self, said: Iterable[tuple[int, str]], counts: Iterable[tuple[str, int, int]]) -> None:
        """What an earlier run kept: (fp, lastmod) as read, (host, checks, agreed) of
        each page."""
        for fp, text in said:
            if (parsed := parse_w3c(text)) is not None:
                self._said[fp] = (*parsed, float("-inf"))
        for host, checks, agreed in counts:
            trust = self.hosts.setdefault(host, HostTrust())
            trust.checks += checks
            trust.agreed += agreed

    def trusted(self, host: str) -> bool:
        trust = self.hosts.get(host)
        return trust is not None and trust.trusted

    def said(self, fp: int) -> Said | None:
        said = self._said.get(fp)
        return None if said is None else Said._make(said)

    def visited(self, fp: int, host: str, previous: float, changed: bool) -> bool | None:
        """A visit of a page answered (a 200 or a 304) saw it ``changed`` or not since
        the visit at ``previous``; returns the check it made (agreed?), if any."""
        said = self.said(fp)
        if said is not None and said.at > previous and fp not in self._claimed:
            # The sitemap claimed a change.
            self._claimed.add(fp)
            self._pending.pop(fp, None)
            return self._count(host, changed)
        if changed:  # to be checked against the next reading
            self._pending[fp] = previous
        return None

    def read(self, fp: int, host: str, lastmod: str, now: float) -> tuple[Said | None, bool | None]:
        """A sitemap read at ``now`` gives the page this lastmod: (what it says, None if
        it is no date or what was known already; the check it made, if any)."""
        parsed = parse_w3c(lastmod)
        if parsed is None:
            return None, None
        before = self.said(fp)
        said = Said(*parsed, now)
        self._said[fp] = (*parsed, now)
        check = None
        if (since := self._pending.pop(fp, None)) is not None:
            check = self._count(host, said.at + said.span > since)
        new = before is None or (before.at, before.span) != (said.at, said.span)
        if new:
            self._claimed.discard(fp)
        return (said if new else None), check

    def _count(self, host: str, agreed: bool) -> bool:
        trust = self.hosts.setdefault(host, HostTrust())
        trust.checks += 1
        trust.agreed += agreed
        return agreed

    def forget(self, fps: Iterable[int]) -> None:
        for fp in fps:
            self._said.pop(fp, None)
            self._pending.pop(fp, None)
            self._claimed.discard(fp)
