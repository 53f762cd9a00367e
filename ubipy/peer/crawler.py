"""The crawl loop of one peer: admission, politeness, fetching, parsing, storing.

It composes ``fetch`` and ``store``: under a global concurrency limit, each
worker task takes a ready job from the politeness scheduler, fetches, parses and
queues its outcome, then takes the next while one is ready (a dispatcher starts
workers as slots free up and hosts come due); a
committer writes outcomes in grouped transactions (page row, frontier "done"
mark and the links it revealed together) and only then hands the new URLs to
the scheduler. A graceful stop lets in-flight requests finish and commits them,
so a restart fetches nothing twice.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

import httpx2
import trio

from ubipy.config import CrawlConfig
from ubipy.errors import StorageError
from ubipy.fetch import (
    PUT_BACK,
    ROBOTS_FETCH_BYTES,
    SITEMAP_MAX_BYTES,
    BodyGate,
    Entry,
    FetchOutcome,
    Job,
    JobKind,
    MediaTypes,
    Resolver,
    Scheduler,
    asked_wait,
    failed,
    fetch,
)
from ubipy.peer.commits import Commits, CommitTiming
from ubipy.peer.crawlstats import CrawlStats, SeedResult
from ubipy.peer.discovery import candidates, seed_candidates
from ubipy.peer.giveups import ROBOTS_UNREACHABLE, GiveUps, to_restore
from ubipy.peer.hostmoves import HostMovesMixin
from ubipy.peer.ordering import Ordering
from ubipy.peer.outboxes import OutboxesMixin
from ubipy.peer.pageanswers import SITEMAP_READS, PageAnswersMixin
from ubipy.peer.reading import RedirectChains
from ubipy.peer.refiltering import Refilter
from ubipy.peer.refreshing import Refresher
from ubipy.peer.resolving import ResolveStage
from ubipy.peer.robotsanswers import robots_kept
from ubipy.peer.router import Router
from ubipy.peer.scopesharing import keep_scope, load_scope, widen_to_redirect
from ubipy.peer.sitemapping import Sitemapping, page_accept
from ubipy.peer.wakeup import Wakeup
from ubipy.store import Admission, FrontierRow, HostMark, NewURL, PageRecord, Shard

__all__ = ["Crawler"]

log = logging.getLogger(__name__)

# URLs closed without a request (robots.txt, a host's page budget) in one go before the
# loop lets others run, and the seconds they may take (a robots.txt of 26,000 wildcard
# rules took 30 ms a check of a long URL: 512 held the loop 15 s, its pings with it).
_SKIPS_AT_ONCE, _SKIPS_FOR = 512, 0.02


class Crawler(HostMovesMixin, PageAnswersMixin, OutboxesMixin):
    def __init__(
        self,
        config: CrawlConfig,
        shard: Shard,
        client: httpx2.AsyncClient,
        router: Router | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        """``resolver``: look hosts up in a stage of their own (None: the transport
        does, as it connects)."""
        self.config = config
        # Without a router this peer is a cluster of one and owns every host.
        self.router = router
        # Called when the router has something new to send.
        self.on_forward: Callable[[], None] = lambda: None
        self.on_seed_redirect: Callable[[str, str], object] = functools.partial(
            widen_to_redirect, self
        )
        # Called after each commit with the URLs admitted, the pages stored and the
        # hosts' new politeness marks; told of a host taken over's done pages and mark.
        self.on_commit: Callable[
            [Sequence[FrontierRow], Sequence[PageRecord], Mapping[str, HostMark]], None
        ] = lambda rows, pages, marks: None
        self.on_taken: Callable[[str, Sequence[int], HostMark | None], None] = lambda *_: None
        # Called when a request to a host ends; its mark goes in the next commit.
        self.on_request_end: Callable[[str], None] = lambda host: None
        # Asked before each request to a host; False: not now (it is abandoned).
        self.clear_to_fetch: Callable[[str], Awaitable[bool]] = _always
        self._shard = shard
        self._archives_robots = config.fetch.store_bodies and shard.keeps_warc
        self._client = client
        self.stats = CrawlStats()
        self.admission = Admission(
            shard,
            recent_size=config.store.recent_cache_size,
            bloom_capacity=config.store.bloom_initial_capacity,
            bloom_error_rate=config.store.bloom_error_rate,
        )
        wanted = None if resolver is None else resolver.wanted
        # What request goes next (--order): the scheduler loads windows through it.
        # The committer sleeps until something is to be written (an idle peer's CPU).
        self._to_write = Wakeup()
        self._commits = Commits(self._to_write.set)
        self.order = Ordering(config, shard, lambda: self.scheduler, self._commits)
        # The --include/--exclude filters, built once: the scope's, the refilter's and
        # the refresher's.
        self.scope = load_scope(shard, config.bounds)
        self._scope_unsaved = False
        self._come_home: list[NewURL] = []
        self._come_home_waits = False  # their failure to be written was said
        self._reload_waits = self._reload_failing = False
        self._outbox_unread = False
        self._spill_marks: list[int] = []
        filters = self.scope.filters
        self._refilter = Refilter(filters, shard, self._commits, self.stats)
        self.scheduler = Scheduler.of(
            config, self._refilter.loader(*self.order.loaders), wanted, self._recall
        )
        self.scheduler.robots.cache = functools.partial(robots_kept, shard)
        on = config.recrawl.recrawl  # a continuous crawl: pages fetched come due again
        self.refresher = Refresher(config, shard, lambda: self.scheduler, filters) if on else None
        self._accept = MediaTypes(config.fetch.accept).allows
        bounds = config.bounds
        self._redirects = RedirectChains()
        self._candidates = functools.partial(
            candidates, scope=self.scope, max_path_repeats=bounds.max_path_repeats, stats=self.stats
        )
        self.sitemaps = Sitemapping(
            bounds, self._candidates, self.stats,
            keep_bodies=config.fetch.store_bodies, score=self.order.seed_score,
            seeded=self.scope.seeded, in_scope=self.scope.allows_host, chains=self._redirects,
        )  # fmt: skip
        self._accepts = functools.partial(page_accept, self._accept, sitemaps=self.sitemaps.enabled)
        # Set while the shard refuses writes; cleared by the first flush that works.
        self.storage_error: str | None = None
        self.storage_failing = trio.Event()
        # Fires (and is replaced) whenever a request ends.
        self.request_ended = trio.Event()
        self._wakeup = Wakeup()
        self._flush_now = Wakeup()
        self._timing = CommitTiming(config.store, replicated=config.replication.replicas > 1)
        self.dns: ResolveStage | None = None
        if resolver is not None:
            wake = (self._wakeup.set, self._flush_now.set)
            self.dns = ResolveStage(
                resolver, self.scheduler, self._commits, wake=wake, seeded=self.scope.seeded,
                kept=shard, per_ip=config.politeness.per_ip,
            )  # fmt: skip
        self._idle = trio.Event()
        self.giveups = GiveUps(config.politeness.robots_ttl)
        self._stopping = False
        # Why no request may start now (the peer lost sight of a majority), if so.
        self.paused: str | None = None
        # The requests in flight, each in a scope of its own (its deadline the fetch
        # deadline), to abandon on a pause; True once abandoned.
        self._in_flight: dict[trio.CancelScope, bool] = {}
        self._sitemap_reads = trio.Semaphore(SITEMAP_READS)
        self._sitemap_readers = (trio.Semaphore(1), trio.Semaphore(1))
        self._large_reader = trio.Semaphore(1)
        # One slot a request in flight (--concurrency), each held by a worker.
        self._limiter = trio.Semaphore(config.politeness.concurrency)
        self.stopped = trio.Event()
        self._pending = 0
        self._crashed = False
        self.unsaved = 0  # pages fetched but not saved at the stop (the shard refused)

    # -- start-up -----------------------------------------------------------
    def _restore(self) -> None:
        loaded = self.admission.load()
        self._refilter.reopen()  # before the pending rows are counted
        if self.refresher is not None:
            self.stats.filtered.update(self.refresher.load())
        # A restarted peer owes each host the delay after the last run's last request,
        # and what it spent of the host's budget: recalled as the host's slot is made.
        given_up = self._shard.given_up()
        for host, n in to_restore(self._shard, given_up):
            self.scheduler.restore(host, n)
            self._pending += n
        self.giveups.restore(given_up, time.time(), trio.current_time())
        # And the URLs of them admitted from now on are closed too, until they are
        # tried again (QA: a new link to one asked its robots.txt again at each start).
        self._commits.remember_given_up(sorted(given_up, key=lambda g: g.at))
        # Unacknowledged forwards of the last run go out again; those the ring now places
        # here are admitted (left in the outbox, nothing would ever send them), or, on a
        # full disk, wait for the committer's next try (raised, the peer failed to start).
        if self.router is not None:
            self._read_outbox()
        if loaded:
            log.info("resumed: %d seen URLs, %d pending", loaded, self._pending)

    # -- public -------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Admitted URLs not yet fetched or skipped."""
        return self._pending

    def seed(self, urls: Iterable[str]) -> SeedResult:
        """Admit seeds at depth 0; they also widen the crawl's scope. Raises StorageError
        while the shard cannot be written: a seed is only accepted once it is durable."""
        if self.storage_error is not None:
            raise StorageError(self.storage_error)
        offered, found, refused = seed_candidates(
            urls, scope=self.scope, stats=self.stats, score=self.order.seed_score
        )
        rows, foreign = self._durably(found, save_scope=True)
        return SeedResult(offered, len(rows), tuple(refused), len(foreign))

    def admit_routed(self, urls: list[NewURL]) -> int:
        """Admit a batch another peer forwarded; returns how many were new here. URLs
        this peer's ring says belong elsewhere (the views differ for a moment while
        membership settles) are forwarded on, not fetched here; the redirects in a row
        that led to each are counted on from here. Raises StorageError if the batch
        could not be made durable: then it must not be acknowledged."""
        if self.storage_error is not None:
            raise StorageError(self.storage_error)
        rows, _ = self._durably(urls)
        self._redirects.carried(urls)
        return len(rows)

    def scope_now(self) -> tuple[frozenset[str], frozenset[str]]:
        return self.scope.roots, self.scope.seeds

    def add_scope_roots(self, roots: Iterable[str], seeds: Iterable[str] = ()) -> bool:
        """Widen the scope with what another peer's seeds brought; True if any was new."""
        new = self.scope.add_roots(roots, seeds)
        if new or self._scope_unsaved:
            # Set until saved: a SCOPE frame that a full disk left unacknowledged
            # comes again with nothing new, and must then be saved.
            self._scope_unsaved = True
            with self._shard.transaction():
                keep_scope(self._shard, self.scope)
            self._scope_unsaved = False
        return new

    def release_held(self) -> None:
        """Held hosts may be free now: look at them again."""
        self.scheduler.release()
        self._wakeup.set()

    def _place(
        self, candidates: Sequence[NewURL], *, again: bool = False
    ) -> tuple[list[FrontierRow], list[NewURL]]:
        """Inside a transaction: admit this peer's URLs, keep the others' in the outbox
        (``again``: they come out of it, see :meth:`Router.split`)."""
        if self.router is None:
            return self.admission.admit(candidates), []
        local, foreign = self.router.split(candidates, again=again)
        if foreign:
            self._shard.outbox_add(foreign)
        return self.admission.admit(local), foreign

    def _durably(
        self, candidates: list[NewURL], *, save_scope: bool = False, drop_from_outbox: bool = False
    ) -> tuple[list[FrontierRow], list[NewURL]]:
        try:
            with self._shard.transaction():
                if save_scope:
                    keep_scope(self._shard, self.scope)
                if drop_from_outbox:
                    self._shard.outbox_remove([c.fp for c in candidates])
                kept = self._refilter.kept(candidates)
                rows, foreign = self._place(kept, again=drop_from_outbox)
        except StorageError as exc:
            self.admission.rollback()
            # Seeds widened the scope in memory: the next SCOPE frame saves it.
            self._scope_unsaved |= save_scope
            raise StorageError(f"cannot save admitted URLs: {exc}") from exc
        self._committed(rows, foreign)
        return rows, foreign

    def _committed(
        self,
        rows: list[FrontierRow],
        foreign: list[NewURL],
        done: Sequence[PageRecord] = (),
        marks: Mapping[str, HostMark] | None = None,
    ) -> None:
        self._schedule(rows)
        self.order.committed(self.admission.take_credits())
        if rows or done or marks:
            self.on_commit(rows, done, marks or {})
        if foreign and self.router is not None:
            # The split was just made under the same ring: nothing comes back local.
            self.router.enqueue(foreign, trio.current_time())
            self.on_forward()

    async def wait_idle(self) -> None:
        """Wait until the frontier is empty and nothing is in flight or unsaved."""
        while not self._is_idle():
            if self._idle.is_set():
                # Set while idle, then writes came that schedule nothing: the
                # dispatcher sets a new one once they are committed.
                self._idle = trio.Event()
            await self._idle.wait()

    def stop(self) -> None:
        """Begin a graceful stop: no new requests; in-flight ones finish and are saved."""
        self._stopping = True
        self._wakeup.set()

    def pause(self, reason: str | None) -> None:
        """Start no request while ``reason`` is given, abandoning those in flight:
        another peer may soon be given our hosts (the majority's fence) and must find
        none of our requests there; their URLs are asked again later. ``None`` resumes."""
        was, self.paused = self.paused, reason
        if (reason is None) != (was is None):  # a new reason alone wakes nobody
            if was is None:
                for scope in self._in_flight:
                    self._in_flight[scope] = True
                    scope.cancel()
            self._wakeup.set()

    def crash(self) -> None:
        """Die as kill -9 would, for tests that run peers in one process and cancel
        them: the final commit of a stop is skipped, so what was not committed is lost."""
        self._crashed = True

    # -- the loops ----------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.stats.started_at = trio.current_time()
        self._restore()
        try:
            async with trio.open_nursery() as jobs, trio.open_nursery() as loops:
                loops.start_soon(self._committer)
                loops.start_soon(self.giveups.run, self.revive_host)
                if self.refresher is not None:
                    loops.start_soon(self.refresher.run, self._wakeup.set)
                if self.dns is not None:
                    await loops.start(self.dns.run)
                task_status.started()
                await self._dispatch(jobs)
                loops.cancel_scope.cancel()
                # Leaving ``jobs`` waits for the requests in flight.
        finally:
            if not self._crashed and not self._flush():
                self.unsaved = self._commits.pages_waiting  # said at the exit (QA)
            self.stopped.set()

    async def _dispatch(self, jobs: trio.Nursery) -> None:
        """Start a worker while a slot is free and a host is ready. A worker goes on
        to the next ready host itself (:meth:`_work`), so while every slot is taken
        this loop sleeps; it wakes when a slot frees up, a host comes due, entries
        are added or the crawl resumes."""
        limiter = self._limiter
        while not self._stopping:
            # A slot first: a host is never taken (marked in flight) to wait for one.
            try:
                limiter.acquire_nowait()
            except trio.WouldBlock:
                await limiter.acquire()
            job = self._next_fetch()
            if job is not None:
                jobs.start_soon(self._work, job)
                continue
            limiter.release()
            if self._is_idle():
                self._idle.set()
            if self._commits.pages_waiting and self.storage_error is None:
                # A slot free and nothing ready: the links of the pages waiting
                # to be committed may be the work, so they go in now rather than
                # at the commit interval (a busy crawl commits by time and size).
                self._flush_now.set()
            # While paused nothing starts until resumed; while the shard refuses writes, the
            # committer's retry wakes this loop when a write works: neither waits for a host.
            await self._wakeup.wait(None if self._held_back() else self.scheduler.next_wakeup())

    def _held_back(self) -> bool:
        """Whether no request may start: stopping, paused, or the shard refusing writes
        (what is fetched could not be saved, and a host would be asked twice)."""
        return self._stopping or self.paused is not None or self.storage_error is not None

    def _next_fetch(self) -> Job | None:
        """The next request that may start now, if any: host resolutions and skipped
        URLs met on the way are handed on as they come. None while held back."""
        skipped, began = 0, time.perf_counter()
        while not self._held_back():
            if skipped >= _SKIPS_AT_ONCE or (skipped and time.perf_counter() - began > _SKIPS_FOR):
                # A host past its page budget with a long backlog: the rest after a
                # checkpoint (a million skips held the loop 5 s, its pings with it).
                self._wakeup.set()
                return None
            job = self.scheduler.next_job(trio.current_time())
            if job is None:
                return None
            if job.kind is JobKind.RESOLVE and self.dns is not None:
                self.dns.submit(job.host)
                continue
            if job.kind is JobKind.SKIP:
                assert job.entry is not None
                skipped += 1
                if job.entry.refresh:
                    # A page fetched before, due again: the refresher puts it off
                    # (counted there: QA read "2 URLs closed unasked" of these).
                    if self.refresher is not None:
                        self.refresher.barred(job.entry)
                    continue
                self.stats.closed(job.reason)
                if job.reason == "robots":
                    self.stats.robots_disallowed += 1
                self._commits.skip(job.entry.fp, job.reason)
                self._flush_now.set()
                continue
            if self.refresher is not None and job.entry is not None:
                self.refresher.handed_out(job.entry)
            return job
        return None

    async def _work(self, job: Job) -> None:
        """Make ``job``'s request, then the next ready host's, in one task holding one
        of the concurrency's slots, until no host is ready: a task and two of the
        dispatcher's wake-ups fewer a request."""
        try:
            while True:
                await self._run_job(job)
                if self._flush_now.is_set():
                    # A commit is due: it goes before this slot's next request (the
                    # committer runs in the batch where the dispatcher starts that one,
                    # whose task runs in the next). Pages in flight may join it.
                    return
                next_job = self._next_fetch()
                if next_job is None:
                    return
                job = next_job
                if self._limiter.value:
                    # A slot is free: what the request that ended changed (its host
                    # due again, another host's address free) may be for it.
                    self._wakeup.set()
                # Between two requests, as between two tasks: others get their turn
                # even when a request ended without waiting (a refused address).
                await trio.lowlevel.checkpoint()
        finally:
            self._limiter.release()
            self._wakeup.set()

    async def _run_job(self, job: Job) -> None:
        if job.kind is JobKind.SITEMAP:
            await self._sitemap_job(job)  # with a turn to read it, if it is large
        else:
            await self._fetch_job(job, None)

    async def _fetch_job(self, job: Job, gate: BodyGate | None) -> None:
        robots = job.kind is JobKind.ROBOTS
        sitemap = gate is not None  # of any type, up to the protocol's 50 MB
        # robots.txt is only read up to the RFC's 500 KiB, so no more is fetched.
        cap = ROBOTS_FETCH_BYTES if robots else self.config.fetch.max_body_bytes
        cap = SITEMAP_MAX_BYTES if sitemap else cap  # whatever --max-body says of pages
        # One scope for the fetch deadline and an abandonment (a scope costs more
        # than the code of a page's fetch around it on some machines).
        scope = trio.CancelScope(deadline=trio.current_time() + self.config.fetch.fetch_deadline)
        self._in_flight[scope] = False
        # A sitemap's wait for its turn counts against the deadline: no request outlasts
        # it (an address's lease and a hand-off's hold count on that; a review). Its
        # reading may (then the host is asked nothing: its slot stays taken).
        try:
            with scope:
                # Paused or stopped since the job was taken (a worker's checkpoint between
                # two requests, or a task not yet started), or stopped while it waited to
                # be cleared (an address's lease): not made, asked again later.
                halted = self.paused is not None or self._stopping
                denied = False  # not cleared (an address's lease refused): no pause's
                if not halted:
                    denied = not await self.clear_to_fetch(job.host)
                    halted = denied or self._stopping
                if halted:
                    self._in_flight[scope] = True
                    scope.cancel()
                    await trio.lowlevel.checkpoint()  # raises here: no byte of it is sent
                accept = None if robots or sitemap else self._accepts(job.entry)
                copy = None
                if self.refresher is not None and job.entry is not None:
                    copy = self.refresher.validators(job.entry)
                result = await fetch(
                    self._client, job.url, max_bytes=cap, accept=accept, validators=copy,
                    html_cap=self.config.fetch.max_body_bytes if sitemap else None, gate=gate,
                )  # fmt: skip
        finally:
            # No checkpoint since the scope closed: a pause cannot have come between.
            abandoned = self._in_flight.pop(scope) and scope.cancelled_caught
        if scope.cancelled_caught and not abandoned:
            deadline = self.config.fetch.fetch_deadline
            detail = "timeout: over the fetch deadline"
            result = failed(job.url, FetchOutcome.TIMEOUT, detail, latency=deadline)
        now = trio.current_time()
        end_wall = time.time()
        proxy_down = not abandoned and result.outcome in PUT_BACK
        if abandoned or proxy_down:
            self.stats.abandoned += not (self._stopping or denied or proxy_down)  # a pause's
            if proxy_down:  # no ``result`` when abandoned
                self.stats.put_back[result.outcome] += 1
            self.scheduler.abandoned(job.host, job.entry, now, denied, proxy_down=proxy_down)
        else:
            if self.dns is not None:  # no connection: the host's next address, if any
                self.dns.ended(job.host, result.outcome)
            longest = self.config.fetch.max_retry_after
            asked = asked_wait(result, end_wall, cap=longest, host=job.host)
            if not robots:
                assert job.entry is not None
                await self._answered(job.host, job.entry, result, now, asked, end_wall)
            elif await self._robots_answered(job, result, now, asked, end_wall):
                self._flush_now.set()
        self._commits.mark(job.host, self._mark(job.host, end_wall, now))
        if self._timing.brings(now, self._commits.pages_waiting):  # any answer's wake-up
            self._flush_now.set()
        self.on_request_end(job.host)
        ended, self.request_ended = self.request_ended, trio.Event()
        ended.set()

    async def _committer(self) -> None:
        while True:
            if not self._commits and not self._come_home and not self._reload_waits:
                await self._to_write.wait()
            now = trio.current_time()
            retry = now + self.config.store.storage_retry
            failing = self.storage_error or self._come_home or self._reload_waits
            await self._flush_now.wait(retry if failing else self._timing.waiting(now))
            self._timing.done()
            if self._reload_waits:
                self.reload_outbox()
            if self._commits or self._come_home:
                self._flush()
                self._wakeup.set()

    def _flush(self) -> bool:
        """Write what is waiting in one transaction; False if the shard refused it."""
        self._mark_spilled()
        self._admit_come_home()
        self._read_answers()
        batch = self._commits.take()
        if batch is None:
            return True
        self.admission.fetched(a.page.fp for a in batch.answered)
        try:
            closed, rows, foreign = batch.write(self._shard, self._place)
        except StorageError as exc:
            self.admission.rollback()
            # Everything stays in memory for the next try: nothing admitted is lost,
            # and no new request starts until the shard takes writes again.
            self._commits.failed()
            self.stats.storage_failures += 1
            if self.storage_error is None:
                log.error(
                    "cannot write the data directory: %s; admission paused, %d pages held in "
                    "memory, retrying every %g s",
                    exc,
                    self._commits.pages_waiting,
                    self.config.store.storage_retry,
                )
            self.storage_error = str(exc)
            self.storage_failing.set()
            return False
        self._commits.committed()
        if self.storage_error is not None:
            log.warning("the shard takes writes again; crawling resumes")
            self.storage_error = None
            self.storage_failing = trio.Event()
        batch.report_closed()
        self.giveups.closed(batch.closed_hosts, trio.current_time())
        for why, n in closed.items():
            self.stats.closed(why, n)
        self._pending -= batch.settled + closed.total()
        self._committed(rows, foreign, batch.pages, batch.marks)
        return True

    def _schedule(self, rows: Iterable[FrontierRow]) -> None:
        n = 0
        given_up, scheduler = self._commits.given_up, self.scheduler
        for r in rows:
            n += 1
            # A host given up with no slot (the last run's, or one whose slot went
            # idle) would get a new one, its robots.txt asked again: closed instead.
            if (r.host not in given_up or scheduler.slot(r.host) is not None) and scheduler.add(
                r.host, Entry(r.fp, r.seq, r.url, r.depth, score=r.score)
            ):
                continue
            why = given_up.get(r.host, ROBOTS_UNREACHABLE)
            self._commits.skip(r.fp, why)
            self.stats.closed(why)
        self._pending += n
        if n:
            # Only a set event is replaced: tasks waiting on an unset one must see it fire.
            if self._idle.is_set():
                self._idle = trio.Event()
            self._wakeup.set()

    def _is_idle(self) -> bool:
        return self.scheduler.idle() and not self._commits and self.storage_error is None


async def _always(host: str) -> bool:
    return True
