"""Visits of a page kept by another shard than its first fetch, joined at export.

Under ``--recrawl`` a host handed to another peer (a peer joined, or one died) is
visited by its new owner, which records those visits in its own shard, while the page
row (its first fetch) stays with the old owner. Exported shard by shard, those visits
were lost without a word (QA: a quarter of a two-peer crawl's visits), and a WARC
export wrote a file of nothing for them. Here each page takes the visits every other
shard exported with it holds of it, in time order. Visits of a page that no shard
exported holds are counted as left out.

The new owner of a page cannot write a ``revisit`` for an unchanged visit into its
WARC files (the response it would refer to is in the old owner's); the export writes
it beside the files it copies, referring to that response.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence

from ubipy.store.snapshot import PageHistory, ShardReader, StoredVisit

__all__ = ["Strays"]


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
