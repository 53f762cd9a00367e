"""Visits of a page kept by another shard than its first fetch, joined at export.

Under ``--recrawl`` a host handed to another peer (a peer joined, or one died) is
visited by its new owner, which records those visits in its own shard, while the page
row (its first fetch) stays with the old owner. Exported shard by shard, those visits
were lost without a word (QA: a quarter of a two-peer crawl's visits), and a WARC
export wrote a file of nothing for them. Here each page takes the visits every other
shard exported with it holds of it, in time order. Visits of a page that no shard
exported holds are counted as left out.

A new owner asks a page it was handed in full once, so its WARC files hold a response
of it for its revisits (ubipy.peer.refreshing); a peer from before that could write
no ``revisit`` of an unchanged visit (the response it would refer to is in the old
owner's files): the export writes it beside the files it copies, referring to that
response.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence

from ubipy.store.snapshot import PageHistory, ShardReader, StoredPage, StoredVisit

__all__ = ["Refetched", "Strays"]


class Strays:
    """The stray visits of the shards of one export, and which of them were joined."""

    def __init__(self, readers: Sequence[ShardReader]) -> None:
        self._held = [(r, found) for r in readers if (found := r.strays())]
        wanted = {fp for _, found in self._held for fp in found}
        homed: set[int] = set()
        if wanted:
            for r in readers:
                homed |= r.carry(wanted)
        # Visits of pages no exported shard holds, and of those the answers that a
        # WARC export would have written beside the peers' files.
        self.unjoined = self.unjoined_outside = 0
        for _, found in self._held:
            for fp, (n, outside) in found.items():
                if fp not in homed:
                    self.unjoined += n
                    self.unjoined_outside += outside
        self._pending = homed

    def join(
        self, histories: Iterator[PageHistory], *, bodies: bool, outside_warc: bool = False
    ) -> Iterator[PageHistory]:
        """``histories`` (every shard's, merged in fetch order), each page with the
        visits the other shards hold of it. A page stored twice (fetched again after
        its peer died, with one replica) takes them at its first fetch."""
        if not self._pending:
            yield from histories
            return
        for history in histories:
            fp = history.fp
            if fp not in self._pending:
                yield history
                continue
            self._pending.discard(fp)
            stray: list[StoredVisit] = []
            for reader, found in self._held:
                if fp in found:
                    stray += reader.visits_of(fp, bodies=bodies, outside_warc=outside_warc)
            stray.sort(key=lambda v: v.at)
            visits = heapq.merge(history.visits, stray, key=lambda v: v.at)
            yield PageHistory(history.page, visits, fp)


class Refetched:
    """Pages whose first fetch more than one exported shard holds, for JSON Lines, where
    a page is one line: with one replica, a dead peer's hosts are crawled again by the
    others, and its data directory exported with theirs gave two lines for one URL
    (QA). The earliest fetch is the line; each later one is a visit of it (changed or
    not by its digest), its own visits with it. A WARC keeps both captures, as an
    archive does."""

    def __init__(self, readers: Sequence[ShardReader]) -> None:
        self._readers = readers
        self._twice: set[int] = set()
        if len(readers) > 1:
            last = None
            for fp in heapq.merge(*(r.fps() for r in readers)):
                if fp == last:
                    self._twice.add(fp)
                last = fp
        self._written: set[int] = set()

    def join(self, histories: Iterator[PageHistory]) -> Iterator[PageHistory]:
        for history in histories:
            fp = history.fp
            if fp not in self._twice:
                yield history
            elif fp not in self._written:
                self._written.add(fp)
                yield PageHistory(history.page, self._visits(history), fp)

    def _visits(self, first: PageHistory) -> Iterator[StoredVisit]:
        page = first.page
        later = [
            other
            for reader in self._readers
            if (other := reader.history_of(first.fp)) is not None
            and (other.page.peer, other.page.fetched_at) != (page.peer, page.fetched_at)
        ]
        events: list[tuple[float, StoredPage | StoredVisit]] = [(v.at, v) for v in first.visits]
        for other in later:
            events.append((other.page.fetched_at, other.page))
            events += [(v.at, v) for v in other.visits]
        events.sort(key=lambda event: event[0])
        held = page.digest
        for _, event in events:
            visit = _refetch(event, held) if isinstance(event, StoredPage) else event
            if visit.changed:
                held = visit.digest
            yield visit


def _refetch(page: StoredPage, held: str | None) -> StoredVisit:
    """A later first fetch as a visit: a new version if its digest is not the one held,
    the version held (nothing of its own) if it is, and an answer that was not the
    page (a failure, a 404) with what it had."""
    answered = page.status == 200 and page.error is None and page.digest is not None
    if answered and page.digest == held:
        return StoredVisit(page.fetched_at, page.status, False, held, None, 0, None, None, None)
    return StoredVisit(
        at=page.fetched_at,
        status=page.status,
        changed=answered,
        digest=page.digest,
        content_type=page.content_type,
        length=page.length,
        etag=page.etag,
        last_modified=page.last_modified,
        body=None,
        truncated=page.truncated,
        location=page.location,  # a redirect's target (QA: lost from such a visit)
        noindex=page.noindex,
    )
