"""A host's robots.txt through its own slot: what each answer means for the host.

robots.txt is asked before a host's first page, through the host's slot, so it obeys
the same politeness as pages (hops.py when it is redirected to another host), and
asked again once its answer is older than the TTL (``--robots-ttl``; RFC 9309 §2.4:
a day). A first answer that fails is tried again after a back-off, and the host is
given up after the last attempt (or at once, when its certificate did not verify).
A refetch that fails keeps the old rules, since a cached copy serves while
robots.txt cannot be reached, and is tried again after the back-off, however often
it fails. A failure that came with a Retry-After longer than the back-off (a 429 or
a 503) waits that long instead, the host's pages too: the server asked to be left
alone, not only its robots.txt. An answer's Crawl-delay (capped) becomes the host's delay; an answer
without one puts back the crawl's.

Each scheme of a host has its own robots.txt (RFC 9309 §2.3: the rules are those of
the scheme, host and port; Heritrix, Nutch and StormCrawler keep them so), while http
and https of a host share one slot and its delay. A slot holds the rules of the scheme
its requests are on, and those of its other scheme as a spare (:meth:`take_scheme`);
a URL of the other scheme swaps them, or has that scheme's robots.txt asked first. The
host's delay takes the longer Crawl-delay of the two. When one scheme's robots.txt
cannot be had (after the attempts, or at once for a certificate that does not
verify), the host goes on over the other: a scheme whose rules could not be had at
all (its certificate; a port that made no connection at each attempt, backoffs.py)
has its URLs closed saying why (``RobotsRules.closed``), and its robots.txt asked
again past the TTL; one failing for now (a 503, a time-out) after the other's rules
came is read by them until it answers, asked again with the back-off as a refetch
past the TTL is (closed, its URLs were lost for good). A host is given up when
neither scheme can be had, or when the one that cannot is the only one it has URLs
of in memory (a dead host's many URLs are then closed at once, and its new ones as
they come); a URL of the other scheme reopens it (:meth:`RobotsRule.reopen`). Before,
a host whose first scheme failed was given up, its other scheme's URLs too.

No I/O and no clock, as the scheduler.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

from ubipy.fetch.robots import (
    LARGE_ROBOTS,
    ROBOTS_UNREACHABLE,
    RobotsDecision,
    RobotsFetch,
    RobotsRules,
    retry_delay,
)
from ubipy.fetch.slots import (
    HostRobots,
    HostSlot,
    SpareRobots,
    due_entry,
    scheme_bit,
    scheme_of,
)
from ubipy.fetch.urls import robots_url

__all__ = ["RobotsCache", "RobotsOutcome", "RobotsRule"]

#: What an earlier run kept of a host's robots.txt of a scheme ("https:"): its age in
#: seconds and its body (None: nothing restricts), or None if nothing was kept.
RobotsCache = Callable[[str, str], tuple[float, bytes | None] | None]


class RobotsOutcome(NamedTuple):
    # The decision once there is one; None while redirects are followed.
    decision: RobotsDecision | None
    # The host is given up: its URLs are closed.
    give_up: bool = False
    # The host waits this long before its next request (None: its delay).
    wait: float | None = None


class RobotsRule:
    """How hosts' robots.txt answers set their rules, delays and retries."""

    def __init__(
        self, *, delay: float, max_crawl_delay: float, retry_base: float, attempts: int, ttl: float
    ) -> None:
        self._delay = delay
        self._max_crawl_delay = max_crawl_delay
        self._retry_base = retry_base
        self._attempts = attempts
        self._ttl = ttl
        # What an earlier run kept (the shard's), read before a scheme's robots.txt is
        # first asked in this run: rules younger than the TTL are taken, not asked again.
        self.cache: RobotsCache | None = None

    @staticmethod
    def stale(slot: HostSlot, now: float) -> bool:
        """Whether the host's next request asks robots.txt again first: its rules
        are known but past their time, and it has a request to make now."""
        return (
            slot.robots_state is HostRobots.KNOWN
            and now >= slot.robots_due
            and (slot.has_work or (bool(slot.refresh) and slot.refresh[0][0] <= now))
        )

    def answer(
        self,
        slot: HostSlot,
        now: float,
        status: int | None,
        location: str | None,
        body: bytes,
        asked: float | None = None,
        final: bool = False,
        reason: str | None = None,
        rules: RobotsRules | None = None,
        no_connection: bool = False,
    ) -> RobotsOutcome:
        """Feed a response (``status`` None: it failed) to the slot's fetch;
        ``asked``: the seconds its Retry-After asked (capped by the caller);
        ``final``: a failure not worth another attempt gives the host up at once,
        unless it has rules already; ``reason``: what URLs closed for want of the
        rules are closed with (by default, ROBOTS_UNREACHABLE); ``rules``: the body's,
        parsed already; ``no_connection``: none was made (backoffs.py): past the
        attempts, the scheme is closed as for ``final``, whatever the other's rules."""
        fetch = slot.robots_fetch
        assert fetch is not None
        if status is None:
            decision = fetch.on_error()
        else:
            decision = fetch.on_response(status, location, body, rules)
        if decision is None:
            return RobotsOutcome(None)
        if decision.temporary:
            slot.robots_attempts += 1
            slot.robots_fetch = None
            # Every attempt counts, an asked one too: a host is given up only once
            # the server's asked waits have passed, but at last all the same.
            wait = max(retry_delay(slot.robots_attempts, self._retry_base), asked or 0.0)
            if slot.robots_state is HostRobots.KNOWN:
                # A refetch past the TTL: the old rules stand, the host's pages go on
                # at its delay (after any asked wait), and robots.txt is asked again
                # after the back-off.
                slot.robots_due = now + wait
                return RobotsOutcome(decision, wait=asked)
            if final or slot.robots_attempts >= self._attempts:
                closed = RobotsRules.closed(reason or ROBOTS_UNREACHABLE)
                spare = slot.spare_robots
                if spare is None or spare.rules.closed_for is not None:
                    # Neither scheme can be had, or the other has not been tried.
                    self._take(slot, now, closed)  # kept given up: see reopen
                    if spare is not None or not _other_scheme_waits(slot):
                        return RobotsOutcome(decision, give_up=True)
                    # RFC 9309 §2.3: the rules are the scheme's, and the host's other
                    # scheme may answer where this one does not (an http site whose
                    # port 443 is shut, or serves its provider's certificate): this
                    # scheme's URLs are closed saying why, the other's go on, and this
                    # robots.txt is asked again past the TTL. (Given up, the host's
                    # URLs of both were closed, and no request was made to it.)
                    return RobotsOutcome(decision, wait=asked)
                # The host's other scheme has rules. A scheme that cannot be had at
                # all (its certificate, a port that made no connection three times) is
                # closed; one failing for now (a 503, a time-out) is read by the
                # other's, the nearest copy, and asked again after the back-off as a
                # refetch is: closed, its URLs were lost for good. (Its pages would
                # make no connection either: each was tried three times.)
                shut = final or no_connection
                self._take(slot, now, closed if shut else spare.rules)
                slot.robots_due = now + (self._ttl if shut else wait)
                return RobotsOutcome(decision, wait=asked)
            return RobotsOutcome(decision, wait=wait)
        self._take(slot, now, decision.rules)
        return RobotsOutcome(decision)

    @staticmethod
    def reopen(slot: HostSlot, url: str) -> bool:
        """Whether a host given up over one scheme's robots.txt, its other untried,
        takes ``url`` of that other scheme (True: its slot goes on, the given-up
        scheme's rules closed, ``url``'s robots.txt asked first)."""
        rules = slot.robots
        if (
            slot.robots_state is not HostRobots.GIVEN_UP
            or rules is None
            or rules.closed_for is None
            or slot.spare_robots is not None
            or url.startswith(slot.robots_scheme)
        ):
            return False
        slot.robots_state = HostRobots.KNOWN
        return True

    def _take(self, slot: HostSlot, now: float, rules: RobotsRules) -> None:
        slot.robots_state = HostRobots.KNOWN
        slot.robots = rules
        slot.robots_attempts = 0
        slot.robots_at, slot.robots_due = now, now + self._ttl
        crawl_delay = rules.crawl_delay
        if slot.spare_robots is not None and (other := slot.spare_robots.rules.crawl_delay):
            crawl_delay = max(crawl_delay or 0.0, other)
        slot.crawl_delay = 0.0 if crawl_delay is None else min(crawl_delay, self._max_crawl_delay)
        slot.delay = max(self._delay, slot.crawl_delay)

    def fetch_for(self, slot: HostSlot, url: str, now: float, agent: str) -> RobotsFetch | None:
        """What the slot asks before ``url``, the next of its URLs: nothing (None) if it
        has fresh rules for the URL's scheme, its spare's maybe, else that scheme's
        robots.txt. (Not :meth:`stale`, which asks whether the host has a request to
        make: ``url`` is one, taken from its queue.)"""
        scheme = scheme_of(url)
        if self.take_scheme(slot, scheme) and now < slot.robots_due:
            return None
        if slot.robots_state is HostRobots.UNKNOWN and self._kept(slot, scheme, now, agent):
            return None
        fetch = slot.robots_fetch = RobotsFetch(robots_url(url), agent)
        return fetch

    def _kept(self, slot: HostSlot, scheme: str, now: float, agent: str) -> bool:
        """Take the rules an earlier run kept for the slot's host and ``scheme``, if
        younger than the TTL: asked again when they would have been (QA: every restart
        asked every host's robots.txt again before its next page)."""
        kept = None if self.cache is None else self.cache(slot.host, scheme)
        if kept is None or not 0 <= kept[0] < self._ttl:
            return False
        age, body = kept
        if body is not None and len(body) >= LARGE_ROBOTS:
            return False  # asked again: the answer's parse is a thread's, not the loop's
        self._take(
            slot, now, RobotsRules.allow_all() if body is None else RobotsRules.parse(body, agent)
        )
        slot.robots_at, slot.robots_due = now - age, now - age + self._ttl
        return True

    @staticmethod
    def take_scheme(slot: HostSlot, scheme: str) -> bool:
        """Make the slot's rules those of ``scheme`` ("https:", its next request's): the spare's
        if they are, none yet otherwise (robots.txt is asked first), the rules it held
        kept as the spare. True if it has rules for ``scheme`` now (maybe stale)."""
        if slot.robots_scheme == scheme:
            return slot.robots_state is HostRobots.KNOWN
        # The spare is always of the scheme the slot is not on: with http and https
        # alone, of ``scheme``.
        spare, slot.spare_robots = slot.spare_robots, None
        if slot.robots_state is HostRobots.KNOWN and slot.robots is not None:
            held = SpareRobots(slot.robots_scheme, slot.robots, slot.robots_at, slot.robots_due)
            slot.spare_robots = held
            slot.robots_attempts = 0  # a failed refetch's: this scheme's are counted anew
        slot.robots_scheme = scheme
        slot.robots_fetch = None
        if spare is not None and spare.scheme == scheme:
            slot.robots_state, slot.robots = HostRobots.KNOWN, spare.rules
            slot.robots_at, slot.robots_due = spare.at, spare.due
            slot.robots_attempts = 0
            return True
        slot.robots_state, slot.robots = HostRobots.UNKNOWN, None
        slot.robots_at, slot.robots_due = -math.inf, math.inf
        return False

    def backoff(self, failures: int, *, more: int = 0) -> float | None:
        """The wait after ``failures`` failed attempts (a host's lookups are tried as
        its robots.txt is, ``more`` times more when the resolver, not the name, failed),
        or None when that was the last one."""
        if failures >= self._attempts + more:
            return None
        return retry_delay(failures, self._retry_base)


def _other_scheme_waits(slot: HostSlot) -> bool:
    """Whether a URL of the scheme the slot is not on waits in its window, set aside
    (backoffs.py), or among its pages due again; or on disk, put there by this run (a
    review: an https page behind a window of http URLs was closed with them). Rows of
    a start's are not looked at: the host is given up, and tried again later."""
    scheme = slot.robots_scheme
    return (
        bool(slot.disk_schemes & ~scheme_bit(scheme))
        or any(not e.url.startswith(scheme) for e in slot.queue)
        or any(not e.url.startswith(scheme) for e in slot.aside)
        or any(not due_entry(item).url.startswith(scheme) for item in slot.refresh)
    )
