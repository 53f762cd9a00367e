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
        ring change made this peer's own are admitted."""
        router = self.router
        if router is None or not (owners := router.reloads()):
            return
        try:
            hosts: dict[str, list[str]] = {}
            for host in self._shard.outbox_hosts():
                hosts.setdefault(router.owner(host), []).append(host)
            # Acknowledged, or taken home already, with their rows still on disk.
            skip = self._commits.acked_waiting | {u.fp for u in self._come_home}
            now = trio.current_time()
            for owner in owners:
                with contextlib.closing(self._shard.outbox_of(hosts.get(owner, ()))) as rows:
                    self._come_home.extend(router.reload(owner, rows, now, skip))
        except sqlite3.Error as exc:  # read again at the next acknowledgement
            log.warning("cannot read the outbox back: %s", exc)
            return
        self._admit_come_home()
        self.on_forward()

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

    def forwarded(self, fps: Iterable[int]) -> None:
        """An owner acknowledged these forwarded URLs: their outbox rows can go."""
        self._commits.acked(fps)
        self._flush_now.set()
