"""The crawl loop of one peer: admission, politeness, fetching, parsing, storing.

It composes ``fetch`` and ``store``: a dispatcher takes ready jobs from the
politeness scheduler and starts one task per request under a global
concurrency limit; each task fetches, parses and queues its outcome; a
committer writes outcomes in grouped transactions (page row, frontier "done"
mark and the links it revealed together) and only then hands the new URLs to
the scheduler. A graceful stop lets in-flight requests finish and commits them,
so a restart fetches nothing twice.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

import httpx2
import trio

from ubipy.config import CrawlConfig
from ubipy.fetch.fetcher import FetchResult, fetch
from ubipy.fetch.parse import content_digest, parse_html
from ubipy.fetch.politeness import Entry, HostRobots, Job, JobKind, Scheduler
from ubipy.fetch.scope import ScopeFilter
from ubipy.fetch.urls import BadURL, fingerprint, host_key, normalize
from ubipy.store.admission import Admission
from ubipy.store.shard import FrontierRow, NewURL, PageRecord, Shard

log = logging.getLogger(__name__)

_SCOPE_META = "scope_roots"


@dataclass(slots=True)
class CrawlStats:
    started_at: float = 0.0
    pages: int = 0
    bytes_in: int = 0
    errors: int = 0
    timeouts: int = 0
    truncated: int = 0
    robots_requests: int = 0
    robots_disallowed: int = 0
    robots_given_up: int = 0
    links_seen: int = 0
    out_of_scope: int = 0
    too_deep: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)


@dataclass(frozen=True, slots=True)
class SeedResult:
    offered: int
    admitted: int
    refused: tuple[tuple[str, str], ...]


@dataclass(slots=True)
class _Outcome:
    page: PageRecord
    discovered: list[NewURL]


class Crawler:
    def __init__(
        self,
        config: CrawlConfig,
        shard: Shard,
        client: httpx2.AsyncClient,
    ) -> None:
        self.config = config
        self._shard = shard
        self._client = client
        self.stats = CrawlStats()
        self.admission = Admission(
            shard,
            recent_size=config.recent_cache_size,
            bloom_capacity=config.bloom_initial_capacity,
            bloom_error_rate=config.bloom_error_rate,
        )
        self.scheduler = Scheduler(
            delay=config.delay,
            window=config.host_window,
            loader=self._load_window,
            max_crawl_delay=config.max_crawl_delay,
            robots_retry_base=config.robots_retry_base,
            robots_max_attempts=config.robots_max_attempts,
        )
        roots = shard.get_meta(_SCOPE_META)
        self.scope = ScopeFilter(config.scope, roots.split("\n") if roots else ())
        self._outcomes: list[_Outcome] = []
        self._skips: list[tuple[int, str]] = []
        self._host_marks: dict[str, tuple[float, float]] = {}
        self._wakeup = trio.Event()
        self._flush_now = trio.Event()
        self._idle = trio.Event()
        self._stopping = False
        self.stopped = trio.Event()
        self._pending = 0

    # -- start-up -----------------------------------------------------------
    def _load_window(self, host: str, after_seq: int, limit: int) -> list[Entry]:
        rows = self._shard.pending_for_host(host, after_seq, limit)
        return [Entry(r.fp, r.seq, r.url, r.depth) for r in rows]

    def _restore(self) -> None:
        loaded = self.admission.load()
        # A restarted peer owes each host the delay after the last run's last request.
        wall, now = time.time(), trio.current_time()
        for host, (last_end, delay) in self._shard.host_marks().items():
            if last_end + delay > wall:
                self.scheduler.not_before(host, now + (last_end + delay - wall))
        for host, n in self._shard.pending_hosts():
            self.scheduler.restore(host, n)
            self._pending += n
        if loaded:
            log.info("resumed: %d seen URLs, %d pending", loaded, self._pending)

    # -- public -------------------------------------------------------------
    @property
    def pending(self) -> int:
        """Admitted URLs not yet fetched or skipped."""
        return self._pending

    def seed(self, urls: Iterable[str]) -> SeedResult:
        """Admit seeds at depth 0; they also widen the crawl's scope."""
        offered = 0
        refused: list[tuple[str, str]] = []
        candidates: list[NewURL] = []
        for raw in urls:
            offered += 1
            try:
                url = normalize(raw)
            except BadURL as exc:
                refused.append((raw, exc.reason.value))
                continue
            self.scope.add_seed(url)
            candidates.append(NewURL(fingerprint(url), url, host_key(url), 0))
        with self._shard.transaction():
            self._shard.set_meta(_SCOPE_META, "\n".join(sorted(self.scope.roots)))
            rows = self._admit(candidates)
        self._schedule(rows)
        return SeedResult(offered, len(rows), tuple(refused))

    async def wait_idle(self) -> None:
        """Wait until the frontier is empty and nothing is in flight or unsaved."""
        while not self._is_idle():
            await self._idle.wait()

    def stop(self) -> None:
        """Begin a graceful stop: no new requests; in-flight ones finish and are saved."""
        self._stopping = True
        self._wakeup.set()

    # -- the loops ----------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self.stats.started_at = trio.current_time()
        self._restore()
        try:
            async with trio.open_nursery() as jobs, trio.open_nursery() as loops:
                loops.start_soon(self._committer)
                task_status.started()
                await self._dispatch(jobs)
                loops.cancel_scope.cancel()
                # Leaving ``jobs`` waits for the requests in flight.
        finally:
            self._flush()
            self.stopped.set()

    async def _dispatch(self, jobs: trio.Nursery) -> None:
        limiter = trio.Semaphore(self.config.concurrency)
        while not self._stopping:
            job = self.scheduler.next_job(trio.current_time())
            if job is None:
                if self._is_idle():
                    self._idle.set()
                wake = self.scheduler.next_wakeup()
                with trio.move_on_at(wake if wake is not None else math.inf):
                    await self._wakeup.wait()
                self._wakeup = trio.Event()
                continue
            if job.kind is JobKind.DISALLOWED:
                assert job.entry is not None
                self.stats.robots_disallowed += 1
                self._skips.append((job.entry.fp, "robots"))
                self._flush_now.set()
                continue
            await limiter.acquire()
            jobs.start_soon(self._run_job, job, limiter)

    async def _run_job(self, job: Job, limiter: trio.Semaphore) -> None:
        try:
            result = await fetch(self._client, job.url, max_bytes=self.config.max_body_bytes)
        finally:
            limiter.release()
        now = trio.current_time()
        end_wall = time.time()
        if job.kind is JobKind.ROBOTS:
            self._robots_done(job, result, now)
        else:
            assert job.entry is not None
            self.scheduler.finished(job.host, now)
            try:
                self._page_done(job.host, job.entry, result)
            except Exception:
                # A page that breaks the parser is a bad page, not a dead peer;
                # it is stored as an error so it is not fetched again.
                log.exception("processing %s failed", job.url)
                self._page_done(job.host, job.entry, _as_error(result, "processing failed"))
        slot = self.scheduler.slot(job.host)
        assert slot is not None
        self._host_marks[job.host] = (end_wall, slot.delay)
        self._wakeup.set()

    def _robots_done(self, job: Job, result: FetchResult, now: float) -> None:
        self.stats.robots_requests += 1
        decision = self.scheduler.robots_answer(
            job.host,
            now,
            status=result.status,
            location=result.location,
            body=result.body,
        )
        if decision is None:
            return
        slot = self.scheduler.slot(job.host)
        if slot is not None and slot.robots_state is HostRobots.GIVEN_UP:
            # The scheduler gave the host up: its queued URLs are closed, not lost.
            self.stats.robots_given_up += 1
            n = self._shard.skip_host(job.host, "robots.txt unreachable")
            self._pending -= n
            log.warning("%s: robots.txt unreachable, %d URLs skipped", job.host, n)

    def _page_done(self, host: str, entry: Entry, result: FetchResult) -> None:
        stats = self.stats
        discovered: list[NewURL] = []
        title = None
        digest = None
        if result.error is not None:
            stats.errors += 1
            if result.error.startswith("timeout"):
                stats.timeouts += 1
            log.info("fetch failed: %s: %s", entry.url, result.error)
        else:
            stats.pages += 1
            stats.bytes_in += len(result.body)
            stats.truncated += result.truncated
            assert result.status is not None
            stats.statuses[result.status] += 1
            digest = content_digest(result.body)
            if result.is_redirect:
                assert result.location is not None
                # A redirect is not a link hop: the target keeps the depth.
                discovered = self._candidates([result.location], entry.url, entry.depth)
            elif result.is_html:
                parsed = parse_html(result.body, entry.url, encoding=result.charset)
                title = parsed.title
                stats.refused["link"] += parsed.links_refused
                if entry.depth + 1 > (self.config.max_depth or math.inf):
                    stats.too_deep += len(parsed.links)
                else:
                    discovered = self._candidates(parsed.links, None, entry.depth + 1)
        page = PageRecord(
            fp=entry.fp,
            url=entry.url,
            host=host,
            status=result.status,
            content_type=result.content_type,
            length=len(result.body),
            truncated=result.truncated,
            title=title,
            fetched_at=time.time(),
            last_modified=result.last_modified,
            etag=result.etag,
            digest=digest,
            depth=entry.depth,
            error=result.error,
            body=result.body if self.config.store_bodies and result.body else None,
        )
        self._outcomes.append(_Outcome(page, discovered))
        if len(self._outcomes) >= self.config.commit_every_pages:
            self._flush_now.set()

    def _candidates(self, links: Iterable[str], base: str | None, depth: int) -> list[NewURL]:
        out: list[NewURL] = []
        stats = self.stats
        for link in links:
            stats.links_seen += 1
            if base is not None:
                try:
                    link = normalize(link, base)
                except BadURL as exc:
                    stats.refused[exc.reason.value] += 1
                    continue
            host = host_key(link)
            if not self.scope.allows_host(host):
                stats.out_of_scope += 1
                continue
            out.append(NewURL(fingerprint(link), link, host, depth))
        return out

    async def _committer(self) -> None:
        while True:
            with trio.move_on_after(self.config.commit_interval):
                await self._flush_now.wait()
            self._flush_now = trio.Event()
            if self._outcomes or self._skips or self._host_marks:
                self._flush()
                self._wakeup.set()

    def _flush(self) -> None:
        outcomes, self._outcomes = self._outcomes, []
        skips, self._skips = self._skips, []
        marks, self._host_marks = self._host_marks, {}
        if not outcomes and not skips and not marks:
            return
        try:
            with self._shard.transaction():
                self._shard.save_host_marks(marks)
                new_rows: list[FrontierRow] = []
                for o in outcomes:
                    new_rows.extend(self._admit(o.discovered))
                self._shard.record_pages([o.page for o in outcomes])
                if skips:
                    self._shard.mark_skipped(skips)
        except BaseException:
            self.admission.rollback()
            # Keep the outcomes: a later flush may succeed; nothing admitted is lost.
            self._outcomes = outcomes + self._outcomes
            self._skips = skips + self._skips
            self._host_marks = marks | self._host_marks
            raise
        self._pending -= len(outcomes) + len(skips)
        self._schedule(new_rows)

    def _admit(self, candidates: list[NewURL]) -> list[FrontierRow]:
        return self.admission.admit(candidates) if candidates else []

    def _schedule(self, rows: Iterable[FrontierRow]) -> None:
        n = 0
        for r in rows:
            n += 1
            if not self.scheduler.add(r.host, Entry(r.fp, r.seq, r.url, r.depth)):
                self._skips.append((r.fp, "robots.txt unreachable"))
        self._pending += n
        if n:
            # Only a set event is replaced: tasks waiting on an unset one must see it fire.
            if self._idle.is_set():
                self._idle = trio.Event()
            self._wakeup.set()

    def _is_idle(self) -> bool:
        return self.scheduler.idle() and not self._outcomes and not self._skips


def _as_error(result: FetchResult, error: str) -> FetchResult:
    return dataclasses.replace(result, body=b"", error=error)
