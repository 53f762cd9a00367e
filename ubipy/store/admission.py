"""Admission: is this URL new to the shard?

Three layers, cheapest first. An exact cache of recently admitted fingerprints
catches the links every page of a site repeats (menus, footers). A scalable
Bloom filter answers "certainly new" for the rest without touching disk. A Bloom
"maybe" is only a maybe: it is confirmed against the frontier's exact fingerprints,
so a false positive costs one indexed lookup and never drops a URL.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ubipy.store.bloom import GrowingBloom
from ubipy.store.shard import FrontierRow, NewURL, Shard


@dataclass(slots=True)
class AdmissionStats:
    offered: int = 0
    recent_hits: int = 0
    bloom_new: int = 0
    bloom_maybe: int = 0
    false_positives: int = 0
    admitted: int = 0


class Admission:
    """Deduplicates candidate URLs and writes the new ones to the frontier."""

    def __init__(
        self,
        shard: Shard,
        *,
        recent_size: int = 65_536,
        bloom_capacity: int = 1_000_000,
        bloom_error_rate: float = 0.001,
    ) -> None:
        self._shard = shard
        # Recently admitted fingerprints, each True once its page is fetched here.
        self._recent: OrderedDict[int, bool] = OrderedDict()
        self._recent_size = recent_size
        self._bloom = GrowingBloom(bloom_capacity, bloom_error_rate)
        self.stats = AdmissionStats()
        # (host, fp, amount): scores added to URLs already known since the last
        # :meth:`take_credits` (a ranked crawl order: the cash of a link found again).
        self._credits: list[tuple[str, int, float]] = []

    def load(self) -> int:
        """Rebuild the Bloom filter from the shard's exact fingerprints."""
        n = 0
        for fp in self._shard.iter_seen():
            self._bloom.add(fp)
            n += 1
        return n

    def admit(self, candidates: Sequence[NewURL]) -> list[FrontierRow]:
        """Admit the new candidates; returns the frontier rows created.

        Runs inside the caller's transaction when there is one. If that
        transaction rolls back, the caller must call :meth:`rollback`.
        """
        stats = self.stats
        stats.offered += len(candidates)
        fresh: dict[int, NewURL] = {}
        maybe: dict[int, NewURL] = {}
        recent = self._recent
        bloom = self._bloom
        credits: list[tuple[str, int, float]] = []
        for c in candidates:
            fp = c.fp
            if fp in recent:
                recent.move_to_end(fp)
                stats.recent_hits += 1
                # A fetched page's score is spent: crediting it would cost an UPDATE
                # that changes nothing and a window lookup (most links found again
                # lead to pages fetched already: menus, footers).
                if c.score and not recent[fp]:
                    credits.append((c.host, fp, c.score))
                continue
            if fp in fresh or fp in maybe:
                if c.score:
                    same = fresh if fp in fresh else maybe
                    same[fp] = same[fp]._replace(score=same[fp].score + c.score)
                continue
            if fp in bloom:
                maybe[fp] = c
            else:
                fresh[fp] = c
        stats.bloom_new += len(fresh)
        stats.bloom_maybe += len(maybe)
        if maybe:
            known = self._shard.seen_many(list(maybe))
            for fp, c in maybe.items():
                if fp not in known:
                    stats.false_positives += 1
                    fresh[fp] = c
                else:
                    self._remember(fp)
                    if c.score:
                        credits.append((c.host, fp, c.score))
        if credits:
            self._shard.credit((fp, amount) for _, fp, amount in credits)
            self._credits.extend(credits)
        if not fresh:
            return []
        rows = self._shard.add_to_frontier(list(fresh.values()))
        for fp in fresh:
            # A false positive is in the filter already: added again, a batch retried
            # through a disk-full outage grew the chain by its size at every try.
            if fp not in maybe:
                bloom.add(fp)
            self._remember(fp)
        stats.admitted += len(rows)
        return rows

    def fetched(self, fps: Iterable[int]) -> None:
        """These pages are stored as fetched (in the transaction about to admit their
        links): links found to them again bring no credit. A fingerprint no longer in
        the exact cache is credited as before, the shard's UPDATE matching no row."""
        recent = self._recent
        for fp in fps:
            if fp in recent:
                recent[fp] = True

    def learn(self, fps: Iterable[int]) -> None:
        """Fingerprints written to the frontier by another path (a hand-off): the filter
        must say "maybe" for them, or they would be taken for new."""
        for fp in fps:
            self._bloom.add(fp)

    def forget(self, fps: Iterable[int]) -> None:
        """Drop fingerprints from the exact cache (their host went to another peer)."""
        for fp in fps:
            self._recent.pop(fp, None)

    def rollback(self) -> None:
        """Forget the exact cache after a failed transaction.

        Extra Bloom bits are harmless (a maybe is always confirmed); a stale
        exact-cache entry would drop a URL, so the cache is cleared.
        """
        self._recent.clear()
        self._credits.clear()

    def take_credits(self) -> list[tuple[str, int, float]]:
        """(host, fp, amount) credited in the shard since the last call, for the
        scheduler's windows: call once the transaction that wrote them commits."""
        credits, self._credits = self._credits, []
        return credits

    def _remember(self, fp: int) -> None:
        recent = self._recent
        recent[fp] = False
        if len(recent) > self._recent_size:
            recent.popitem(last=False)
