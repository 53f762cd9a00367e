"""What a continuous crawl keeps of each page it refreshes, what it counts, each
page's estimated change rate for a plan (:mod:`ubipy.peer.refreshing` plans and asks),
and its revisit state as it travels with its host to a new owner (HANDOFF's
``revisits``)."""

from __future__ import annotations

import logging
import math
import operator
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple

from ubipy.errors import WireError
from ubipy.fetch import Entry, History, change_rate, estimate
from ubipy.peer.router import url_item
from ubipy.store import RefreshRow
from ubipy.wire import MAX_VALIDATOR, MAX_WALL, Revisit

__all__ = [
    "REVISITS_PER_FRAME",
    "REVISIT_BYTES_PER_FRAME",
    "Packed",
    "RefreshPage",
    "RefreshStats",
    "change_rates",
    "refresh_entry",
    "revisits_from_wire",
    "revisits_to_wire",
]

log = logging.getLogger(__name__)

# Visits below which a page's own estimate is not trusted under --refresh cluster.
_CLUSTER_MIN_VISITS = 3
# The revisits one HANDOFF frame carries at most, and their strings' bytes at most:
# beside a chunk's 2,000 pending URLs and done fingerprints, well under the frame's
# 4 MiB cap (a revisit is a URL, two validators, a digest and eleven numbers: a few
# hundred bytes; its numbers and its list's head take at most _REVISIT_HEAD in CBOR).
REVISITS_PER_FRAME = 1_000
REVISIT_BYTES_PER_FRAME = 1 << 20
_REVISIT_HEAD = 128


#: A RefreshPage as the refresher holds it: its fields, in order, in a plain tuple.
#: A tuple of numbers and strings is one the cyclic garbage collector stops tracking,
#: where an object of a class is tracked for good and each full collection goes
#: through its fields: at a million pages, 0.5 s a collection with the event loop
#: standing still (bench/refresh_memory.py).
Packed = tuple[
    int, int, float, float,  # visits, changes, observed, last_visit
    int, str, str, int, float,  # fp, url, host, depth, importance
    str | None, str | None, str | None,  # etag, last_modified, digest
    float, int, int, float, float, int, int, float,  # due ... held_until
]  # fmt: skip


@dataclass(slots=True, kw_only=True)
class RefreshPage(History):
    """A page refreshed here: its history (visits, changes, the time they cover, its
    last visit) and what its revisits need. Held packed (:data:`Packed`), taken out
    of it to be read or changed (:meth:`unpacked`, :meth:`packed`)."""

    fp: int
    url: str
    host: str
    depth: int
    importance: float
    etag: str | None
    last_modified: str | None
    digest: str | None
    due: float
    # Checks of its host's sitemap lastmods its visits made, and how many agreed.
    checks: int = 0
    agreed: int = 0
    # robots.txt forbade it when it came due: not before then (robots.txt may allow
    # it again), whatever a plan says. Kept across a restart only as its due time.
    barred_until: float = 0.0
    # When it was last asked, answered or not (its last visit is its last answer,
    # never later): a plan counts its interval from then. Not kept across a restart,
    # where it is the last visit.
    asked_at: float = 0.0
    # Answers in a row that were not a 200 or a 304 (a time-out, a 5xx, a 404...), and
    # the 404s among the last ones in a row. Kept with its row (schema 15), so a restart
    # goes on backing off and retiring from them, and so does the host's next owner
    # (HANDOFF's revisits carry them); a replica's take-over starts them from 0.
    failures: int = 0
    missing: int = 0
    # The due time a start found in its row (its back-off, a bar): not before then
    # unless a lastmod hint makes the page due, whatever a plan says.
    held_until: float = 0.0

    @classmethod
    def from_row(cls, r: RefreshRow, last: float, due: float) -> RefreshPage:
        """A page as its revisit row keeps it (a start's, a hand-off's), its last visit
        and its due time as the caller clamped them; held to that due time."""
        return cls(
            visits=r.visits, changes=r.changes, observed=r.observed, last_visit=last,
            fp=r.fp, url=r.url, host=sys.intern(r.host), depth=r.depth, importance=r.importance,
            etag=r.etag, last_modified=r.last_modified, digest=r.digest, due=due,
            checks=r.lastmod_checks, agreed=r.lastmod_agreed, asked_at=last, held_until=due,
            failures=r.failures, missing=r.missing,
        )  # fmt: skip

    @classmethod
    def unpacked(cls, t: Packed) -> RefreshPage:
        page = cls.__new__(cls)
        (
            page.visits, page.changes, page.observed, page.last_visit,
            page.fp, page.url, page.host, page.depth, page.importance,
            page.etag, page.last_modified, page.digest,
            page.due, page.checks, page.agreed, page.barred_until, page.asked_at,
            page.failures, page.missing, page.held_until,
        ) = t  # fmt: skip
        return page

    def packed(self) -> Packed:
        return _PACK(self)

    def row(self) -> RefreshRow:
        return RefreshRow(
            self.fp,
            self.url,
            self.host,
            self.depth,
            self.visits,
            self.changes,
            self.observed,
            self.last_visit,
            self.due,
            self.importance,
            self.etag,
            self.last_modified,
            self.digest,
            self.checks,
            self.agreed,
            self.failures,
            self.missing,
        )


