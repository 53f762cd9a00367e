"""What the crawler has yet to write, grouped into one transaction per commit.

Requests end one at a time; what they leave (the page row, its frontier entry
done and the links it revealed, the host's politeness mark) is written in groups,
one transaction every ``commit_interval`` or ``commit_every_pages``. Between
commits it waits here, with entries closed unfetched, hosts given up and the
outbox rows whose owner acknowledged them.

URLs found by a request that stores no page (the sitemaps a robots.txt names) wait
here too, as do the sitemaps' lastmod dates. A commit takes everything as one
:class:`Batch`. If the shard refuses it, the
batch goes back in front of what came meanwhile, so the next commit writes it
all, in the order it came: nothing admitted or fetched is lost to a full disk.
No trio here: the crawler says when a batch is written, and how its URLs are placed.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ubipy.fetch import Entry, FetchResult, ParsedPage
from ubipy.store import (
    FrontierRow,
    GivenUp,
    HostMark,
    Lastmod,
    NewURL,
    PageRecord,
    RefreshRow,
    RobotsAnswer,
    RobotsKept,
    Shard,
    Visit,
)
from ubipy.store_config import StoreConfig

log = logging.getLogger("ubipy.peer.crawler")  # the crawler's log, as before

#: Bodies held for one batch at most, in bytes: past it the crawler commits whatever
#: the page count, or pages of --max-body each would hold commit_every_pages of them.
COMMIT_BYTES = 32 * 1024 * 1024


__all__ = ["COMMIT_BYTES", "Answered", "Batch", "CommitTiming", "Commits", "Retired", "Unread"]

#: Seconds a transaction stays open at most under --replicas 2 (see CommitTiming).
REPLICATED_COMMIT_INTERVAL = 0.05
#: How long past its interval a commit waits for an answer's wake-up to go in.
COMMIT_GRACE = 1.0
#: Seconds a commit of few pages stays open (or commit_interval, if longer).
COMMIT_PATIENCE = 1.0
#: A commit of fewer pages than commit_every_pages / this waits up to COMMIT_PATIENCE.
FEW_PAGES_DIVISOR = 8
#: Hosts given up whose reason is kept for the URLs of them admitted later.
GIVEN_UP_KEPT = 65_536


class CommitTiming:
    """When the next commit goes: ``interval`` after the first write began to wait if
    enough pages wait by then, else ``patience`` after it, with the first request
    answered from then on (a page, a robots.txt, a sitemap, in that answer's
    wake-up), or by the committer's own timer ``COMMIT_GRACE`` later when none comes.

    A commit costs about as much for 10 pages as for 60: at 2 requests in flight (38
    pages a second, commit_interval 0.25 s) its share of a page's CPU was 0.26-0.28 ms
    at 10 pages a commit against 0.17 at 69 (``python -m bench.stage_costs``), and
    0.18 at 64 in flight (317 a commit). So a slow crawl's commit waits for
    commit_every_pages / 8 pages (64 by default), 1 s at most (38 pages a commit
    there, 0.20 ms a page); a busy crawl's goes after ``interval``, as before. Not
    longer: the links a commit forwards are other peers' work, and a cluster whose
    hosts share one address (tests/cluster/test_ip_leases.py) fetched too little
    after a death with 2 s. A timer of its own was a wake-up of its own for
    every commit: at 2 requests in flight a tenth of a wake-up a page more
    (bench/scaling.py, 1.1 against 1.0).

    Under --replicas 2 a host's next request waits for the commit that copies its
    last outcome, so there the interval is short, whatever the pages, and its timer
    has no grace.
    """

    __slots__ = ("due", "enough", "grace", "interval", "last", "patience")

    def __init__(self, store: StoreConfig, *, replicated: bool) -> None:
        interval = store.commit_interval
        self.interval = min(interval, REPLICATED_COMMIT_INTERVAL) if replicated else interval
        self.grace = 0.0 if replicated else COMMIT_GRACE
        self.patience = self.interval if replicated else max(interval, COMMIT_PATIENCE)
        self.enough = 0 if replicated else store.commit_every_pages // FEW_PAGES_DIVISOR
        # From when an answer brings a commit of enough pages, and any commit (inf: no
        # write is waiting).
        self.due = self.last = math.inf

    def waiting(self, now: float) -> float:
        """A write waits from ``now``: when the committer's timer goes."""
        self.due = now + self.interval
        self.last = now + self.patience
        return self.last + self.grace

    def brings(self, now: float, pages: int) -> bool:
        """Whether a request answered at ``now`` brings the commit, with ``pages``
        pages waiting."""
        return now >= self.last or (now >= self.due and pages >= self.enough)

    def done(self) -> None:
        """The commit went: nothing waits for it now."""
        self.due = self.last = math.inf


