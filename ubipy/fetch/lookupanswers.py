"""What the scheduler does with a host's lookup: its address filed for the per-IP
rule, a failure backed off as a robots.txt's is, or the host given up. A part of
:class:`ubipy.fetch.politeness.Scheduler` (a mixin over its slots and rules); no I/O
and no clock, as the scheduler."""

from __future__ import annotations

import math

from ubipy.fetch.addresses import AddressRule
from ubipy.fetch.hops import HopRule
from ubipy.fetch.robotsrule import RobotsRule
from ubipy.fetch.slots import HostRobots, HostSlot
from ubipy.fetch.windows import Windows

__all__ = ["LookupAnswers"]

# Lookups more than a robots.txt's attempts when the resolver fails (see lookup_failed).
_TRANSIENT_MORE = 3


class LookupAnswers:
    """The scheduler's answers to lookups (see the module's docstring)."""

    _slots: dict[str, HostSlot]
    _addresses: AddressRule
    _hops: HopRule
    _windows: Windows
    robots: RobotsRule
    in_flight: int
    lookups: int

    def _arm(self, slot: HostSlot) -> None:
        raise NotImplementedError

    def resolved(self, host: str, address: str | None, *, until: float) -> None:
        """The host's lookup answered ``address`` (None: no per-IP rule), good ``until``.
        A lookup is not a request to the host: its next-allowed time stands."""
        slot = self._slots[host]
        slot.in_flight = False
        self.in_flight -= 1
        self.lookups -= 1
        slot.resolved_until, slot.lookup_failures = until, 0
        self._addresses.resolved(slot, address)
        self._hops.freed(slot)
        self._arm(slot)

    def readdressed(self, host: str, address: str) -> None:
        """The name's answer begins at ``address`` (a key) now: filed under another,
        the host is looked up again at its next turn (and filed under it)."""
        if (slot := self._slots.get(host)) is not None and slot.address not in (None, address):
            slot.resolved_until = -math.inf

    def lookup_failed(
        self,
        host: str,
        now: float,
        *,
        final: bool = False,
        transient: bool = False,
        not_before: float = -math.inf,
    ) -> bool:
        """The host's lookup failed; it is tried again after a back-off, as robots.txt
        is, and not before ``not_before`` (the failure cached till then would answer).
        ``transient``: the resolver failed (no answer, a time-out), not the name: three
        more attempts (about 15 minutes at the default 30 s), or a resolver's outage
        of two minutes gave up every host first met during it.
        True when the host is given up (``final``, or too many failures) with URLs
        to close (the caller closes them); not for a host looked up only as a
        robots.txt's hop target (another peer's, maybe)."""
        slot = self._slots[host]
        slot.in_flight = False
        self.in_flight -= 1
        self.lookups -= 1
        slot.lookup_failures += 1
        more = _TRANSIENT_MORE if transient else 0
        wait = None if final else self.robots.backoff(slot.lookup_failures, more=more)
        had_urls = slot.has_work or bool(slot.refresh) or bool(slot.aside)
        self._addresses.passed(slot)  # its address's turn, kept for the answer
        if wait is None:
            self._give_up(slot)
        else:
            slot.next_allowed = max(slot.next_allowed, now + wait, not_before)
        self._hops.freed(slot)
        self._arm(slot)  # idle, once given up
        return wait is None and had_urls

    def _give_up(self, slot: HostSlot) -> None:
        slot.robots_state = HostRobots.GIVEN_UP
        self._windows.clear(slot)
        # Its pages due again too: asked without rules, they would break the rule that
        # no page goes before its host's robots.txt is known (a restart retries them).
        slot.refresh = []
