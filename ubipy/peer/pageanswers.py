"""A page's answer, as the crawler takes it: the host's scheduler told, a retry if
the answer asks for one, else the page read (parsed, its links made candidates, its
record made for the shard) and what it leaves handed to the commits.

The pages answered since the last commit are read together, just before it
(:meth:`PageAnswersMixin._read_answers`), their links admitted in that commit as
before. Read one at a time, each right after the wake-up its answer brought, a page
cost far more at 2 requests in flight, where the peer sleeps between answers and its
code runs cold after each sleep: in alternated runs of ``python -m
bench.stage_costs`` at 2 in flight, the parse fell from 0.20-0.27 ms a page to
0.06-0.11 (0.06-0.08 at 64 in flight), a page's handling and commit together from
0.39-0.50 ms to 0.22-0.25. A body not yet read is held whole (a page read keeps its
body only when stored), so pages are read at once when their bodies reach
``READ_BYTES``: at most 4 MiB more held than before.

A mixin of :class:`~ubipy.peer.crawler.Crawler`, whose state it reads and changes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from ubipy.config import CrawlConfig
from ubipy.fetch import (
    LARGE_ROBOTS,
    SITEMAP_DEPTH,
    BodyGate,
    Entry,
    FetchResult,
    Job,
    ParsedPage,
    Scheduler,
    ScopeFilter,
    is_retryable,
    is_sitemap,
    made_no_connection,
    processing_failed,
    retry_delay,
    spends_a_retry,
)
from ubipy.peer.commits import COMMIT_BYTES, Commits, Found
from ubipy.peer.crawlstats import CrawlStats
from ubipy.peer.ordering import Ordering
from ubipy.peer.reading import RedirectChains, page_parsing, read_page
from ubipy.peer.refreshing import Refresher
from ubipy.peer.robotsanswers import robots_answered
from ubipy.peer.sitemapping import (
    Sitemapping,
    not_accepted_after_all,
    read_as,
    sitemap_after_all,
    sitemap_answered,
)
from ubipy.peer.wakeup import Wakeup
from ubipy.steps import Steps, in_slices
from ubipy.store import NewURL

__all__ = [
    "LARGE_PAGE",
    "READ_BYTES",
    "READ_SLICE",
    "SITEMAP_READS",
    "SITEMAP_SMALL",
    "PageAnswersMixin",
]

#: Pages not yet read are read at once when their bodies reach this many bytes.
READ_BYTES = 4 * 1024 * 1024
#: A page's body of this many bytes or more is parsed as it comes, by its request's
#: task, in slices, one such page at a time: left to be read with the others, the pages
#: that came together were parsed one after another with nothing else running, up to a
#: second each (10 MiB of nested tags): 40 held a peer's loop 19.5 s, and peers of a
#: cluster were declared dead (QA).
LARGE_PAGE = 256 * 1024
#: Sitemaps read at once past their first SITEMAP_SMALL bytes (each to 50 MB, held
#: twice while it is joined).
SITEMAP_READS = 4
SITEMAP_SMALL = 1 << 20
#: A sitemap's body is read in slices of the event loop's time of READ_SLICE seconds,
#: other tasks running between two: read at once, one of 50 MB and 50,000 URLs held
#: the loop 11 s (QA), and with it the peer's answers to the pings that tell the others
#: it is alive; gzipped, it is 100 KB on the wire. One large body and one gzipped one
#: are read at a time (:meth:`PageAnswersMixin._sitemap_read`): 40 gzip bombs read side
#: by side took 890 MB, and left the loop's other tasks a slice in 41 (/api/status
#: answered in 2.5 s).
READ_SLICE = 0.02
_GZIP = b"\x1f\x8b"

log = logging.getLogger("ubipy.peer.crawler")  # the crawler's log, as before

T = TypeVar("T")


class PageAnswersMixin:
    """The crawler's side of a page's answer (see the module's docstring)."""

    config: CrawlConfig
    scheduler: Scheduler
    stats: CrawlStats
    refresher: Refresher | None
    sitemaps: Sitemapping
    order: Ordering
    on_seed_redirect: Callable[[str, str], object]
    _commits: Commits
    _flush_now: Wakeup
    _candidates: Callable[..., list[NewURL]]
    _accept: Callable[[str | None], bool]
    _redirects: RedirectChains
    _sitemap_reads: trio.Semaphore
    _sitemap_readers: tuple[trio.Semaphore, trio.Semaphore]
    _large_reader: trio.Semaphore
    _archives_robots: bool
    _fetch_job: Callable[[Job, BodyGate | None], Awaitable[None]]
    scope: ScopeFilter

    async def _sitemap_job(self, job: Job) -> None:
        """A sitemap's request. Past its first megabyte it waits for one of a few turns
        (bodies.py), and holds it until its body is read and written: so many large
        bodies in memory at most (given back once read, 40 gzip bombs held 780 MB)."""
        gate = BodyGate(SITEMAP_SMALL, self._sitemap_reads.acquire)
        try:
            await self._fetch_job(job, gate)
        finally:
            if gate.taken:
                self._commits.then(self._sitemap_reads.release)

    async def _answered(
        self,
        host: str,
        entry: Entry,
        result: FetchResult,
        now: float,
        asked: float | None,
        at: float,
    ) -> None:
        """A request's answer (see :meth:`_page_answered`), come at ``at`` (the wall
        clock): a sitemap is read first, and a large page parsed, in slices."""
        if self.sitemaps.reads(entry, result, self._page_filter):
            result, found = await self._sitemap_read(host, entry, result)
            self._page_answered(host, entry, result, now, asked, found, at)
        elif len(result.body) >= LARGE_PAGE:
            # As it will be read: a sitemap that is an HTML page, cut at --max-body (a
            # review: those were parsed whole, back to back, when read).
            page, result = self._read_as(entry, result)
            parsed = None
            if _parsed_as_page(page, result):
                result, parsed = await self._large_page_parse(page, result)
            self._page_answered(host, entry, result, now, asked, parsed, at)
        else:
            self._page_answered(host, entry, result, now, asked, None, at)

    async def _robots_answered(
        self, job: Job, result: FetchResult, now: float, asked: float | None, at: float
    ) -> bool:
        """A robots.txt's answer handed on (:func:`robots_answered`: True when a commit
        is due); a large one when no other large body is being parsed."""
        answered = functools.partial(
            robots_answered, self.scheduler, self._commits, self.sitemaps, self.stats, job,
            result, now, asked, at=at, archive=self._archives_robots,
        )  # fmt: skip
        if len(result.body) < LARGE_ROBOTS:
            return answered()
        async with self._large_reader:
            rules = None
            if result.status is not None and 200 <= result.status < 300:
                # Parsed by a thread: protego held the event loop 239 ms for 500 KiB of
                # rules (QA: 40 such hosts, peers of a cluster declared dead).
                rules = await trio.to_thread.run_sync(self.scheduler.parse_robots, result.body)
            return answered(rules=rules)

    async def _large_page_parse(
        self, entry: Entry, result: FetchResult
    ) -> tuple[FetchResult, ParsedPage | None]:
        """A large page parsed in slices, one such page at a time; the answer, failed
        if the parse broke (a bad page, not a dead peer)."""
        parsing = page_parsing(entry, result, self.config)
        return await _in_slices(parsing, self._large_reader, result, f"parsing {entry.url}")

    async def _sitemap_read(
        self, host: str, entry: Entry, result: FetchResult
    ) -> tuple[FetchResult, Found | None]:
        """A sitemap's body read in slices, by the request's task (with the sitemap's
        turn, if it took one: no more bodies are held at once); the answer, failed if
        the reading broke (a bad sitemap, not a dead peer: stored as an error). One
        large body at a time, and one gzipped one at a time beside it: a large one
        waits for no gzipped one, its turn held (QA: those behind a queue of them
        timed out waiting for a turn). A stop waits for the reading."""
        large, gzipped = self._sitemap_readers
        lane: trio.Semaphore | None = None  # a small plain one: read beside the others
        if len(result.body) >= SITEMAP_SMALL:
            lane = large
        elif result.body[:2] == _GZIP:
            lane = gzipped
        reading = self.sitemaps.reading(host, entry, result)
        return await _in_slices(reading, lane, result, f"reading sitemap {entry.url}")

    def _page_answered(
        self,
        host: str,
        entry: Entry,
        result: FetchResult,
        now: float,
        asked: float | None,
        read: Found | ParsedPage | None = None,
        at: float | None = None,
    ) -> None:
        """``asked``: the seconds the answer's Retry-After asked (capped); ``read``: what
        its body says, read already (:meth:`_answered`); ``at``: when it came (the wall
        clock; None: now)."""
        config = self.config
        scheduler = self.scheduler
        scheduler.heard(host, result.latency, result.status, asked=asked)
        retryable = is_retryable(result)
        # A refresh failing keeps the page held; the refresher backs it off on its own.
        spends = entry.refresh or spends_a_retry(result, _strikes(scheduler, host), entry.free)
        if (
            retryable
            and (entry.retries < config.fetch.max_retries or not spends)
            # A page refreshed that failed its last ask too is backed off by the
            # refresher, not retried within the ask as well: a server down for a day
            # took three requests at each backed-off ask where one tells as much.
            and not (entry.refresh and self._backed_off(entry.fp))
        ):
            self.stats.retries += 1
            # An asked wait shorter than the back-off ("Retry-After: 0") does not cut it.
            wait = retry_delay(entry.retries + 1, config.fetch.retry_base)
            again = scheduler.retry(
                host, entry, now, wait=wait, asked=asked, spent=spends,
                no_connection=made_no_connection(result),
            )  # fmt: skip
            if not entry.refresh:  # a frontier URL's tries, for a restart
                self._commits.tried(again)
            return
        if retryable and result.ok and not entry.refresh:
            self.stats.given_up[f"{result.status}"] += 1
        if sitemap_after_all(entry, result, sitemaps=self.sitemaps.enabled):
            # Asked again as a sitemap (its body read this time), after the delay. As a
            # retry: not counted against the host's page budget again (it spends one
            # of its retries).
            self.scheduler.retry(host, entry._replace(depth=SITEMAP_DEPTH), now, wait=0.0)
            return
        self.scheduler.finished(host, now, asked=asked)
        self._commits.unread(host, entry, result, time.time() if at is None else at, read)
        if self._commits.unread_bytes >= READ_BYTES:
            self._read_answers()  # bodies not read are held whole; read ones may not be
        self._commit_if_full()

    def _backed_off(self, fp: int) -> bool:
        return self.refresher is not None and self.refresher.failing(fp)

    def _read_answers(self) -> None:
        """Read the pages answered since the last reading (before each commit)."""
        for u in self._commits.take_unread():
            try:
                self._page_done(u.host, u.entry, u.result, u.at, u.read)
            except Exception:
                # A page that breaks the parser is a bad page, not a dead peer;
                # it is stored as an error so it is not fetched again.
                log.exception("processing %s failed", u.entry.url)
                try:
                    self._page_done(u.host, u.entry, processing_failed(u.result), u.at)
                except Exception:
                    # Not the page's doing: the rest of the answers are read all the
                    # same; this URL stays pending in the shard (asked at a restart).
                    log.exception("storing %s as failed failed too", u.entry.url)

    def _commit_if_full(self) -> None:
        commits = self._commits
        every = self.config.store.commit_every_pages
        if commits.pages_waiting >= every or commits.bytes_waiting >= COMMIT_BYTES:
            self._flush_now.set()

    def _page_filter(self, url: str) -> bool:
        """Whether --include and --exclude would take ``url`` as a page (a sitemap is
        asked whatever they say; one that is a page is read as one only if they do)."""
        filters = self.scope.filters
        return filters is None or filters.verdict(url) is None

    def _read_as(self, entry: Entry, result: FetchResult) -> tuple[Entry, FetchResult]:
        """The entry an answer is read as (see read_as), and the answer: a sitemap's
        read as a page is cut at --max-body (fetched to a sitemap's 50 MB, a page that
        large would cost seconds of the event loop)."""
        sitemap = is_sitemap(entry.depth)
        entry = read_as(entry, result, sitemaps=self.sitemaps.enabled, page=self._page_filter)
        cap = self.config.fetch.max_body_bytes
        if sitemap and not is_sitemap(entry.depth) and len(result.body) > cap:
            result = dataclasses.replace(result, body=result.body[:cap], truncated=True)
        return entry, result

    def _page_done(
        self,
        host: str,
        entry: Entry,
        result: FetchResult,
        at: float,
        read: Found | ParsedPage | None = None,
    ) -> None:
        """Read a page answered at ``at`` (the wall clock); ``read``: what its body
        says, read already (a sitemap's finds, a large page's parse)."""
        sitemap = is_sitemap(entry.depth)
        entry, result = self._read_as(entry, result)
        if is_sitemap(entry.depth):  # stored as a page row, counted as a sitemap
            found = read if isinstance(read, tuple) else None
            answer = self.sitemaps.answered(host, entry, result, at, found)
            sitemap_answered(self._commits, self.refresher, entry, result, answer)
            return
        if not sitemap:
            result = not_accepted_after_all(entry, result, self._accept)
        if not result.ok:
            log.info("fetch failed: %s: %s", entry.url, result.detail)
        page, discovered = read_page(
            entry, host, result, config=self.config, candidates=self._candidates, stats=self.stats,
            seed_redirect=self.on_seed_redirect, fetched_at=at, chains=self._redirects,
            is_seed_host=self.scope.seeded,
            parsed=read if isinstance(read, ParsedPage) else None,
        )  # fmt: skip
        first, visit, relink = True, None, False
        if self.refresher is not None:
            relink = self.refresher.relinks(entry)
            first, row, visit = self.refresher.answered(entry, page, result)
            self._commits.refreshed(row, visit)
        if first:
            self._commits.answered(page, self.order.scored(entry, discovered))
        elif visit is not None and (visit.changed or result.is_redirect or relink):
            # A new version: its links count; a page that moved: where it went; one to
            # be read again for the hosts a dead peer took with it (relink).
            self._commits.found(self.order.scored(entry, discovered))


def _strikes(scheduler: Scheduler, host: str) -> int:
    """The run of strikes (503s, 429s) of the host whose pace ``host``'s answers feed."""
    slot = scheduler.paced(host)
    return 0 if slot is None or slot.pace is None else slot.pace.strikes


def _parsed_as_page(entry: Entry, result: FetchResult) -> bool:
    """Whether a page's answer is parsed as HTML when read (see read_page)."""
    page = result.ok and result.accepted and not result.is_redirect and result.is_html
    return page and not is_sitemap(entry.depth)


async def _in_slices(
    steps: Steps[T], lane: trio.Semaphore | None, result: FetchResult, what: str
) -> tuple[FetchResult, T | None]:
    """What ``steps`` (reading ``result``'s body) make, run in slices, in ``lane`` (one
    at a time) if given; the answer, failed if they broke (a bad body, not a dead peer:
    stored as an error). Closed at the end: a parser's buffers let go now."""
    try:
        async with lane if lane is not None else contextlib.nullcontext():
            return result, await in_slices(steps, READ_SLICE)
    except Exception:
        log.exception("%s failed", what)
        return processing_failed(result), None
    finally:
        steps.close()