# The fields in their order, read at C speed: a plan packs every page again.
_PACK = operator.attrgetter(*(f.name for f in fields(RefreshPage)))
_INDEX = {f.name: i for i, f in enumerate(fields(RefreshPage))}


def _reader(*names: str) -> operator.itemgetter[Any]:
    """What a packed page holds under these names, read without unpacking it (a plan
    reads every page)."""
    return operator.itemgetter(*(_INDEX[name] for name in names))


_DEPTH = _reader("depth")
_DUE_ENTRY = _reader("due", "fp", "url", "depth", "importance")


def depth_of(page: Packed) -> int:
    return _DEPTH(page)  # type: ignore[no-any-return]


@dataclass(slots=True)
class RefreshStats:
    refreshes: int = 0
    not_modified: int = 0
    unchanged: int = 0
    changed: int = 0
    # Answered with an error, or not at all: no visit of its history.
    failed: int = 0
    plans: int = 0
    barred: int = 0
    # No longer refreshed: gone (410), moved for good (301, 308) or missing (404) in a
    # row; their rows deleted.
    retired: int = 0


def refresh_entry(page: RefreshPage) -> Entry:
    return _entry(page.fp, page.url, page.depth, page.importance)


def due_entry(page: Packed) -> tuple[float, Entry]:
    """When a packed page is due, and its entry."""
    due, fp, url, depth, importance = _DUE_ENTRY(page)
    return due, _entry(fp, url, depth, importance)


def _entry(fp: int, url: str, depth: int, importance: float) -> Entry:
    return Entry(fp, 0, url, depth, score=importance, refresh=True)


class Sample(NamedTuple):
    """What a plan's arithmetic needs of a page, copied (it runs in a worker thread
    while answers change the pages). Plain values, no History: a tuple of them is
    untracked by the cyclic garbage collector, where a million tracked copies a plan
    brought on full collections of a second each (1M pages)."""

    visits: int
    changes: int
    observed: float
    host: str
    importance: float
    url: str  # for bench/freshness.py's oracle, which knows each URL's true rate

    @classmethod
    def of(cls, page: Packed) -> Sample:
        return cls._make(_SAMPLE(page))

    @property
    def history(self) -> History:
        return History(self.visits, self.changes, self.observed)


_SAMPLE = _reader(*Sample._fields)