#: Admits URLs inside the caller's transaction, or keeps them for their owners:
#: (the frontier rows admitted, the URLs kept for other peers).
Place = Callable[[Sequence[NewURL]], tuple[list[FrontierRow], list[NewURL]]]


#: What a sitemap's body brings: candidates, and their lastmod.
Found = tuple[list[NewURL], list[Lastmod]]


@dataclass(frozen=True, slots=True)
class Unread:
    """A page answered at ``at`` (the wall clock), not yet read."""

    host: str
    entry: Entry
    result: FetchResult
    at: float
    # What its body says, read already: a sitemap's finds, a large page's parse.
    read: Found | ParsedPage | None = None


@dataclass(frozen=True, slots=True)
class Answered:
    """A page that was fetched (or failed for good), and the URLs it revealed (and, for
    a sitemap, the lastmod dates it gave them)."""

    page: PageRecord
    discovered: tuple[NewURL, ...]
    lastmods: tuple[Lastmod, ...] = ()


@dataclass(frozen=True, slots=True)
class Retired:
    """A page a continuous crawl no longer asks again (--recrawl: gone, moved for good,
    or missing too many times in a row): its revisit row is deleted with the commit
    that writes its last visit."""

    fp: int


@dataclass(frozen=True, slots=True)
class Batch:
    """One commit's writes, its fields in the order the shard must take them.

    A closed host's rows are counted off as they are closed, and so are the rows
    the batch settles one by one (`settled`): the pages answered and the entries
    skipped are written first, so that a host closed in the same commit counts off
    only the rows nothing else settles. Its pages' links are admitted after it is
    closed: a URL found for it then is counted when it is scheduled, and closed then.
    In any other order a row would be counted off twice (the demo once waited
    forever on a pending count of -1).
    """

    marks: Mapping[str, HostMark]  # each host's latest politeness mark
    closed_hosts: tuple[tuple[str, str], ...]  # (host, why): given up, pending rows closed
    answered: tuple[Answered, ...]
    acked: tuple[int, ...]  # forwarded URLs their owner has: their outbox rows go
    skips: tuple[tuple[int, str], ...]  # (fingerprint, why): closed unfetched
    found: tuple[NewURL, ...] = ()  # found by requests that store no page (robots.txt)
    refresh: tuple[RefreshRow, ...] = ()  # --recrawl: pages' new histories and due times
    visits: tuple[Visit, ...] = ()  # --recrawl: visits after the first
    found_lastmods: tuple[Lastmod, ...] = ()  # --recrawl: a sitemap's, read again
    retired: tuple[int, ...] = ()  # --recrawl: pages no longer refreshed: their rows go
    robots: tuple[RobotsKept, ...] = ()  # robots.txt answers, for a restart
    robots_answers: tuple[RobotsAnswer, ...] = ()  # and as received, for the WARC files
    tries: Mapping[int, tuple[int, int]] = field(default_factory=dict)  # (attempt, free)
    untried: tuple[int, ...] = ()  # URLs with tries settled since: their rows go

    @property
    def pages(self) -> list[PageRecord]:
        return [a.page for a in self.answered]

    @property
    def discoveries(self) -> list[NewURL]:
        """The URLs to admit, in order: each answered page's, then the others found.
        Admitted in one go, so that the batch's pages share one lookup of the URLs
        the Bloom filter may have seen, one insert and one update of the scores
        (a link several pages give arrives with their cash summed)."""
        return [*(c for a in self.answered for c in a.discovered), *self.found]

    @property
    def lastmods(self) -> list[Lastmod]:
        return [*(m for a in self.answered for m in a.lastmods), *self.found_lastmods]

    def write(
        self, shard: Shard, place: Place
    ) -> tuple[Counter[str], list[FrontierRow], list[NewURL]]:
        """Write the batch in one transaction, in its order: the rows closed with their
        hosts (counted by why), the new rows admitted and the URLs kept for other
        peers."""
        closed: Counter[str] = Counter()
        with shard.transaction():
            shard.save_host_marks(self.marks)
            # The rows settled one by one, then the hosts closed, then the new rows
            # admitted: see above.
            shard.record_pages(self.pages)
            if self.skips:
                shard.mark_skipped(self.skips)
            for host, reason in self.closed_hosts:
                closed[reason] += shard.skip_host(host, reason)
            if self.robots:
                shard.save_robots(self.robots)
            if self.tries:
                shard.save_tries(self.tries)
            if self.untried:
                shard.forget_tries(self.untried)
            shard.archive_robots(self.robots_answers)
            if self.closed_hosts:  # when, for a restart (peer/giveups.py)
                now = time.time()
                shard.save_given_up([GivenUp(h, why, now) for h, why in self.closed_hosts])
            new_rows, foreign = place(self.discoveries)
            if self.acked:
                shard.outbox_remove(self.acked)
            if lastmods := self.lastmods:
                shard.save_lastmods(lastmods)
            if self.refresh or self.visits or self.retired:
                shard.save_refresh(self.refresh, self.visits, self.retired)
        return closed, new_rows, foreign

    def report_closed(self) -> None:
        """Log the hosts this batch gave up: one line a commit, however many hosts a
        page's dead links gave up, counted by reason with the first five named."""
        if not self.closed_hosts:
            return
        why = Counter(reason for _, reason in self.closed_hosts)
        more = len(self.closed_hosts) - 5
        log.warning(
            "gave up %d host(s) (%s): %s%s",
            len(self.closed_hosts),
            "; ".join(f"{reason}: {n}" for reason, n in why.most_common()),
            ", ".join(host for host, _ in self.closed_hosts[:5]),
            f" and {more} more" if more > 0 else "",
        )

    @property
    def settled(self) -> int:
        """Frontier entries this batch closes one by one (closed hosts' rows aside)."""
        return len(self.answered) + len(self.skips)


