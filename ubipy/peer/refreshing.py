"""A continuous crawl's part in the crawl loop (``--recrawl``; the arithmetic is
:mod:`ubipy.fetch.refresh`, the scheduling of pages due again the scheduler's).

Every page fetched with a 200 is kept here with what was seen of it: its visits, the
visits that found it changed, the time they cover, its validators and digest. A visit
after the first asks with the copy's validators (a conditional GET): a 304, or a body
of the same digest, is unchanged, and costs a visit row, not a page. Every ``replan``
seconds each page gets a revisit frequency under the refresh budget (the policy's
allocation) and a due time, the last visit plus its interval; the scheduler asks the
page again when it is due, within the host's politeness. Due times are wall-clock
times kept in the shard with the history, so a restarted peer keeps them.

Sitemaps answered 200 are kept too, each asked again at the interval uniform would give
a page (a sitemap speaks for its host's pages, whatever its own changes), so their
lastmods keep coming (:mod:`ubipy.peer.hints`): a lastmod after a page's last visit,
on a host whose lastmods the visits bore out, makes the page due at once (unless the
plan left it at the floor: it changes too fast to be worth it). The sitemaps' requests
and the hinted refreshes (their rate over the last minutes) come out of the budget
before the pages' plan, so hints do not spend more than the budget.

A page that is gone (410), moved for good (301, 308: where it went is a new URL), or
missing (404) three times in a row is retired: never asked again, its revisit row
deleted. Any other failure (a 5xx, a 429, a time-out, a temporary redirect) backs the
page off: each failure in a row doubles its wait, from its planned interval to the
longest; until a 200 or a 304 answers again it takes no part in the plan's allocation
(its history stands still, and counted would pull budget from the pages that answer).

Due times and when a page was asked are wall-clock times: a plan (and a start) counts
from now any that lie ahead of the clock, so a clock stepped back holds no page back
for longer than its interval.

A host handed to another peer (a ring change) takes its pages' revisit state with it
(:meth:`Refresher.revisits_of`, HANDOFF's ``revisits``); its new owner adopts them
(:meth:`Refresher.adopt`) and refreshes them on from there. A host taken over from a
dead peer's replica copy (``--replicas``) comes without them (copies carry none): its
pages whose URLs the copy knows start again as never visited
(:meth:`Refresher.history_lost`).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import sys
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Sequence

import trio

from ubipy.config import CrawlConfig
from ubipy.errors import StorageError
from ubipy.fetch import (
    Entry,
    FetchResult,
    Filtered,
    Scheduler,
    UrlFilter,
    Validators,
    is_sitemap,
)
from ubipy.peer.commits import Retired
from ubipy.peer.hints import HostTrust, LastmodHints
from ubipy.peer.refreshpages import (
    Packed,
    RefreshPage,
    RefreshStats,
    due_entry,
    refresh_entry,
)
from ubipy.peer.refreshplans import PlanningMixin
from ubipy.store import Lastmod, PageRecord, RefreshRow, Shard, Visit
from ubipy.wire import DEFAULT_MAX_SKEW

__all__ = ["Refresher"]

log = logging.getLogger(__name__)

# A page answered 404 this many times in a row is retired; gone (410) or moved for good
# (301, 308: its target is found as a new URL), at once.
_MISSING_IN_A_ROW = 3
_GONE = 410
_MOVED = frozenset({301, 308})
# The time an answer takes, assumed until one is measured; and how fast the measured
# mean follows each new one.
_LATENCY_GUESS = 1.0
_LATENCY_WEIGHT = 0.05
# When pages last visited before it are to be read for their links again (relink).
_RELINK_META = "relink_since"


class Refresher(PlanningMixin):
    """Histories, revisit plans, and what each refresh found."""

    def __init__(
        self,
        config: CrawlConfig,
        shard: Shard,
        scheduler: Callable[[], Scheduler],
        filters: UrlFilter,
    ) -> None:
        """``filters``: the run's --include/--exclude (the scope's own)."""
        self._cfg = config.recrawl
        self._politeness = config.politeness
        # WARC files (--bodies warc) keep a response for a revisit to refer to.
        self._warc = shard.keeps_warc
        self._filters = filters
        self._shard = shard
        self._scheduler = scheduler
        # Every page, packed (see Packed: no work for the garbage collector), taken
        # out to be read or changed by page() and put back by _keep.
        self._pages: dict[int, Packed] = {}
        # The same pages' fingerprints by host: a sitemap's hints reschedule one
        # host's pages, and a host handed away takes its own, without a walk over
        # every page. Dicts, not sets: a dict of numbers alone is one the collector
        # stops tracking.
        self._by_host: defaultdict[str, dict[int, None]] = defaultdict(dict)
        # Pages asked again and not yet answered: a new plan leaves them out, or a
        # page due while in flight would be asked twice in a row.
        self._asked: set[int] = set()
        self._latency = _LATENCY_GUESS
        self._measured = False
        # The budget of the last plan, and its hosts: a page kept meanwhile takes its
        # interval from it, not from a walk over every host, until the hosts doubled.
        self._budget: float | None = None
        self._budget_hosts = 0
        self._intervals: dict[int, float] = {}
        # Pages whose last answers failed: left out of the plan's allocation.
        self._failing: set[int] = set()
        self.stats = RefreshStats()
        self._sitemap_visits = RefreshStats()
        self.hints = LastmodHints()
        # When hints made pages due (their rate comes out of the plan's budget), and
        # the pages so made due, not yet asked (a new plan must not put them off).
        self._hinted: deque[float] = deque()
        self._prompted: set[int] = set()
        # Pages last visited before this wall-clock time are asked once in full and
        # their links followed again (relink).
        self._relink_since = _float(shard.get_meta(_RELINK_META))

    # -- the crawl loop's calls -----------------------------------------------
    def load(self) -> Counter[Filtered]:
        """What an earlier run left: every page's history and when it is due. Pages
        this run's URL filters drop (a new --exclude) are left out, and returned
        counted by filter: not asked again while the filters say so (their rows stay,
        to be refreshed again once they do not)."""
        filters = self._filters if self._filters else None
        left_out: Counter[Filtered] = Counter()
        counts: list[tuple[str, int, int]] = []  # each page's lastmod checks, for hints
        now = time.time()
        for r in self._shard.refresh_rows():
            why = None if filters is None else filters.verdict_at(r.url, r.depth)
            if why is not None:
                left_out[why] += 1
                continue
            # A visit stamped while the clock ran ahead (put right since, or stepped
            # back since): from now, not from then, or the page would wait out the
            # clock's error as well. Its due time keeps its wait from the last visit
            # (a back-off, a bar: held to by the plans until then), so from now at
            # most, and not past the longest interval.
            last = min(r.last_visit, now)
            due = min(last + max(r.due - r.last_visit, 0.0), now + self._cfg.max_interval)
            page = RefreshPage.from_row(r, last, due)
            self._keep(page)
            if page.failures:
                self._failing.add(page.fp)
            if page.checks:
                counts.append((page.host, page.checks, page.agreed))
        self.hints.load(((m.fp, m.lastmod) for m in self._shard.lastmods()), counts)
        self._adopt_unrefreshed()
        self._schedule()
        return left_out

    def _adopt_unrefreshed(self) -> None:
        """The pages an earlier run fetched without --recrawl, made due as new pages
        are, spread over the first interval (oldest first): a one-off crawl restarted
        with --recrawl asked none of them again (QA). Saved at once: each is a page of
        one visit, its copy's validators and digest kept (its next answer compared).
        Those this run's filters drop are saved, not kept (as load leaves them)."""
        pages = self._shard.never_revisited()
        if not pages:
            return
        now = time.time()
        filters = self._filters if self._filters else None
        rows = [
            RefreshRow(fp, url, host, depth, 1, 0, 0.0, min(at, now), now, 0.0, etag, mod, digest)
            for fp, url, host, depth, at, etag, mod, digest in pages
        ]
        kept = [r for r in rows if filters is None or filters.verdict_at(r.url, r.depth) is None]
        for row in kept:
            self._keep(RefreshPage.from_row(row, row.last_visit, now))
        # The interval of the pages known now, their hosts' included: taken before,
        # with no host known, the budget was its floor and any crawl was spread over
        # 1,000 s (its first pages asked again and again meanwhile: QA).
        first, n = self._first_interval(), len(rows)
        rows = [dataclasses.replace(r, due=now + first * i / n) for i, r in enumerate(rows)]
        for row in rows:
            if row.fp in self._pages:
                self._keep(RefreshPage.from_row(row, row.last_visit, row.due))
        self._shard.save_refresh(rows, ())
        log.info("%d pages fetched before --recrawl are asked again from now", n)

    def handed_out(self, entry: Entry) -> None:
        """A page due again was handed out to be asked: no plan makes it due again
        until it is answered. Marked when the scheduler hands it out, not when its
        request starts: a plan between the two (while an address's lease is asked
        for) gave it back as due now, and it was asked twice, a delay apart."""
        if entry.refresh and entry.fp in self._pages:
            self._asked.add(entry.fp)
            self._prompted.discard(entry.fp)

    def validators(self, entry: Entry) -> Validators | None:
        """The copy's validators, for a page asked again (now): none for one to be
        read for its links again (a 304 has no body)."""
        page = self.page(entry.fp) if entry.refresh else None
        if page is None or not (page.etag or page.last_modified) or self._relinked(page):
            return None
        return Validators(page.etag, page.last_modified)

    def relink(self) -> None:
        """A peer died with hosts no copy kept (one replica), and did not come back
        within --rejoin-grace (told then, not at its death: a peer restarted within it
        takes its hosts back, and every page asked in full for nothing was the cost of
        each false death of a partition, a review): every page is asked once more in
        full and its links followed again, changed or not, as its turn comes.
        What links lead to is all that finds those hosts again; under --recrawl an
        unchanged page's links were never read again, and the dead peer's hosts were
        lost for good (QA). Kept in the shard: a restart before a page's turn still
        reads it."""
        self._relink_since = time.time()
        try:
            with self._shard.transaction():
                self._shard.set_meta(_RELINK_META, repr(self._relink_since))
        except StorageError as exc:
            log.warning("pages to be read for their links again, not kept: %s", exc)

    def relinks(self, entry: Entry) -> bool:
        """Whether a page asked again is to have its links followed, changed or not."""
        if self._relink_since == -math.inf:  # none ever: no page unpacked for it
            return False
        page = self.page(entry.fp) if entry.refresh else None
        return page is not None and self._relinked(page)

    def _relinked(self, page: RefreshPage) -> bool:
        return page.last_visit < self._relink_since

    def answered(
        self, entry: Entry, page: PageRecord, result: FetchResult
    ) -> tuple[bool, RefreshRow | Retired | None, Visit | None]:
        """What a page's answer means for its history: (a first fetch, stored as a
        page?, its new revisit row or its retirement, the visit to record: a later
        one, with the new version's body if it changed)."""
        now = time.time()
        if result.latency is not None:
            if not self._measured:
                self._latency, self._measured = result.latency, True
            self._latency += _LATENCY_WEIGHT * (result.latency - self._latency)
        kept = self.page(page.fp)
        if kept is None or not entry.refresh:
            if not (result.ok and result.status == 200 and page.error is None and page.digest):
                return True, None, None  # an error, a redirect, a type not kept: not refreshed
            kept = RefreshPage(
                fp=page.fp, url=page.url, host=sys.intern(page.host), depth=entry.depth,
                importance=entry.score, etag=page.etag, last_modified=page.last_modified,
                digest=page.digest, due=now, asked_at=now,
            )  # fmt: skip
            kept.visited(now, changed=False)
            kept.due = now + self._first_interval()
            self._keep(kept)
            self._due_again(kept)
            return True, kept.row(), None
        self._asked.discard(page.fp)
        # A sitemap's visits apart: status counts them as sitemaps, not as pages (QA:
        # 145 refreshes of 133 pages).
        stats = self._sitemap_visits if is_sitemap(kept.depth) else self.stats
        stats.refreshes += 1
        answer = result.not_modified or (result.ok and result.status == 200)
        # Its history lost with a dead peer (history_lost): its page row too, so its
        # first answer here is stored as its first fetch, not as a later visit.
        first_here = kept.visits == 0 and answer and bool(page.digest)
        # Failing: not a visit of its history (it did not show the page unchanged, and
        # counted so, a host's outage made its pages look slower to change than they
        # are); backed off, or retired if it is gone (see the module's docstring).
        status = result.status
        if answer:
            kept.failures = kept.missing = 0
            self._failing.discard(kept.fp)
        else:
            kept.failures += 1
            kept.missing = kept.missing + 1 if status == 404 else 0
            self._failing.add(kept.fp)
        retire = (
            status == _GONE
            or (status in _MOVED and result.is_redirect)
            or kept.missing >= _MISSING_IN_A_ROW
        )
        changed = answer and not result.not_modified and page.digest != kept.digest
        if answer and self._cfg.lastmod_hints and not is_sitemap(kept.depth):
            check = self.hints.visited(kept.fp, kept.host, kept.last_visit, changed)
            if check is not None:
                kept.checks += 1
                kept.agreed += check
        # Asked with validators before a relink came (at most --concurrency pages a
        # relink): a 304 has no links. Not a visit of its history, so that it is still
        # to be read in full, here or after a restart or a hand-off (the last visit is
        # what says so), and asked again at once.
        relink_again = result.not_modified and result.conditional and self._relinked(kept)
        if answer and not relink_again:
            kept.visited(now, changed)
        if changed:
            stats.changed += 1
            kept.etag, kept.last_modified, kept.digest = page.etag, page.last_modified, page.digest
        elif result.not_modified:
            stats.not_modified += 1
            # A 304's validators replace those held (RFC 9111 4.3.4); one it leaves out
            # stays.
            kept.etag = page.etag or kept.etag
            kept.last_modified = page.last_modified or kept.last_modified
        elif answer:
            stats.unchanged += 1
            # The same body under new validators (a server that makes its ETag of a
            # file's time, after a redeploy): asked with the old ones, it would answer
            # in full at every visit from now on.
            kept.etag, kept.last_modified = page.etag, page.last_modified
        else:
            stats.failed += 1
        kept.asked_at = now
        kept.held_until = 0.0
        if relink_again:
            kept.due = now
        elif not retire:
            kept.due = now + self._wait_of(kept)
        if not retire:
            self._keep(kept)
            self._due_again(kept)
        visit = Visit(
            page.fp,
            now,
            result.status,
            changed,
            page.digest or kept.digest,
            # The same body again: a WARC file with no response of it to refer to
            # takes this one (a page handed over by another peer).
            body=page.body if answer and self._warc else None,
            url=page.url,
            head=page.head,
        )
        if changed or (not answer and page.head is not None and page.error is None):
            # A new version; or an answer that is not the page (a 404, a 410, a 503, a
            # redirect), kept as its own response: an archive replays the page as it was
            # then, not as the version held (QA: a page gone showed as live).
            visit = Visit(
                page.fp, now, result.status, changed, page.digest, page.content_type,
                page.length, page.etag, page.last_modified, page.body, page.url, page.head,
                page.truncated, page.location, page.noindex,
            )  # fmt: skip
        if retire:
            # Its row goes with the commit; its visit is recorded still (a redirect's
            # target is found from it).
            self._forget(kept.host, [kept.fp])
            stats.retired += 1
            return False, Retired(kept.fp), visit
        return first_here, kept.row(), None if first_here else visit

    def lastmods(self, items: Sequence[Lastmod]) -> list[RefreshRow]:
        """A sitemap just read gave these lastmods: the checks they settle, and the
        hints they give (pages made due now). Returns the revisit rows that changed."""
        if not self._cfg.lastmod_hints:
            return []
        now, floor = time.time(), self._cfg.max_interval
        changed: list[RefreshPage] = []
        hosts: set[str] = set()
        for m in items:
            said, check = self.hints.read(m.fp, m.host, m.lastmod, now)
            page = self.page(m.fp)
            if page is None:
                continue
            if check is not None:
                page.checks += 1
                page.agreed += check
                changed.append(page)
                self._keep(page)
            if said is None or said.at <= page.last_visit or page.fp in self._asked:
                continue
            if not self.hints.trusted(page.host) or self._interval_of(page) >= floor:
                self.hints.ignored[page.host] += 1
                continue
            self.hints.used[page.host] += 1
            self._hinted.append(now)
            page.held_until = 0.0
            # Not sooner than --min-interval after its last ask, as any visit (a hint
            # read a second after a visit had the page asked again at once: QA).
            soonest = max(now, page.asked_at + self._cfg.min_interval)
            if page.due > soonest:
                page.due = soonest
                self._prompted.add(page.fp)
                hosts.add(page.host)
                if check is None:
                    changed.append(page)
            self._keep(page)
        if hosts:
            self._schedule(hosts)
        return [p.row() for p in changed]

    async def run(self, wake: Callable[[], None]) -> None:
        """Plan every ``replan`` seconds, or less often when plans cost more than a
        share of the time (:meth:`next_plan_in`), for as long as the crawl runs;
        ``wake`` the crawl loop after each plan, which may have made a page due sooner
        than any time it sleeps until."""
        wait = self._cfg.replan
        while True:
            await trio.sleep(wait)
            wait = self.next_plan_in(await self.replan())
            wake()

    # -- planning ---------------------------------------------------------------
    def _schedule(self, hosts: set[str] | None = None) -> None:
        """Hand the scheduler each host's pages (of ``hosts``, if given) and their due
        times (on its clock)."""
        scheduler = self._scheduler()
        offset = trio.current_time() - time.time()
        asked = self._asked
        for host in self._by_host if hosts is None else hosts:
            pages = map(due_entry, self._packed_of(host))
            due = [(at + offset, e) for at, e in pages if e.fp not in asked]
            if due:
                scheduler.refreshes(host, due)

    def failing(self, fp: int) -> bool:
        """Whether the page's last answer here was a failure (it is being backed off)."""
        return fp in self._failing

    def page(self, fp: int) -> RefreshPage | None:
        """A page refreshed here, taken out of its packing (a copy: changed, it goes
        back with :meth:`_keep`), or None."""
        packed = self._pages.get(fp)
        return None if packed is None else RefreshPage.unpacked(packed)

    def _packed_of(self, host: str) -> list[Packed]:
        pages = self._pages
        return [pages[fp] for fp in self._by_host.get(host, ())]

    def _keep(self, page: RefreshPage) -> None:
        self._pages[page.fp] = page.packed()
        self._by_host[page.host][page.fp] = None

    def _due_again(self, page: RefreshPage) -> None:
        at = page.due + trio.current_time() - time.time()
        self._scheduler().due_again(page.host, at, refresh_entry(page))

    def barred(self, entry: Entry) -> None:
        """A page due again that robots.txt now forbids (or its scheme's robots.txt
        could not be had) was not asked: it stays a page
        of the crawl (fetched, its frontier row closed), put off until robots.txt is
        read again (``--robots-ttl``, or the longest interval if shorter) rather than
        due again at every plan. Put off for the longest interval, a page barred by a
        robots.txt wrong for a minute was not asked for 30 days (found by QA)."""
        page = self.page(entry.fp)
        if page is None:
            return
        wait = min(self._cfg.max_interval, self._politeness.robots_ttl)
        page.barred_until = page.due = time.time() + wait
        self._keep(page)
        self._prompted.discard(page.fp)
        # Handed out, it was marked asked: left so, no plan gave it out again (a request
        # refused its address's lease, robots.txt read again before it went: found by
        # a review).
        self._asked.discard(page.fp)
        self.stats.barred += 1

    def forget_host(self, host: str) -> None:
        """The host went to another peer: its pages are no longer refreshed here. What
        its lastmods earned went with them (their rows' counts): back here one day,
        it is counted from what it brings, not twice."""
        self._forget(host, list(self._by_host.get(host, ())))
        self.hints.hosts.pop(host, None)

    # -- hand-off -------------------------------------------------------------
    def revisits_of(self, host: str) -> list[RefreshRow]:
        """What its new owner needs to refresh the host's pages: their rows, as this
        peer holds them now (due times as the last plan made them)."""
        return [RefreshPage.unpacked(p).row() for p in self._packed_of(host)]

    def adopt(self, rows: Sequence[RefreshRow], *, schedule: bool = True) -> int:
        """Pages of a host handed over by its previous owner (:meth:`revisits_of`
        there), with their histories: kept, saved in the shard (in the caller's
        transaction if one is open: the crawler's take_over takes them with the
        host's done pages) and, with ``schedule``, handed to the scheduler (each pushed
        onto its host's heap, or the heaps of hosts with a page known here already made
        anew: its old place would stay beside the new; the whole host's heap made again
        for every chunk of a hand-off was quadratic in its pages). Returns the pages
        kept.

        Read as :meth:`load` reads rows (a last visit ahead of this clock counts as
        now; the wait from the last visit to the due time is kept, at most the longest
        interval, and a plan holds the page to it), on a clock that may be behind the
        sender's by as much as frames are allowed (DEFAULT_MAX_SKEW): the wait left is
        counted as if this one were that much behind, as take_over counts a host's
        politeness mark. So a page is never asked here sooner after its last visit
        there than the sender would have asked it (at most two skews later).

        A page known here already keeps the newer history: the one of more visits, or
        as many and a later last visit (on a tie, the one given: taken again after a
        refused commit, it is written again). A page this run's URL filters drop is
        saved, not kept (as :meth:`load` leaves it)."""
        now = time.time()
        wall = now - DEFAULT_MAX_SKEW
        filters = self._filters if self._filters else None
        longest = self._cfg.max_interval
        saved: list[RefreshRow] = []
        taken: list[tuple[RefreshPage, RefreshPage | None]] = []  # and the one known here
        pushed: list[RefreshPage] = []  # kept here, due later for a visit there
        for r in rows:
            last = min(r.last_visit, now)
            mine = self.page(r.fp)
            wait = min(last, wall) + max(r.due - r.last_visit, 0.0) - wall
            due = now + min(max(wait, 0.0), longest)
            if mine is not None and (mine.visits, mine.last_visit) > (r.visits, last):
                if due > mine.due:  # not sooner here than there (QA: after a kill -9)
                    mine.due = mine.held_until = due
                    pushed.append(mine)
                continue
            page = RefreshPage.from_row(r, last, due)
            if self._warc:
                # Asked in full once here: the response its revisits refer to is in the
                # old owner's WARC files; without one here, its 304s were in none.
                page.etag = page.last_modified = None
            saved.append(page.row())
            if filters is None or filters.verdict_at(r.url, r.depth) is None:
                taken.append((page, mine))
        self._shard.save_refresh(saved + [page.row() for page in pushed], ())
        for page in pushed:
            self._keep(page)
        for page, old in taken:
            trust = self.hints.hosts.setdefault(page.host, HostTrust())
            trust.checks += page.checks - (0 if old is None else old.checks)
            trust.agreed += page.agreed - (0 if old is None else old.agreed)
            if page.failures:
                self._failing.add(page.fp)
            else:
                self._failing.discard(page.fp)
            self._prompted.discard(page.fp)
            self._keep(page)
        if schedule:
            remade = {page.host for page, old in taken if old is not None}
            remade |= {page.host for page in pushed}
            self._schedule(remade)
            for page, _ in taken:
                if page.host not in remade:
                    self._due_again(page)
        return len(taken)

    def history_lost(self, host: str, pages: Sequence[tuple[int, str, int]]) -> list[RefreshRow]:
        """Revisit rows for ``host``'s pages (fingerprint, URL, depth) fetched by a peer
        that died, their history lost with it (a replica's copy carries none), for
        :meth:`adopt`: each as if never visited (its next answer its first visit, kept
        as a new version: no copy is here to compare with), due within the interval a
        new page gets, spread over it. Without them, the pages were never asked again:
        known as done, no link brings them back. One kept here keeps its own history
        (adopt keeps the one of more visits)."""
        now, first = time.time(), self._first_interval()
        n = max(1, len(pages))
        rows = []
        for i, (fp, url, depth) in enumerate(pages):
            due = now + first * i / n
            rows.append(
                RefreshRow(fp, url, host, depth, 0, 0, 0.0, now, due, 0.0, None, None, None)
            )
        return rows

    def reschedule(self, host: str) -> None:
        """Hand the scheduler the host's pages again (its slot was made afresh)."""
        self._schedule({host})

    def _forget(self, host: str, fps: list[int]) -> None:
        """The host's pages ``fps`` are no longer refreshed here."""
        of_host = self._by_host[host]
        for fp in fps:
            del self._pages[fp]
            of_host.pop(fp, None)
            self._asked.discard(fp)
            self._prompted.discard(fp)
            self._failing.discard(fp)
            self._intervals.pop(fp, None)
        if not of_host:
            del self._by_host[host]
        self.hints.forget(fps)


def _float(text: str | None) -> float:
    try:
        return float(text) if text else -math.inf
    except ValueError:
        return -math.inf
