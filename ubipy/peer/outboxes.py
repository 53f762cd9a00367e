"""URLs waiting for their owners, as the crawler sees them: those a ring change made
this peer's own come home out of the outbox, and those their owner acknowledged leave
it (the router, :mod:`ubipy.peer.router`, decides where each goes; the outbox on disk,
:mod:`ubipy.store.outbox`, keeps them meanwhile).

A mixin of :class:`~ubipy.peer.crawler.Crawler`, whose state it reads and changes.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterable

import trio

from ubipy.errors import StorageError
from ubipy.peer.commits import Commits
from ubipy.peer.reading import RedirectChains
from ubipy.peer.refiltering import Refilter
from ubipy.peer.router import Router
from ubipy.peer.wakeup import Wakeup
from ubipy.ring import Placement
from ubipy.store import FrontierRow, NewURL, Shard

log = logging.getLogger("ubipy.peer.crawler")  # the crawler's log

__all__ = ["OutboxesMixin"]


class OutboxesMixin:
    """The crawler's side of forwarding (see the module's docstring)."""

    router: Router | None
    _shard: Shard
    on_forward: Callable[[], None]
    _come_home: list[NewURL]
    _come_home_waits: bool
    _reload_waits: bool  # reading the outbox back failed: the committer tries again
    _reload_failing: bool  # and that was said
    _spill_marks: list[int]
    _outbox_unread: bool  # a full disk stopped reading it at the start
    _refilter: Refilter
    _commits: Commits
    _redirects: RedirectChains
    _to_write: Wakeup
    _flush_now: Wakeup

    def _durably(
        self, candidates: list[NewURL], *, save_scope: bool = False, drop_from_outbox: bool = False
    ) -> tuple[list[FrontierRow], list[NewURL]]:
        raise NotImplementedError

    def ring_changed(self, placement: Placement) -> None:
        """A new ring: URLs waiting for others may now be ours, others go elsewhere."""
        if self.router is None:
            return
        local, _ = self.router.ring_changed(placement, trio.current_time())
        self._come_home.extend(local)
        self._admit_come_home()
        self.reload_outbox()
        self.on_forward()

    def reload_outbox(self) -> None:
        """URLs the router kept on disk alone (their owner did not answer, or had more
        waiting than memory should hold) come back to it once it may take them; those a
        ring change made this peer's own are admitted, a chunk a call. What cannot be
        read now is read on the committer's next try."""
        router = self.router
        if router is None or not (owners := router.reloads()):
            self._reload_waits = False
            return
        self._reload_waits = True
        if not self._mark_spilled():
            self._to_write.set()
            return
        back: list[int] = []
        try:
            hosts: dict[str, list[str]] = {}
            for host in self._shard.outbox_spilled_hosts():
                hosts.setdefault(router.owner(host), []).append(host)
            # Held here, acknowledged, or taken home already, with their rows on disk.
            skip = router.held_fps() | self._commits.acked_waiting
            skip.update(u.fp for u in self._come_home)
            now = trio.current_time()
            for owner in owners:
                if owner == router.self_id and self._come_home:
                    continue  # ours not yet admitted: the next chunk once they are
                rows = self._shard.outbox_spilled_of(hosts.get(owner, ()))
                with contextlib.closing(rows):
                    taken = router.reload(owner, rows, now, skip)
                if owner == router.self_id:
                    self._come_home.extend(taken)
                back += [u.fp for u in taken]
        except sqlite3.Error as exc:
            if not self._reload_failing:  # said once a failure, not at every try
                log.warning("cannot read the outbox back (tried again): %s", exc)
            self._reload_failing = True
            self._to_write.set()  # the committer tries again
            return
        finally:
            # Rows left marked are read again, and passed over while held: no harm.
            with contextlib.suppress(StorageError):
                self._shard.outbox_unspill(back)
        self._reload_failing = False
        self._admit_come_home()
        # More of ours on disk: the committer reads the next chunk at once, with its
        # turn of the loop between (an admission refused waits for its retry).
        self._reload_waits = router.self_id in router.reloads()
        if self._reload_waits and not self._come_home:
            self._flush_now.set()
        self.on_forward()

    def _mark_spilled(self) -> bool:
        """Mark the rows the router now keeps on disk alone; False if the shard refused
        (they are marked at the next try, and nothing is read back before)."""
        if self.router is not None:
            self._spill_marks += self.router.take_marks()
        if not self._spill_marks:
            return True
        try:
            self._shard.outbox_spill(self._spill_marks)
        except StorageError:
            return False
        self._spill_marks = []
        return True

    def _read_outbox(self) -> None:
        """The outbox an earlier run left, a chunk at a time (it may hold millions):
        each URL routed, or admitted if it is this peer's own now. While the shard
        refuses writes, the rest stay on disk, read once what waits is admitted."""
        router = self.router
        assert router is not None
        self._outbox_unread = False
        held = router.held_fps()  # read before a full disk stopped the reading
        for chunk in self._refilter.outbox():
            fresh = [u for u in chunk if u.fp not in held]
            self._come_home.extend(router.enqueue(fresh, trio.current_time()))
            self._admit_come_home()
            if self._come_home_waits:
                self._outbox_unread = True
                return

    def _admit_come_home(self) -> None:
        """Admit the URLs a ring change made this peer's own, out of the outbox; while
        the shard refuses writes they wait here, for the next flush (a peer died of it
        before)."""
        if not self._come_home:
            return
        try:
            self._durably(self._come_home, drop_from_outbox=True)
        except StorageError as exc:
            if not self._come_home_waits:  # said once an outage, as the flush's failure is
                log.warning("%d URLs now ours wait for the shard: %s", len(self._come_home), exc)
            self._come_home_waits = True
            self._to_write.set()  # the committer tries again after storage_retry
            return
        self._redirects.carried(self._come_home)  # an earlier run's outbox's, after a start
        self._come_home, self._come_home_waits = [], False
        if self._outbox_unread:
            self._read_outbox()

    def forwarded(self, fps: Iterable[int]) -> None:
        """An owner acknowledged these forwarded URLs: their outbox rows can go."""
        self._commits.acked(fps)
        self._flush_now.set()
