"""How a failed request backs off: its host, or one scheme of it.

A request that failed in a way worth another try (a 503, a time-out, no connection)
is asked again after a back-off, and a robots.txt that could not be had is asked
again after one (robotsrule.py). The back-off is the host's: nothing else on it goes
sooner, as the server asked or as an overloaded one deserves.

Except where the request made no connection (``no_connection``: refused, a TLS
handshake that failed). http and https of a host share one slot and its delay
(robotsrule.py), but not a port: an http site's port 443 may be shut, or speak plain
HTTP, and the other way round. Such a failure used to back the whole host off, the
other scheme's URLs behind it: one https link on a plain-HTTP site stalled its crawl
for minutes (QA: 3 min 40 s for 3 such links; its robots.txt is tried three times, 30
and 60 s apart, then each of its URLs' retries). Now the failing scheme's URLs are set
aside until the back-off ends (:class:`ubipy.fetch.slots.SchemeBackoff`, windows.py),
its robots.txt's failed tries counted on, and the host goes on over the other scheme
at its delay; past its attempts, that scheme's URLs are closed saying why
(robotsrule.py). At most a window of URLs is set aside a host: past that, the host
backs off as a whole, as before. When both schemes fail so (the host does not answer
at all), the host backs off as a whole, as it does for what its server answers (a 503,
a 429) and for a time-out (the server may be overloaded).

Under a ranked crawl order a window is loaded best first from the disk, where the URLs
set aside still wait: they are left out of its loads (windows.py), as the URLs in
flight are.

A part of :class:`ubipy.fetch.politeness.Scheduler` (a mixin over its slots and rules);
no I/O and no clock, as the scheduler.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ubipy.fetch.robots import RobotsDecision, RobotsFetch, RobotsRules
from ubipy.fetch.robotsrule import RobotsRule
from ubipy.fetch.slots import Entry, HostRobots, HostSlot, SchemeBackoff, scheme_of
from ubipy.fetch.windows import Windows

__all__ = ["Backoffs"]


class Backoffs:
    """The scheduler's back-offs (see the module's docstring)."""

    _slots: dict[str, HostSlot]
    _windows: Windows
    _agent: str
    robots: RobotsRule
    # The scheduler's own (declared, not defined: a stub here would shadow the one of
    # a base that comes after this mixin).
    finished: Callable[..., None]
    _give_up: Callable[[HostSlot], None]

    def retry(
        self, host: str, entry: Entry, now: float, *, wait: float, asked: float | None = None,
        spent: bool = True, no_connection: bool = False,
    ) -> Entry:  # fmt: skip
        """``entry`` failed in a retryable way: asked again first, after ``wait`` (its
        back-off) or ``asked`` (Retry-After), nothing else on the host sooner;
        ``spent``: the try counts among the URL's retries. ``no_connection``: none
        was made (see the module's docstring): only its scheme's URLs wait, if they may.
        Returns the entry put back, this try counted."""
        again = entry._replace(attempt=entry.attempt + 1, free=entry.free + (not spent))
        slot = self._slots[host]
        if no_connection and self._back_off_retry(slot, again, now + wait, now):
            self.finished(host, now)
            return again
        self._windows.put_back(slot, again)
        self.finished(host, now, wait=wait, asked=asked)
        return again

    def robots_answer(
        self,
        host: str,
        now: float,
        *,
        status: int | None,
        location: str | None,
        body: bytes,
        final: bool = False,
        asked: float | None = None,
        reason: str | None = None,
        rules: RobotsRules | None = None,
        no_connection: bool = False,
    ) -> RobotsDecision | None:
        """Feed a robots.txt response (``status`` None: it failed) to the host's slot.

        ``final``: the failure is not worth another attempt (the host's certificate
        did not verify): the scheme is given up at once (RobotsRule.answer), with
        ``reason``. ``asked``: the seconds its Retry-After asked. ``rules``: the
        body's, parsed already (:meth:`parse_robots`). ``no_connection``: none was
        made (see the module's docstring). Returns the decision once there is one;
        None while redirects are followed."""
        slot = self._slots[host]
        decision, give_up, wait = self.robots.answer(
            slot, now, status, location, body, asked, final=final, reason=reason, rules=rules,
            no_connection=no_connection,
        )  # fmt: skip
        if give_up:
            self._give_up(slot)
            wait = None
        elif no_connection and self._back_off_robots(slot, now, wait):
            wait = None
        self.finished(host, now, wait=wait, asked=asked)
        return decision

    def _back_off(self, slot: HostSlot, scheme: str, until: float, now: float) -> bool:
        """Back ``scheme``'s URLs of the host off until ``until``, its other scheme
        going on. False (the host is to wait as a whole) when its other scheme is
        backed off already: then the host answers neither."""
        backoff = slot.backoff
        if (
            backoff is not None
            and backoff.scheme != scheme
            and (now < backoff.until or backoff.robots_attempts)
        ):
            return False  # or its robots.txt's failed tries, kept there, were lost
        if backoff is None or backoff.scheme != scheme:
            if backoff is not None:
                self._windows.bring_back(slot)
            slot.backoff = SchemeBackoff(scheme, until)
        else:
            backoff.until = max(backoff.until, until)
        return True

    def _back_off_robots(self, slot: HostSlot, now: float, wait: float | None) -> bool:
        """After a try of the slot's robots.txt that made no connection and is to be
        made again after ``wait``: whether its scheme is backed off till then (its
        tries kept with the back-off), the host going on over its other scheme."""
        if wait is None or slot.robots_state is not HostRobots.UNKNOWN:
            return False  # given up, or a refetch: the old rules serve, nothing waits
        attempts = slot.robots_attempts
        if not self._back_off(slot, slot.robots_scheme, now + wait, now):
            return False
        assert slot.backoff is not None
        slot.backoff.robots_attempts = attempts
        slot.robots_attempts = 0  # the other scheme's, if it is asked meanwhile
        return True

    def _back_off_retry(self, slot: HostSlot, entry: Entry, until: float, now: float) -> bool:
        """Whether a page that made no connection waits aside till ``until`` (its
        scheme backed off), rather than its host."""
        if not self._back_off(slot, scheme_of(entry.url), until, now):
            return False
        self._windows.set_entry_aside(slot, entry)
        return True

    def _askable(self, slot: HostSlot, now: float) -> bool:
        """Whether the host has something to ask now, beside its backed-off scheme's
        URLs (set aside, or back once the back-off is over: Windows.apply_backoff)."""
        self._windows.apply_backoff(slot, now)
        backoff = slot.backoff
        if backoff is not None and not backoff.entries and not backoff.robots_attempts:
            slot.backoff = None  # nothing more to keep
        if backoff is not None and backoff.full:
            return False
        return slot.has_work or (bool(slot.refresh) and slot.refresh[0][0] <= now)

    def _robots_fetch(self, slot: HostSlot, url: str, now: float) -> RobotsFetch | None:
        """What the slot asks before ``url`` (RobotsRule.fetch_for). A backed-off
        scheme's robots.txt asked again ends its back-off, its failed tries counted on;
        the slot's own scheme, failing too, then leaves its tries in the back-off's
        place (one count a scheme: the slot holds one, the back-off the other's)."""
        backoff = slot.backoff
        if backoff is None or not url.startswith(backoff.scheme):
            return self.robots.fetch_for(slot, url, now, self._agent)
        scheme, tries = slot.robots_scheme, slot.robots_attempts
        failing = slot.robots_state is HostRobots.UNKNOWN and tries > 0
        fetch = self.robots.fetch_for(slot, url, now, self._agent)
        if fetch is not None:
            slot.robots_attempts = backoff.robots_attempts
            self._windows.bring_back(slot)
            slot.backoff = SchemeBackoff(scheme, -math.inf, tries) if failing else None
        return fetch
