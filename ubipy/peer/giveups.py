"""Hosts given up for a reason that may pass are tried again: a crawl runs for weeks.

A host is given up when its robots.txt cannot be had (5xx, 429, no answer, over
``robots_max_attempts`` attempts: a minute and a half at the defaults) or its name does
not resolve: its pending URLs are closed saying why, and so are those of it admitted
later. A server down for a deploy, a registrar's hiccup or a resolver's outage lost
the host for the rest of the run (a review: 2 minutes of 503 from a robots.txt lost a
site for a day, 5 minutes of NXDOMAIN a site crawled for days, for good). Such a host
is tried again ``after`` seconds (``--robots-ttl``, a day by default): its rows closed so
reopen, its slot starts afresh (robots.txt asked first) and URLs of it are admitted
again (:meth:`~ubipy.peer.hostmoves.HostMovesMixin.revive_host`). A host refused for
good (a private address, a certificate error) stays given up. The latest ``kept``
hosts are remembered, as their reasons are (commits.GIVEN_UP_KEPT); the shard keeps
when each was given up (store/givenup.py), so that a restart tries them again when
the run before would have (before, a restart forgot them and their rows stayed
closed).
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator

import trio

from ubipy.errors import StorageError
from ubipy.fetch import ROBOTS_UNREACHABLE, DnsFailure
from ubipy.peer.wakeup import Wakeup
from ubipy.store import GivenUp, Shard

__all__ = ["ROBOTS_UNREACHABLE", "TRIED_AGAIN", "GiveUps", "to_restore"]

log = logging.getLogger(__name__)

#: The reasons a host given up is tried again for.
TRIED_AGAIN = frozenset(
    {ROBOTS_UNREACHABLE}
    | {f.value for f in (DnsFailure.NO_SUCH_NAME, DnsFailure.TEMPORARY, DnsFailure.TIMEOUT)}
)
# A revival the shard refused is tried again this much later.
_STORAGE_RETRY = 60.0


class GiveUps:
    """When each host given up for one of TRIED_AGAIN is tried again (trio's clock)."""

    def __init__(self, after: float, kept: int = 65_536) -> None:
        self._after = after
        self._kept = kept
        # Host -> when it is tried again; in that order, since ``after`` is the same
        # for all (a host given up again moves to the end).
        self._due: OrderedDict[str, float] = OrderedDict()
        self._wake = Wakeup()

    def __len__(self) -> int:
        return len(self._due)

    def closed(self, hosts: Iterable[tuple[str, str]], now: float) -> None:
        """Hosts given up (their rows closed on disk at ``now``), and why."""
        due = self._due
        for host, reason in hosts:
            if reason in TRIED_AGAIN:
                due[host] = now + self._after
                due.move_to_end(host)
                if len(due) > self._kept:
                    due.popitem(last=False)
                self._wake.set()  # not at every commit: most give nothing up

    def restore(self, hosts: Iterable[GivenUp], wall: float, now: float) -> None:
        """Hosts an earlier run gave up, at wall-clock times: tried again ``after``
        seconds from then (now, if that is past; never later than ``after`` from now,
        whatever the clock did). ``wall`` and ``now``: the time on both clocks."""
        due = sorted(
            (now + min(max(g.at + self._after - wall, 0.0), self._after), g.host)
            for g in hosts
            if g.reason in TRIED_AGAIN
        )
        for at, host in due[-self._kept :]:
            self._due[host] = at
            self._due.move_to_end(host)
        if due:
            self._wake.set()

    async def run(self, revive: Callable[[str], int]) -> None:
        """Call ``revive(host)`` as each host's time comes (it raises StorageError when
        the shard refuses: tried again a minute later)."""
        due = self._due
        while True:
            await self._wake.wait(next(iter(due.values()), None))
            now = trio.current_time()
            while due and next(iter(due.values())) <= now:
                host, _ = due.popitem(last=False)
                try:
                    n = revive(host)
                except StorageError as exc:
                    log.warning("%s: not tried again yet: %s", host, exc)
                    due[host] = now + _STORAGE_RETRY
                    break
                log.info("%s: given up a while ago, tried again (%d URLs)", host, n)


def to_restore(shard: Shard, given_up: Iterable[GivenUp]) -> Iterator[tuple[str, int]]:
    """The hosts with pending rows a start restores, and how many each has. A host the
    last run gave up has its pending rows (admitted after it was: they stayed pending)
    closed as its others were, for its revival to reopen (QA: its robots.txt was asked
    again at every restart, though it was to be tried again a --robots-ttl later)."""
    why = {g.host: g.reason for g in given_up}
    for host, n in shard.pending_hosts():
        if host in why:
            try:
                shard.skip_host(host, why[host])
                continue
            except StorageError as exc:  # a full disk: asked again, as before
                log.warning("%s: its pending URLs not closed: %s", host, exc)
        yield host, n