class Commits:
    """Collects what requests leave until a commit takes it; puts back what failed."""

    __slots__ = (
        "_acked",
        "_answered",
        "_arrived",
        "_bytes",
        "_closed_hosts",
        "_found",
        "_lastmods",
        "_marks",
        "_refresh",
        "_retired",
        "_robots",
        "_robots_answers",
        "_skips",
        "_then",
        "_then_writing",
        "_tries",
        "_unread",
        "_unread_bytes",
        "_untried",
        "_visits",
        "_writing",
        "given_up",
        "tries",
    )

    def __init__(self, arrived: Callable[[], None] = lambda: None) -> None:
        """``arrived``: called whenever something comes to be written (the committer
        sleeps while nothing waits)."""
        self._arrived = arrived
        self._marks: dict[str, HostMark] = {}
        # Pending URLs' failed tries: all known (the last run's too: the crawler loads
        # them), those to write, and the URLs settled since whose rows go.
        self.tries: dict[int, tuple[int, int]] = {}
        self._tries: dict[int, tuple[int, int]] = {}
        self._untried: list[int] = []
        self._closed_hosts: list[tuple[str, str]] = []
        self._robots: list[RobotsKept] = []
        self._robots_answers: list[RobotsAnswer] = []
        # Why each host given up lately was: a URL of it admitted later is closed saying
        # so (while its slot stands; once forgotten the host is tried again). The latest
        # GIVEN_UP_KEPT: kept for the run, a crawl meeting millions of dead hosts grew
        # by one a host for ever (a review).
        self.given_up: OrderedDict[str, str] = OrderedDict()
        self._answered: list[Answered] = []
        self._acked: list[int] = []
        self._skips: list[tuple[int, str]] = []
        self._found: list[NewURL] = []
        self._lastmods: list[Lastmod] = []
        self._refresh: list[RefreshRow] = []
        self._visits: list[Visit] = []
        # Pages retired from the refresher (their rows deleted), in the order they were;
        # one whose row came again since is no longer retired (a dict: an ordered set).
        self._retired: dict[int, None] = {}
        self._bytes = 0  # of the bodies among them
        # Pages answered, not yet read.
        self._unread: list[Unread] = []
        self._unread_bytes = 0  # of their bodies
        # The batch taken and not yet committed or failed.
        self._writing: Batch | None = None
        # Called once what waits is written (then), and once the batch taken is.
        self._then: list[Callable[[], object]] = []
        self._then_writing: list[Callable[[], object]] = []

    # -- what requests leave ------------------------------------------------
    def unread(
        self,
        host: str,
        entry: Entry,
        result: FetchResult,
        at: float,
        read: Found | ParsedPage | None = None,
    ) -> None:
        """A page answered at ``at`` (the wall clock), to be read with the others
        before the next commit (:mod:`ubipy.peer.pageanswers`); until then it waits as
        a page does. ``read``: what its body says, read already."""
        self._unread.append(Unread(host, entry, result, at, read))
        self._unread_bytes += len(result.body)
        self._arrived()

    @property
    def unread_bytes(self) -> int:
        """Bytes of the bodies of the pages not yet read."""
        return self._unread_bytes

    def take_unread(self) -> list[Unread]:
        """The pages answered and not yet read, to read now, oldest first."""
        unread, self._unread = self._unread, []
        self._unread_bytes = 0
        return unread

    def answered(
        self, page: PageRecord, discovered: Iterable[NewURL] = (), lastmods: Iterable[Lastmod] = ()
    ) -> None:
        self._answered.append(Answered(page, tuple(discovered), tuple(lastmods)))
        self._bytes += len(page.body or b"")
        self._settled(page.fp)
        self._arrived()

    def refreshed(self, row: RefreshRow | Retired | None, visit: Visit | None) -> None:
        """A page's new revisit state (or its retirement: its row is deleted), and the
        visit that made it (--recrawl)."""
        if isinstance(row, Retired):
            self._retired[row.fp] = None
        elif row is not None:
            self._refresh.append(row)
            self._retired.pop(row.fp, None)
        if visit is not None:
            self._visits.append(visit)
            self._bytes += len(visit.body or b"")
        self._arrived()

    def found(self, urls: Iterable[NewURL], lastmods: Iterable[Lastmod] = ()) -> None:
        """URLs found by a request that stores no page (a robots.txt's sitemaps, a
        sitemap read again), and the lastmods it gave them."""
        self._found.extend(urls)
        self._lastmods.extend(lastmods)
        self._arrived()

    def mark(self, host: str, mark: HostMark) -> None:
        """The host's politeness mark now; a later one replaces it."""
        self._marks[host] = mark
        self._arrived()

    def close_host(self, host: str, reason: str) -> None:
        """The host is given up: its pending frontier rows are closed, saying why (and
        so are the URLs of it admitted later in this run: see ``given_up``)."""
        self._closed_hosts.append((host, reason))
        self.remember_given_up([GivenUp(host, reason, 0.0)])
        self._arrived()

    def remember_given_up(self, hosts: Iterable[GivenUp]) -> None:
        """Hosts given up, and why, oldest first (this run's, or the last's at a
        start): the latest GIVEN_UP_KEPT are kept."""
        given_up = self.given_up
        for g in hosts:
            given_up[g.host] = g.reason
            given_up.move_to_end(g.host)
            if len(given_up) > GIVEN_UP_KEPT:
                given_up.popitem(last=False)

    def robots_known(self, kept: RobotsKept) -> None:
        """A host's robots.txt answered with rules: kept for a restart."""
        self._robots.append(kept)
        self._arrived()

    def robots_answered(self, answer: RobotsAnswer) -> None:
        """A robots.txt answer as received, for the WARC files."""
        self._robots_answers.append(answer)
        self._bytes += len(answer.body)
        self._arrived()

    def tried(self, entry: Entry) -> None:
        """A pending URL failed and is to be asked again: its tries so far, for its
        window's next load and for a restart."""
        self.tries[entry.fp] = self._tries[entry.fp] = (entry.attempt, entry.free)
        self._arrived()

    def _settled(self, fp: int) -> None:
        """A URL was answered or closed: whatever tries it had are owed no more."""
        if self.tries and self.tries.pop(fp, None) is not None:
            self._tries.pop(fp, None)
            self._untried.append(fp)

    def skip(self, fp: int, reason: str) -> None:
        """A frontier entry closed without a request, saying why."""
        self._skips.append((fp, reason))
        self._settled(fp)
        self._arrived()

    def acked(self, fps: Iterable[int]) -> None:
        self._acked.extend(fps)
        self._arrived()

    @property
    def acked_waiting(self) -> frozenset[int]:
        """Forwarded URLs their owner has whose outbox rows the next batch removes."""
        return frozenset(self._acked)

    # -- what waits -----------------------------------------------------------
    @property
    def pages_waiting(self) -> int:
        """Answered pages not yet written, counting those being written and those
        not yet read."""
        writing = len(self._writing.answered) if self._writing is not None else 0
        return len(self._answered) + writing + len(self._unread)

    @property
    def bytes_waiting(self) -> int:
        """Bytes of the bodies waiting for the next batch (held in memory until then),
        those of pages not yet read among them."""
        return self._bytes + self._unread_bytes

    def unsettled(self) -> set[int]:
        """Fingerprints of frontier entries asked (or skipped) but not yet written as
        closed: still pending on disk, and not to be loaded again."""
        fps = {a.page.fp for a in self._answered} | {fp for fp, _ in self._skips}
        fps.update(u.entry.fp for u in self._unread)
        if self._writing is not None:
            fps.update(a.page.fp for a in self._writing.answered)
            fps.update(fp for fp, _ in self._writing.skips)
        return fps

    def mark_of(self, host: str) -> HostMark | None:
        """The host's mark waiting to be written, or being written (None: none): newer
        than the shard's."""
        mark = self._marks.get(host)
        if mark is None and self._writing is not None:
            mark = self._writing.marks.get(host)
        return mark

    def __bool__(self) -> bool:
        """Whether anything waits to be written, or is being written."""
        return self._writing is not None or bool(
            self._marks
            or self._closed_hosts
            or self._answered
            or self._acked
            or self._skips
            or self._found
            or self._lastmods
            or self._refresh
            or self._visits
            or self._retired
            or self._robots
            or self._robots_answers
            or self._unread
            or self._tries
            or self._untried
        )

    # -- a commit ---------------------------------------------------------------
    def take(self) -> Batch | None:
        """Everything waiting, as one batch to write; None if nothing waits.

        Then ``committed()`` or ``failed()`` before the next ``take()``.
        """
        assert self._writing is None, "the last batch was neither committed nor failed"
        if not self:
            return None
        batch = Batch(
            self._marks,
            tuple(self._closed_hosts),
            tuple(self._answered),
            tuple(self._acked),
            tuple(self._skips),
            tuple(self._found),
            tuple(self._refresh),
            tuple(self._visits),
            tuple(self._lastmods),
            tuple(self._retired),
            tuple(self._robots),
            tuple(self._robots_answers),
            self._tries,
            tuple(self._untried),
        )
        self._marks = {}
        self._tries = {}
        self._untried = []
        self._robots = []
        self._robots_answers = []
        self._closed_hosts = []
        self._answered = []
        self._bytes = 0
        self._acked = []
        self._skips = []
        self._found = []
        self._lastmods = []
        self._refresh = []
        self._visits = []
        self._retired = {}
        self._writing = batch
        self._then_writing, self._then = self._then, []
        return batch

    def then(self, call: Callable[[], object]) -> None:
        """Call ``call`` once what waits now is written (at once if nothing waits)."""
        if self:
            self._then.append(call)
        else:
            call()

    def committed(self) -> None:
        """The batch is on disk."""
        self._done()
        then, self._then_writing = self._then_writing, []
        if not self:  # what came while it was written was written too: nothing waits
            then, self._then = then + self._then, []
        for call in then:
            call()

    def failed(self) -> None:
        """The batch was not written: it goes back in front of what came since, for
        the next commit. A mark that came since is newer and stays."""
        batch = self._done()
        self._then[:0], self._then_writing = self._then_writing, []
        self._marks = {**batch.marks, **self._marks}
        self._tries = {**batch.tries, **self._tries}
        self._untried[:0] = batch.untried
        self._closed_hosts[:0] = batch.closed_hosts
        self._robots[:0] = batch.robots
        self._robots_answers[:0] = batch.robots_answers
        self._answered[:0] = batch.answered
        self._acked[:0] = batch.acked
        self._skips[:0] = batch.skips
        self._found[:0] = batch.found
        self._lastmods[:0] = batch.found_lastmods
        # Retired before what came since: a row of the page that came since (a page
        # kept again) keeps it.
        since = {r.fp for r in self._refresh}
        retired = dict.fromkeys(fp for fp in batch.retired if fp not in since)
        self._retired = {**retired, **self._retired}
        self._refresh[:0] = batch.refresh
        self._visits[:0] = batch.visits
        self._bytes += sum(len(a.page.body or b"") for a in batch.answered)
        self._bytes += sum(len(v.body or b"") for v in batch.visits)
        self._bytes += sum(len(a.body) for a in batch.robots_answers)

    def _done(self) -> Batch:
        batch = self._writing
        assert batch is not None, "no batch is being written"
        self._writing = None
        return batch
