"""The URL filters (--include, --exclude, and --max-depth) of this run, applied again to
what reaches the scheduler from elsewhere than this run's own discoveries.

A URL is filtered where it is found (:mod:`ubipy.peer.discovery`), under the filters
of the run that found it. A peer restarted with a new --exclude (a trap seen too late)
still holds what was admitted before: its pending frontier, its unsent forwards (the
outbox), its pages due again (--recrawl, :mod:`ubipy.peer.refreshing`); and a peer
that still runs with the old filters forwards URLs found under them. So the filters
are applied again:

- to pending entries as a host's window is loaded from disk: each pending URL is,
  once, on its way to be fetched (a compiled regex search each, none without
  filters). One filtered is closed unfetched with the filter's reason, like one
  robots.txt forbids, and said in the log once a run. A later start whose filters
  take it again reopens it (the shard keeps the filters it last ran with, so only a
  change costs a scan of the closed rows): a restart with a mistyped --exclude
  closed the pending URLs for good, and the crawl ended at 33 of its 168 pages (QA);
- to the outbox at start-up, before it is sent again (a filtered URL never crosses the
  wire); it leaves the outbox;
- to URLs admitted from elsewhere (forwarded, taken over, the outbox's own): dropped
  before admission, as a link would be.

Entries this run admitted and kept in memory passed the same filters: not checked
again (the commit path of every page is left alone). Each URL left out is counted in
``filtered``, by filter. A sitemap is never filtered (see discovery): it is how pages
are found, not one of them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Sequence

from ubipy.errors import StorageError
from ubipy.fetch import Entry, Filtered, UrlFilter
from ubipy.peer.commits import Commits
from ubipy.peer.crawlstats import CrawlStats
from ubipy.store import NewURL, Shard

__all__ = ["Refilter"]

log = logging.getLogger(__name__)

# The filters the shard's last run had (UrlFilter's str).
_FILTERS_META = "url_filters"

# A host's pending entries from disk: (host, after this sequence, at most) -> entries.
Loader = Callable[[str, int, int], list[Entry]]
# Under a ranked order, those past an entry in rank order (None: from the best): so
# many read, those of a set left out.
RankedLoader = Callable[[str, Entry | None, int, Collection[int]], list[Entry]]


class Refilter:
    """This run's URL filters, on the paths in the module's docstring."""

    def __init__(
        self, filters: UrlFilter, shard: Shard, commits: Commits, stats: CrawlStats
    ) -> None:
        self._filters = filters
        self._shard = shard
        self._commits = commits
        self._stats = stats
        self._closing_said = False

    def reopen(self) -> int:
        """At a start, the rows an earlier run's filters closed that this run's take
        are pending again; returns how many. Nothing to do (no scan) when the filters
        are the last run's."""
        filters, shard = self._filters, self._shard
        now = str(filters)
        if shard.get_meta(_FILTERS_META) == now:
            return 0
        reopened = 0
        try:
            for rows in shard.closed_for([f.value for f in Filtered]):
                back = [fp for fp, url, depth in rows if filters.verdict_at(url, depth) is None]
                shard.reopen(back)
                reopened += len(back)
            with shard.transaction():
                shard.set_meta(_FILTERS_META, now)
        except StorageError as exc:  # a full disk: asked again at the next start
            log.warning("URLs closed by earlier filters not reopened: %s", exc)
        if reopened:
            log.info(
                "%d URLs closed by an earlier run's --include/--exclude/--max-depth are pending "
                "again: this run's filters take them",
                reopened,
            )
        return reopened

    def _closing(self) -> None:
        if not self._closing_said:
            self._closing_said = True
            log.warning(
                "--include/--exclude/--max-depth close pending URLs an earlier run admitted "
                "(counted in status; a start whose filters take them again reopens them)"
            )

    def loader(self, load: Loader, ranked: RankedLoader | None = None) -> Loader:
        """``load`` (a host's pending entries from disk, for its window), the filtered
        ones closed on the way; ``load`` itself when there are no filters. Under a
        ranked order, ``ranked`` loads past the last entry seen: loaded afresh, each
        load gave the best again with what was closed left out, so one window of a host
        of n URLs filtered read n squared / 64 rows (8,000: 0.84 s of the event loop,
        hours at a million; a review)."""
        filters = self._filters
        if not filters:
            return load
        commits, filtered = self._commits, self._stats.filtered

        def loaded(host: str, after_seq: int, limit: int) -> list[Entry]:
            kept: dict[int, Entry] = {}
            closing: set[int] | None = None
            closed = 0  # by this load: behind the last row read
            # Fewer than ``limit`` tells the scheduler the disk holds no more for the
            # host: what is filtered out is made up from further on, until it is so.
            # Each load asks for ``limit`` again, past the last row: in admission
            # order, or in rank order (``ranked``; without it the best again, those
            # kept included, the closed ones left out as unsettled).
            rows = load(host, after_seq, limit)
            while True:
                for e in rows:
                    if e.fp in kept:
                        continue
                    why = filters.verdict_at(e.url, e.depth)
                    if why is None:
                        kept[e.fp] = e
                        continue
                    if closing is None:
                        # Closed but not yet written, a row is still pending on disk:
                        # loaded again (a window's tail dropped here), not closed twice.
                        closing = commits.unsettled()
                    if e.fp not in closing:
                        closing.add(e.fp)
                        closed += 1
                        commits.skip(e.fp, why.value)
                        filtered[why] += 1
                        self._closing()
                if len(rows) < limit or len(kept) >= limit:
                    # Past ``limit``: loaded again with the next window.
                    return list(kept.values())[:limit]
                if ranked is not None:
                    # What else is unsettled may lie ahead: read as many more.
                    left_out = commits.unsettled() if closing is None else closing
                    rows = ranked(host, rows[-1], limit + len(left_out) - closed, left_out)
                else:
                    rows = load(host, rows[-1].seq, limit)

        return loaded

    def kept(self, urls: Sequence[NewURL]) -> list[NewURL]:
        """``urls`` less those the filters drop (counted)."""
        filters = self._filters
        if not filters:
            return list(urls)
        out: list[NewURL] = []
        for u in urls:
            why = filters.verdict_at(u.url, u.depth)
            if why is None:
                out.append(u)
            else:
                self._stats.filtered[why] += 1
        return out

    def outbox(self) -> Iterator[list[NewURL]]:
        """The forwards an earlier run left unsent, less those the filters drop (these
        leave the outbox), a chunk at a time: all at once, an outbox of millions kept
        for a silent owner was all in memory at the next start."""
        for waiting in self._shard.outbox_chunks():
            kept = self.kept(waiting)
            if len(kept) < len(waiting):
                left = {u.fp for u in kept}
                self._shard.outbox_remove([u.fp for u in waiting if u.fp not in left])
            yield kept
