"""The hosts' windows: what of each host's frontier the scheduler holds in memory.

A slot holds a window of the host's frontier (``host_window`` entries at most); the
rest stays on disk and is loaded through ``loader`` when the window runs dry. Entries
held in memory over all hosts are counted: beyond ``max_in_memory``, new entries stay
on disk and windows refill one entry at a time, so memory is bounded whatever the
number of hosts. Under a ranked order (ranking.py) a window holds the best entries it
has seen, and a host's URLs leave it best first.

No I/O and no clock, as the scheduler (:mod:`ubipy.fetch.politeness`).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable

from ubipy.config import CrawlOrder
from ubipy.fetch import ranking
from ubipy.fetch.slots import Entry, HostSlot, Loader, scheme_bit

__all__ = ["Windows"]


class Windows:
    def __init__(self, *, window: int, loader: Loader, max_in_memory: int, ranked: bool) -> None:
        self._window = window
        self._loader = loader
        self._max_in_memory = max_in_memory
        self._ranked = ranked
        # Entries held in memory over all hosts.
        self.in_memory = 0

    def add(self, slot: HostSlot, entry: Entry) -> None:
        """An admitted entry: into the host's window if it has room, else on disk."""
        room = len(slot.queue) < self._window and self.in_memory < self._max_in_memory
        if self._ranked:
            self._offer(slot, entry, room)
        elif slot.on_disk == 0 and room:
            slot.queue.append(entry)
            self.in_memory += 1
            slot.last_seq = entry.seq
        else:
            _to_disk(slot, entry)

    def _offer(self, slot: HostSlot, entry: Entry, room: bool) -> None:
        """Under a ranked order a window holds the best entries it has seen: a new
        one better than its worst takes that one's place (which stays on disk)."""
        if room:
            slot.queue.append(entry)
            slot.best = -1
            slot.floor = min(slot.floor, entry.score)
            self.in_memory += 1
            return
        _to_disk(slot, entry)
        if entry.score <= slot.floor:
            return  # most links of a crawl: the window's worst is at least as good
        at, low = ranking.worst(slot.queue, slot.credit)
        # Whether or not it is replaced, nothing left in the window scores under low.
        slot.floor = low
        if at >= 0 and entry.score > low:
            slot.credit.pop(slot.queue[at].fp, None)
            # It stays on disk in the entry's place (counted as the entry was).
            slot.disk_schemes |= scheme_bit(slot.queue[at].url)
            del slot.queue[at]
            slot.queue.append(entry)
            slot.best = -1

    def credit(self, slot: HostSlot, fp: int, amount: float) -> None:
        """Add ``amount`` to a pending entry's score (a ranked order)."""
        if not self._ranked:
            return
        slot.best = -1
        credit = slot.credit
        credit[fp] = credit.get(fp, 0.0) + amount
        if len(credit) > 2 * len(slot.queue) + 64:
            # Only the window's entries need theirs (the shard holds the others'
            # scores): links to pages fetched long ago are credited too, and a host
            # whose work fits its window is never refilled, which would drop them
            # (20,000 kept for a window of 1, found by a review).
            credit = {e.fp: credit[e.fp] for e in slot.queue if e.fp in credit}
            slot.credit = credit

    def rescore(self, slots: Iterable[HostSlot], scores: dict[int, float]) -> None:
        """New scores for entries in memory (PageRank recomputed; the shard has them)."""
        for slot in slots:
            slot.queue = deque(
                e._replace(score=scores[e.fp])
                if e.fp in scores and slot.credit.get(e.fp) != ranking.FIRST
                else e
                for e in slot.queue
            )
            slot.credit = {fp: c for fp, c in slot.credit.items() if c == ranking.FIRST}
            slot.floor = -math.inf
            slot.best = -1

    def priority(self, slot: HostSlot, order: CrawlOrder) -> float:
        """How urgently a host that came due should go next under ``order`` (higher
        first); under a ranked order, where its best entry is is kept for its pop."""
        if order is CrawlOrder.BIG_SITE_FIRST:
            return float(len(slot.queue) + slot.on_disk)
        slot.best, top = ranking.best(slot.queue, slot.credit)
        return top

    def peek_url(self, slot: HostSlot) -> str | None:
        """The URL of the host's first entry, loaded from disk (its window is empty)."""
        self.refill(slot)
        return slot.queue[0].url if slot.queue else None

    def pop(self, slot: HostSlot) -> Entry | None:
        """The host's next entry (its best, under a ranked order), if any."""
        if not slot.queue:
            self.refill(slot)
        if not slot.queue:
            return None
        self.in_memory -= 1
        if self._ranked:
            at, slot.best = slot.best, -1
            return ranking.pop_best(slot.queue, slot.credit, at)
        return slot.queue.popleft()

    def put_back(self, slot: HostSlot, entry: Entry) -> None:
        """An entry handed out goes back to the front of its host's window (a retry, an
        abandoned request): it goes first, whatever its score."""
        slot.queue.appendleft(entry)
        self.in_memory += 1
        if self._ranked:
            slot.credit[entry.fp] = ranking.FIRST
            slot.best = -1

    def apply_backoff(self, slot: HostSlot, now: float) -> None:
        """While one of the host's schemes is backed off (SchemeBackoff), its entries
        leave the window (loaded from disk while the window runs dry), and its pages due
        again that have come due leave their heap, so that the host's next request is
        of its other scheme. At most a window of them per host leave it so (a retry's
        own entry may join them; all are counted in memory still, beside the window
        refilled): past that, the back-off is ``full``, and the host waits for its end
        as a whole. Once it is over, they go back to the front of the window, first."""
        backoff = slot.backoff
        if backoff is None:
            return
        if now >= backoff.until:
            self.bring_back(slot)
            return
        room = self._window - len(backoff.entries)
        left = False  # of the scheme, with no room aside
        while True:
            if not slot.queue:
                self.refill(slot)  # the window ran dry: the next of the host's from disk
            kept: deque[Entry] = deque()
            for e in slot.queue:
                if e.url.startswith(backoff.scheme):
                    if room > 0:
                        backoff.entries.append(e)
                        room -= 1
                        continue
                    left = True
                kept.append(e)
            slot.queue, slot.best = kept, -1
            if kept or slot.on_disk <= 0:
                break
        while slot.refresh and slot.refresh[0][0] <= now:
            if not slot.refresh[0][4].startswith(backoff.scheme):  # the item's URL
                break
            if room <= 0:
                left = True
                break
            backoff.entries.append(slot.pop_due())
            self.in_memory += 1
            room -= 1
        backoff.full = left

    def set_entry_aside(self, slot: HostSlot, entry: Entry) -> None:
        """An entry handed out goes aside with its backed-off scheme's (a retry)."""
        assert slot.backoff is not None
        slot.backoff.entries.append(entry)
        self.in_memory += 1

    def bring_back(self, slot: HostSlot) -> None:
        """A backed-off scheme's entries back at the front of the window, in their order
        (its robots.txt is to be asked again, or the back-off is over)."""
        backoff = slot.backoff
        if backoff is None:
            return
        slot.queue.extendleft(reversed(backoff.entries))
        if self._ranked:
            for e in backoff.entries:
                slot.credit[e.fp] = ranking.FIRST
        backoff.entries, backoff.until, backoff.full = [], -math.inf, False
        slot.best = -1

    def clear(self, slot: HostSlot) -> None:
        """The host's entries are forgotten, in memory and on disk (given up, dropped)."""
        self.in_memory -= len(slot.queue) + len(slot.aside)
        slot.backoff = None
        slot.queue.clear()
        slot.best = -1
        slot.on_disk = slot.disk_schemes = 0

    def refill(self, slot: HostSlot) -> None:
        if slot.on_disk <= 0:
            return
        # Over the memory budget a host still gets one entry, so it keeps moving.
        limit = self._window if self.in_memory < self._max_in_memory else 1
        # A ranked order loads the host's best (its loader ignores the sequence);
        # the credits are in the shard by now, so the loaded scores hold them.
        # Set aside, a backed-off scheme's URLs still wait on disk, where a ranked
        # order's load (best first) would find them again: left out, as the URLs in
        # flight are. (Loaded in order, past the last loaded, they are not met again.)
        aside = slot.aside if self._ranked else ()
        rows = self._loader(slot.host, slot.last_seq, limit + len(aside))
        # All asked for came, or some of them are cut below: the disk holds more.
        more = len(rows) == limit + len(aside)
        if aside:
            fps = {e.fp for e in aside}
            rows = [e for e in rows if e.fp not in fps]
            more = more or len(rows) > limit
            rows = rows[:limit]
        if self._ranked:
            slot.credit = {fp: c for fp, c in slot.credit.items() if c == ranking.FIRST}
            slot.floor = -math.inf
        slot.queue.extend(rows)
        slot.best = -1
        self.in_memory += len(rows)
        if rows:
            slot.last_seq = rows[-1].seq
        # Fewer rows than asked for means the disk holds no more for this host.
        slot.on_disk = slot.on_disk - len(rows) if more else 0
        if not slot.on_disk:
            slot.disk_schemes = 0


def _to_disk(slot: HostSlot, entry: Entry) -> None:
    """``entry`` waits on disk past the window: counted, its scheme noted."""
    slot.on_disk += 1
    slot.disk_schemes |= scheme_bit(entry.url)
