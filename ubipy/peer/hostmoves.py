"""A host moving between peers, as the crawler sees it: its state read for its new
owner and forgotten once handed off, or received from its previous owner with the
politeness owed and, under ``--recrawl``, its pages' revisit state
(:mod:`ubipy.peer.handoff` drives the exchange).

A mixin of :class:`~ubipy.peer.crawler.Crawler`, whose state it reads and changes;
the crawl loop's own methods it calls are declared here.
"""

from __future__ import annotations

import functools
import itertools
import logging
import sqlite3
import time
from collections.abc import Callable, Sequence

import trio

from ubipy.config import CrawlConfig
from ubipy.errors import StorageError
from ubipy.fetch import HostRobots, Scheduler, retry_delay
from ubipy.peer.commits import Commits
from ubipy.peer.crawlstats import CrawlStats
from ubipy.peer.giveups import TRIED_AGAIN
from ubipy.peer.refreshing import Refresher
from ubipy.peer.resolving import ResolveStage
from ubipy.peer.wakeup import Wakeup
from ubipy.store import Admission, FrontierRow, HostMark, NewURL, RefreshRow, Shard
from ubipy.wire import DEFAULT_MAX_SKEW, MAX_MARK_DELAY

log = logging.getLogger("ubipy.peer.crawler")  # the crawler's log
_UNREAD = itertools.count()  # marks that could not be read

__all__ = ["HostMovesMixin"]


