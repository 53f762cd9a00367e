"""What a continuous crawl keeps of each page it refreshes, what it counts, and each
page's estimated change rate for a plan (:mod:`ubipy.peer.refreshing` plans and asks)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from ubipy.fetch import Entry, History, estimate
from ubipy.store import RefreshRow

__all__ = ["RefreshPage", "RefreshStats", "change_rates", "refresh_entry"]

# Visits below which a page's own estimate is not trusted under --refresh cluster.
_CLUSTER_MIN_VISITS = 3


@dataclass(slots=True)
class RefreshPage:
    fp: int
    url: str
    host: str
    depth: int
    history: History
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
    # When it was last asked, answered or not (its history's last visit is its last
    # answer, never later): a plan counts its interval from then. Not kept across a
    # restart, where it is the last visit.
    asked_at: float = 0.0
    # Answers in a row that were not a 200 or a 304 (a time-out, a 5xx, a 404...), and
    # the 404s among the last ones in a row. Kept in memory only: a restart counts
    # them from 0 again (a page failing then makes one request more, at its due time,
    # before it backs off again, and a 404 three more before it is retired).
    failures: int = 0
    missing: int = 0
    # The due time a start found in its row (its back-off, a bar): not before then
    # unless a lastmod hint makes the page due, whatever a plan says.
    held_until: float = 0.0

    def row(self) -> RefreshRow:
        h = self.history
        return RefreshRow(
            self.fp,
            self.url,
            self.host,
            self.depth,
            h.visits,
            h.changes,
            h.observed,
            h.last_visit,
            self.due,
            self.importance,
            self.etag,
            self.last_modified,
            self.digest,
            self.checks,
            self.agreed,
        )


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
    return Entry(page.fp, 0, page.url, page.depth, score=page.importance, refresh=True)


def change_rates(pages: Sequence[RefreshPage], *, by_group: bool) -> list[float]:
    """Each page's estimated change rate; a page without enough visits of its own
    takes the pooled rate of its host (cluster) or of all pages (the others)."""

    def pooled(group: Sequence[RefreshPage]) -> float | None:
        """The group's pages as one history: its visits, changes and time added."""
        intervals = sum(p.history.visits - 1 for p in group)
        changes = sum(p.history.changes for p in group)
        observed = sum(p.history.observed for p in group)
        return estimate(History(intervals + 1, changes, observed))

    own = [estimate(p.history) for p in pages]
    seen = [p for p, r in zip(pages, own, strict=True) if r is not None]
    everyone = pooled(seen) or 0.0
    if not by_group:
        return [everyone if r is None else r for r in own]
    groups: dict[str, list[RefreshPage]] = defaultdict(list)
    for p in pages:
        if p.history.visits >= _CLUSTER_MIN_VISITS:
            groups[p.host].append(p)
    by_host = {host: pooled(members) for host, members in groups.items()}
    return [
        r
        if p.history.visits >= _CLUSTER_MIN_VISITS and r is not None
        else (by_host.get(p.host) or everyone)
        for p, r in zip(pages, own, strict=True)
    ]