def change_rates(pages: Sequence[Sample], *, by_group: bool) -> list[float]:
    """Each page's estimated change rate; a page without enough visits of its own
    takes the pooled rate of its host (cluster) or of all pages (the others)."""

    def pooled(group: Sequence[Sample], *, halves: bool = False) -> float | None:
        """The group's pages as one history: its visits, changes and time added.

        ``halves``: the rate stands in beside the pages' own estimates (the history
        policy), so each page never seen to change counts half a change, as its own
        estimate does. One half for the whole group made a page seen once 1/n as likely
        to change as each of n pages seen twice unchanged, and the plan left it to them
        (QA: of 34 pages that never changed, 14 not asked again for 3 minutes, the
        others every 45 s); halves only where none changed cut the rate 13 times at the
        first change seen (a review). Not for the cluster policy's hosts, whose pages
        take their host's rate alike (bench/freshness.py: halves there cost its pages
        before their 3rd visit 0.98 to 0.92 freshness)."""
        intervals = sum(p.visits - 1 for p in group)
        observed = sum(p.observed for p in group)
        if halves:
            return change_rate(intervals, sum(p.changes or 0.5 for p in group), observed)
        return estimate(History(intervals + 1, sum(p.changes for p in group), observed))

    own = [estimate(p.history) for p in pages]
    seen = [p for p, r in zip(pages, own, strict=True) if r is not None]
    everyone = pooled(seen, halves=not by_group) or 0.0
    if not by_group:
        return [everyone if r is None else r for r in own]
    groups: dict[str, list[Sample]] = defaultdict(list)
    for p in pages:
        if p.visits >= _CLUSTER_MIN_VISITS:
            groups[p.host].append(p)
    by_host = {host: pooled(members) for host, members in groups.items()}
    return [
        r
        if p.visits >= _CLUSTER_MIN_VISITS and r is not None
        else (by_host.get(p.host) or everyone)
        for p, r in zip(pages, own, strict=True)
    ]


def revisits_to_wire(rows: Iterable[RefreshRow]) -> list[tuple[Revisit, ...]]:
    """A host's pages' revisit state for its new owner, in runs of one HANDOFF frame
    each (at most REVISITS_PER_FRAME, and REVISIT_BYTES_PER_FRAME of strings). Held to
    what a receiver takes: a validator longer than it takes is left out (the page is
    asked once in full), a time out of bounds clamped, and a row it would refuse
    anyway (a URL over its limit: none such is kept) left out, said in the log."""
    runs: list[tuple[Revisit, ...]] = []
    run: list[Revisit] = []
    size = 0
    for r in rows:
        try:
            revisit = Revisit(
                r.url,
                r.depth,
                r.visits,
                r.changes,
                _wall(r.observed),
                _wall(r.last_visit),
                _wall(r.due),
                r.importance,
                _validator(r.etag),
                _validator(r.last_modified),
                _validator(r.digest),
                r.lastmod_checks,
                r.lastmod_agreed,
                r.failures,
                r.missing,
            )
        except WireError as exc:
            log.warning("%s: its revisit state stays behind: %s", r.url[:200], exc)
            continue
        texts = (revisit.url, revisit.etag, revisit.last_modified, revisit.digest)
        cost = _REVISIT_HEAD + sum(len(t.encode()) for t in texts if t)
        if run and (len(run) >= REVISITS_PER_FRAME or size + cost > REVISIT_BYTES_PER_FRAME):
            runs.append(tuple(run))
            run, size = [], 0
        run.append(revisit)
        size += cost
    if run:
        runs.append(tuple(run))
    return runs


def revisits_from_wire(revisits: Iterable[Revisit], host: str) -> list[RefreshRow]:
    """The revisit state of ``host``'s pages from its previous owner, as rows (their
    times still the sender's: :meth:`~ubipy.peer.refreshing.Refresher.adopt` reads
    them on this clock). Each URL is taken as any URL from a peer is (router's
    url_item): one that does not normalise is dropped; one of another host is a
    WireError."""
    rows: list[RefreshRow] = []
    for v in revisits:
        if (url := url_item(v.url, v.depth, 0.0, host)) is None:
            continue
        rows.append(
            RefreshRow(
                url.fp,
                url.url,
                host,
                v.depth,
                v.visits,
                v.changes,
                v.observed,
                v.last_visit,
                v.due,
                v.importance,
                v.etag,
                v.last_modified,
                v.digest,
                v.checks,
                v.agreed,
                v.failures,
                v.missing,
            )
        )
    return rows


def _wall(t: float) -> float:
    """A time as a revisit carries it: finite, in [0, MAX_WALL]."""
    return min(max(t, 0.0), MAX_WALL) if math.isfinite(t) else 0.0


def _validator(text: str | None) -> str | None:
    return text if text is None or len(text) <= MAX_VALIDATOR else None