class HostMovesMixin:
    """The crawler's side of a hand-off (see the module's docstring)."""

    config: CrawlConfig
    _shard: Shard
    _commits: Commits
    scheduler: Scheduler
    admission: Admission
    refresher: Refresher | None
    _pending: int
    _idle: trio.Event
    _wakeup: Wakeup
    on_taken: Callable[[str, Sequence[int], HostMark | None], None]
    dns: ResolveStage | None
    stats: CrawlStats

    def _flush(self) -> bool:
        raise NotImplementedError

    def _durably(
        self, candidates: list[NewURL], *, save_scope: bool = False, drop_from_outbox: bool = False
    ) -> tuple[list[FrontierRow], list[NewURL]]:
        raise NotImplementedError

    def host_for_handoff(self, host: str) -> tuple[list[NewURL], list[int], HostMark | None] | None:
        """A host's state for its new owner, or None while a request to it is in flight."""
        if self.scheduler.busy(host):
            return None
        # Its outcomes must be on disk before they are read from there.
        if not self._flush():
            return None
        # Rows closed with the host given up go as pending: its new owner tries it
        # afresh (as fetched, they were lost, and so was their revival: a review).
        return self._shard.host_state(host, TRIED_AGAIN)

    def seed_lookup_of(self, host: str) -> frozenset[str] | None:
        """What the host's first lookup as a seed's allowed here (None: none), for its
        new owner, which takes it as the first."""
        return None if self.dns is None else self.dns.resolver.first_lookup(host)

    def adopt_seed_lookup(self, host: str, allowed: frozenset[str]) -> None:
        """The host's previous owner looked it up first, as a seed's (a host no seed
        here is on gets nothing of it: a peer's word alone allows no address); raises
        StorageError if that could not be kept."""
        if self.dns is not None and self.dns.seeded(host):
            self._shard.save_seed_lookup(host, self.dns.resolver.adopt(host, allowed))

    def revisits_of(self, host: str) -> list[RefreshRow]:
        """Under --recrawl, the revisit state of the host's pages, for its new owner."""
        return [] if self.refresher is None else self.refresher.revisits_of(host)

    def held_hosts(self) -> list[str]:
        """Hosts this peer holds anything for (to check against the ring)."""
        return self._shard.held_hosts()

    def handed_off(self, host: str) -> None:
        """The new owner has the host: forget it here."""
        pending = self._shard.pending_count(host)
        fps = self._shard.drop_host(host)  # raises StorageError: then nothing changed
        self._pending -= pending
        self.admission.forget(fps)
        self.scheduler.drop_host(host)
        # Given up here, it is not given up by its new owner: handed back, it would be
        # closed with no slot until tried again here (Crawler._schedule).
        self._commits.given_up.pop(host, None)
        if self.refresher is not None:
            self.refresher.forget_host(host)

    def take_over(
        self,
        host: str,
        pending: list[NewURL],
        done: list[int],
        mark: HostMark | None,
        revisits: Sequence[RefreshRow] = (),
    ) -> None:
        """Receive a host from its previous owner: its frontier, history and politeness,
        and under --recrawl its pages' revisit state (``revisits``: refreshed here from
        now on; a peer that does not recrawl leaves them). A host taken over from a
        replica's copy comes without them (copies carry none): its pages are no longer
        refreshed."""
        # Outcomes not yet written go first: the host's queue is rebuilt from disk below,
        # where a page fetched but not committed would still be pending (asked twice).
        # A shard that refuses them refuses the host too: its sender tries again.
        if not self._flush():
            raise StorageError(f"{host} not taken: the shard refuses writes")
        self._durably(pending)  # counted, and told to the scheduler, as any admitted
        refresher = self.refresher
        with self._shard.transaction():  # its done pages and their revisit state together
            closed = self._shard.take_done(host, done)
            if refresher is not None and revisits:
                refresher.adopt(revisits)
        self._pending -= closed
        self.admission.learn(done)
        given = False
        if mark is not None:
            mine = self._shard.host_mark(host)
            if given := mine is None or mine.last_end < mark.last_end:
                self._shard.save_host_marks({host: mark})
        # Rows of the host pending here were done elsewhere (its queue may hold them),
        # or it was given up here: its queue is rebuilt from disk. Only then: a
        # hand-off comes in chunks, and counting a host of a million URLs at each made
        # it quadratic (minutes).
        slot = self.scheduler.slot(host)
        stale = slot is not None and slot.robots_state is HostRobots.GIVEN_UP
        rebuilt = (closed > 0 or stale) and not self.scheduler.busy(host)
        if rebuilt:
            self.scheduler.drop_host(host)
            left = self._shard.pending_count(host)
            if left:
                self.scheduler.restore(host, left)
        if (newest := self._shard.host_mark(host)) is not None:  # ours or the one given
            # The one given ended on another peer's clock, which may be behind ours by
            # as much as frames are allowed (a minute): what is left of its wait is
            # read as if ours were that much behind (a 10 s Crawl-delay looked waited
            # out 30 s behind; and a whole wait from now would restart a long
            # back-off at every move).
            wall = time.time() - (DEFAULT_MAX_SKEW if given else 0.0)
            self._restore_mark(host, newest, wall, trio.current_time())
        if refresher is not None and rebuilt:  # its pages due again, in its new slot
            refresher.reschedule(host)
        # Its pending URLs went to this peer's replica as any admitted (_durably); its
        # history and mark go too, or the replica's heir asked its pages again.
        self.on_taken(host, done, newest)
        if self._idle.is_set():
            self._idle = trio.Event()
        self._wakeup.set()

    def revive_host(self, host: str) -> int:
        """A host given up a while ago is tried again (ubipy.peer.giveups): its rows
        closed for a reason that may pass are pending again, its slot made afresh if
        it is still the one given up (robots.txt asked first), and URLs of it are
        admitted again. Returns the rows reopened; raises StorageError."""
        reopened = self._shard.reopen_host(host, TRIED_AGAIN)
        slot = self.scheduler.slot(host)
        if slot is not None and slot.robots_state is HostRobots.GIVEN_UP:
            self.scheduler.drop_host(host)
        self._commits.given_up.pop(host, None)
        if reopened:
            self.scheduler.restore(host, reopened)
            self._pending += reopened
            if self._idle.is_set():
                self._idle = trio.Event()
            self._wakeup.set()
        return reopened

    def _mark(self, host: str, end_wall: float, now: float) -> HostMark:
        """What a restart or the host's next owner must know of it after a request that
        ended at ``end_wall`` (``now`` on this clock): the wait its server asked for,
        its Crawl-delay and pace or a longer back-off or Retry-After (forgotten, the
        host was asked again at the restart's first chance), to which the reader adds
        its own --delay; and its pages. At most a day, as a mark on the wire may say
        (``--max-retry-after`` may be longer)."""
        slot = self.scheduler.slot(host)
        assert slot is not None
        wait = min(MAX_MARK_DELAY, self.scheduler.asked_of(slot, now))
        return HostMark(end_wall, wait, slot.pages, slot.robots_tries)

    def _restore_mark(self, host: str, mark: HostMark, wall: float, now: float) -> None:
        """Politeness owed from another run or peer: wait out the wait after its last
        request.

        A last request "in the future" (another peer's clock ahead of ours, or a
        bogus mark) counts as now: the wait is never longer than the mark's, and that
        never longer than this peer would ask itself (a bogus mark, or another peer's
        longer limits)."""
        self.scheduler.restore_host(host, not_before=self._owed(mark, wall, now), pages=mark.pages)

    def _owed(self, mark: HostMark, wall: float, now: float) -> float:
        """When (on this clock, at ``now``) the host of ``mark`` may next be asked."""
        return now + max(0.0, min(mark.last_end, wall) + self._wait_of(mark) - wall)

    def _wait_of(self, mark: HostMark) -> float:
        """The wait owed after a mark's request: what its server asked for (a mark of an
        earlier version holds its --delay too) or this peer's --delay if longer; never
        longer than this peer would ask itself."""
        return max(self.config.politeness.delay, min(mark.delay, self._longest_wait))

    def _recall(self, host: str) -> tuple[float, int, int] | None:
        """What a new slot of ``host`` owes (the scheduler asks as it makes one): no
        request before the end of the wait after its last request here, as a restart
        would owe it, and its pages spent. None for a host never asked. A mark that
        cannot be read owes the longest wait a mark may give. A mark not yet written
        (a shard refusing writes) is newer than the shard's."""
        try:
            mark = self._commits.mark_of(host) or self._shard.host_mark(host)
        except (StorageError, sqlite3.Error) as exc:
            if next(_UNREAD) % 1000 == 0:  # a broken shard: every new host, maybe
                log.warning("%s: its politeness mark could not be read: %s", host, exc)
            return trio.current_time() + self._longest_wait, 0, 0
        if mark is None:
            return None
        wall, now = time.time(), trio.current_time()
        owed = self._owed(mark, wall, now)
        # Asked shortly before this run began, its wait over: a request may have been
        # in flight when the last run was killed, ending after its mark, which it never
        # wrote. The host waits its delay from this run's start too (it was asked 10 ms
        # early after a kill -9 and a restart within the second: QA). Not while the
        # mark's wait (a back-off) still ran at the start: nothing was asked after it,
        # and that wait counted from the start again pushed a failing host's retry
        # back at each restart (QA: 6 s became 38).
        # The mark's own wait tells whether it still ran: the last run waited at least
        # that, whatever this run's --delay (a review: raised at the restart, it hid a
        # request in flight at the kill).
        started = self.stats.started_at
        began = wall - (now - started)
        if began - mark.last_end < self.config.fetch.fetch_deadline and (
            mark.last_end + min(mark.delay, self._longest_wait) <= began
        ):
            owed = max(owed, started + self._wait_of(mark))
        return owed, mark.pages, mark.robots_tries

    @functools.cached_property
    def _longest_wait(self) -> float:
        """The longest wait this peer would ask itself after a request: a mark's is
        never taken longer (a host's mark is recalled each time its slot is made)."""
        polite = self.config.politeness
        return max(
            self.config.fetch.max_retry_after,
            polite.delay,
            polite.max_delay,
            polite.max_crawl_delay,
            retry_delay(polite.robots_max_attempts, polite.robots_retry_base),
        )
