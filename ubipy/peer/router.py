"""The router: every URL goes to the peer the ring names as its host's owner.

Foreign URLs wait in a per-owner outbox and leave as one batch when it holds
``batch_size`` URLs or has lingered ``linger`` seconds. With ``linger_cap``, the
linger is per other member, up to the cap: a peer's foreign links are spread
over one outbox per other member, so each fills that many times slower, and a
fixed linger would send ever thinner batches (more frames per URL) as the
cluster grows; the price is URLs reaching their owner later. A batch stays here until
its owner acknowledges it (after admitting it durably); unacknowledged batches
are sent again after ``retry_after`` seconds, less and less often while the owner
does not answer, and when the ring changes every waiting URL is routed afresh: some
now belong elsewhere, some to this peer. Admission is idempotent, so a batch
delivered twice does no harm.

An owner that stays a member but answers nothing (its disk refuses writes) is sent
again one unacknowledged batch alone, as a probe, once a back-off period, each in turn
(oldest first); the others wait here (and in the outbox on disk) until it answers, and
then go again at once. Each batch resent on its own back-off sent a peer that could not store them
its whole backlog every minute, the traffic growing with the square of the time it
was down (found by a review).

Every URL here is also in the outbox on disk, so memory need not hold them all: while
an owner is backed off, or holds ``hold_cap`` URLs here, its new URLs are kept on disk
alone ("spilled": the caller marks their rows so, ``take_marks``), and come back
(``reloads``, ``reload``) once it answers and has taken half of what it held. Held
in memory, a member whose disk refused writes for an hour cost every other peer its
share of an hour's links, and the links found again past the recent cache once more
each (a review): memory without bound. The price: a URL found again with OPIC cash
while its owner's URLs are on disk alone brings none (its row keeps the first find's).

Pure: no I/O, no clock; the peer passes ``now`` in and sends what comes out.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field

from ubipy.errors import WireError
from ubipy.fetch import BadURL, fingerprint, host_key, normalize
from ubipy.peer.ids import run_ids
from ubipy.ring import Placement
from ubipy.store import OUTBOX_CHUNK, HostMark, NewURL
from ubipy.wire import BatchURL, Mark, WireURL


@dataclass(frozen=True, slots=True)
class Batch:
    """URLs on their way to one owner, as one frame."""

    id: int
    owner: str
    urls: tuple[NewURL, ...]


@dataclass(slots=True)
class _Outbox:
    urls: list[NewURL] = field(default_factory=list)
    since: float = 0.0


# The longest wait between two sends of an unacknowledged batch.
_RESEND_CAP = 60.0


@dataclass(slots=True)
class _Unacked:
    batch: Batch
    sent_at: float
    attempts: int = 1
    # The ticket of its entry in the resend heap; _PARKED while its owner is backed off
    # and another of its batches is the probe.
    ticket: int = -1


_PARKED = -1


@dataclass(slots=True)
class _Owner:
    """An owner's unacknowledged batches, oldest first, and whether it is backed off:
    one of them, sent after the last send it answered, went unanswered and was sent
    again, and none has been acknowledged since."""

    held: dict[int, _Unacked] = field(default_factory=dict)
    backed_off: bool = False
    # When the latest send it acknowledged left: a batch sent before then and not
    # acknowledged was lost on the way, not sent to an owner that does not answer.
    answered: float = float("-inf")


@dataclass(slots=True)
class RouterStats:
    forwarded_urls: int = 0
    batches_sent: int = 0
    batches_resent: int = 0
    batches_acked: int = 0
    rerouted_urls: int = 0
    recent_skips: int = 0
    spilled_urls: int = 0  # kept on disk alone for a while (their owner silent or behind)


class Router:
    def __init__(
        self,
        self_id: str,
        placement: Placement,
        *,
        batch_size: int = 50,
        linger: float = 0.1,
        linger_cap: float | None = None,
        retry_after: float = 2.0,
        recent_size: int = 65_536,
        hold_cap: int = 50_000,
        rng: random.Random | None = None,
    ) -> None:
        self.self_id = self_id
        self._placement = placement
        self._batch_size = batch_size
        self._base_linger = linger
        self._linger_cap = linger_cap
        self._base_retry = retry_after
        self._linger = linger
        self._retry_after = retry_after
        self._scale_linger()
        self._outboxes: dict[str, _Outbox] = {}
        # Owners whose outbox holds URLs: due() and next_deadline() look at these alone.
        self._filled: dict[str, _Outbox] = {}
        self._unacked: dict[int, _Unacked] = {}
        self._owners: dict[str, _Owner] = {}
        # (when, ticket, batch id) of each batch's next resend; an entry whose ticket is
        # no longer its batch's (acknowledged, parked, rescheduled) is passed over, so a
        # wake costs the batches due then, not every batch waiting.
        self._resends: list[tuple[float, int, int]] = []
        self._tickets = itertools.count()
        # URLs in memory per owner (its outbox and unacknowledged batches), kept as they
        # come and go (the backlog is asked at every acknowledgement); owners with
        # URLs on disk alone (this peer's own id too, after a ring change: any row may
        # be anyone's), and about how many (a URL found again, with OPIC cash or past
        # the recent cache, counts again).
        self._hold_cap = hold_cap
        self._held: dict[str, int] = {}
        self._spilled: set[str] = set()
        self._spilled_urls = 0
        self._marks: list[int] = []  # kept on disk alone, their rows not yet marked so
        self._ids = run_ids(rng)
        # Links repeated on every page of a site (menus, footers) would otherwise
        # be forwarded again and again; the owner would drop them, but the wire
        # would carry them. Fingerprint -> the owner it went to: only a URL whose
        # host that owner still owns is skipped. Keyed by fingerprint alone, a URL
        # once forwarded to a peer that then died for good was dropped whenever it was
        # found again, where its new owner had never been sent it (found by a review).
        self._recent: OrderedDict[int, str] = OrderedDict()
        self._recent_size = recent_size
        self.stats = RouterStats()

    @property
    def placement(self) -> Placement:
        return self._placement

    def owner(self, host: str) -> str:
        return self._placement.owner(host)

    def split(
        self, urls: Iterable[NewURL], *, again: bool = False
    ) -> tuple[list[NewURL], list[NewURL]]:
        """(local, foreign): foreign URLs recently forwarded are dropped here, unless
        ``again``: URLs out of the outbox (come home by a ring change, then given back
        by another before they were admitted), which the owner may never have had: as
        recent repeats, they were dropped with their rows (a review)."""
        local: list[NewURL] = []
        foreign: list[NewURL] = []
        recent: OrderedDict[int, str] = OrderedDict() if again else self._recent
        for u in urls:
            owner = self._placement.owner(u.host)
            if owner == self.self_id:
                local.append(u)
            elif recent.get(u.fp) == owner and not u.score:
                # A URL with a score (OPIC cash) goes again: its owner adds it up.
                recent.move_to_end(u.fp)
                self.stats.recent_skips += 1
            else:
                foreign.append(u)
        return local, foreign

    def enqueue(self, urls: Iterable[NewURL], now: float) -> list[NewURL]:
        """Put foreign URLs in their owners' outboxes; returns any that are local after all."""
        local: list[NewURL] = []
        held, spilled, cap = self._held, self._spilled, self._hold_cap
        for u in urls:
            owner = self._placement.owner(u.host)
            if owner == self.self_id:
                local.append(u)
                continue
            if owner in spilled or held.get(owner, 0) >= cap or self._silent(owner):
                spilled.add(owner)
                self._marks.append(u.fp)
                self._spilled_urls += 1
                self.stats.spilled_urls += 1
                self._remember(u.fp, owner)
                continue
            held[owner] = held.get(owner, 0) + 1
            box = self._outboxes.get(owner)
            if box is None:
                box = self._outboxes[owner] = _Outbox(since=now)
            elif not box.urls:
                box.since = now
            if not box.urls:
                self._filled[owner] = box
            box.urls.append(u)
            self._remember(u.fp, owner)
        return local

    def due(self, now: float) -> list[Batch]:
        """Batches to send now: full outboxes, lingered ones, and unacknowledged resends."""
        out: list[Batch] = []
        size = self._batch_size
        for owner, box in list(self._filled.items()):
            urls = box.urls
            full = len(urls) - len(urls) % size
            for start in range(0, full, size):
                out.append(self._seal(owner, urls[start : start + size], now))
            del urls[:full]  # at once: a batch at a time moved the rest each time
            # Compared as next_deadline computes it: ``now - since >= linger`` can be
            # False at ``now == since + linger`` (rounding), and the router's loop,
            # woken at that deadline, would find nothing due and spin.
            if urls and now >= box.since + self._linger:
                out.append(self._seal(owner, urls, now))
                box.urls = []
            if not box.urls:
                del self._filled[owner]
        heap = self._resends
        while heap and heap[0][0] <= now:
            _, ticket, batch_id = heapq.heappop(heap)
            pending = self._unacked.get(batch_id)
            if pending is None or pending.ticket != ticket:
                continue  # acknowledged, re-routed or rescheduled since
            held = self._owners[pending.batch.owner]
            if held.backed_off and next(iter(held.held)) != batch_id:
                # Another batch probes the owner: this one goes when it answers.
                pending.ticket = _PARKED
                continue
            if pending.sent_at > held.answered:
                held.backed_off = True
            pending.sent_at = now
            pending.attempts += 1
            self.stats.batches_resent += 1
            out.append(pending.batch)
            if held.backed_off and len(held.held) > 1:
                # The probes take turns, on the same back-off: always the oldest, one
                # batch the owner can never take held the others back until a newer
                # one was answered, for ever with no new URLs for it (a review).
                del held.held[batch_id]
                held.held[batch_id] = pending
                pending.ticket = _PARKED
                probe = next(iter(held.held.values()))
                probe.sent_at, probe.attempts = now, pending.attempts
                self._schedule(probe)
            else:
                self._schedule(pending)
        return out

    def _seal(self, owner: str, urls: Sequence[NewURL], now: float) -> Batch:
        batch = Batch(next(self._ids), owner, tuple(urls))
        pending = self._unacked[batch.id] = _Unacked(batch, now)
        held = self._owners.get(owner)
        if held is None:
            held = self._owners[owner] = _Owner()
        held.held[batch.id] = pending
        self._schedule(pending)
        self.stats.batches_sent += 1
        self.stats.forwarded_urls += len(urls)
        return batch

    def _schedule(self, pending: _Unacked) -> None:
        pending.ticket = ticket = next(self._tickets)
        heapq.heappush(self._resends, (self._resend_at(pending), ticket, pending.batch.id))

    def _forget(self, pending: _Unacked) -> None:
        """The batch leaves: acknowledged, or its URLs routed afresh."""
        batch = pending.batch
        del self._unacked[batch.id]
        owner = self._owners[batch.owner]
        del owner.held[batch.id]
        if not owner.held:
            del self._owners[batch.owner]
        self._unhold(batch.owner, len(batch.urls))

    def _unhold(self, owner: str, n: int) -> None:
        left = self._held[owner] - n
        if left:
            self._held[owner] = left
        else:
            del self._held[owner]

    def _silent(self, owner: str) -> bool:
        held = self._owners.get(owner)
        return held is not None and held.backed_off

    def acked(self, batch_id: int) -> Batch | None:
        """The owner admitted the batch: forget it; returns it so its rows can go."""
        pending = self._unacked.get(batch_id)
        if pending is None:
            return None
        self._forget(pending)
        self.stats.batches_acked += 1
        # The owner answers again: what it was sent while it did not (and what waited
        # behind the probe) goes again now, not at the end of its back-off.
        owner = self._owners.get(pending.batch.owner)
        if owner is not None:
            owner.answered = max(owner.answered, pending.sent_at)
        if owner is not None and owner.backed_off:
            owner.backed_off = False
            for other in owner.held.values():
                other.attempts = 1
                self._schedule(other)
        return pending.batch

    def next_deadline(self) -> float | None:
        """When ``due`` next has something to give, if ever."""
        heap = self._resends
        unacked = self._unacked
        while heap:
            _, ticket, batch_id = heap[0]
            pending = unacked.get(batch_id)
            if pending is not None and pending.ticket == ticket:
                break
            heapq.heappop(heap)
        soonest = heap[0][0] if heap else None
        for box in self._filled.values():
            at = box.since + self._linger
            if soonest is None or at < soonest:
                soonest = at
        return soonest

    def _resend_at(self, pending: _Unacked) -> float:
        """When an unacknowledged batch goes again: after the retry time, doubling at
        each resend up to a minute. An owner that does not answer (its disk refuses
        writes, a cut link) would otherwise get every batch ever sent it again every
        2 s, for as long as that lasts."""
        wait = self._retry_after * 2.0 ** min(pending.attempts - 1, 16)
        return pending.sent_at + min(wait, max(_RESEND_CAP, self._retry_after))

    @property
    def linger(self) -> float:
        """How long an outbox waits for more URLs, under the current ring."""
        return self._linger

    def _scale_linger(self) -> None:
        if self._linger_cap is not None:
            others = max(1, len(self._placement.members) - 1)
            self._linger = min(self._base_linger * others, self._linger_cap)
        # An owner may hold its acknowledgement for a linger (to ride on a batch
        # coming back): resending sooner would only send the batch twice.
        self._retry_after = max(self._base_retry, 2 * self._linger)

    def ring_changed(self, placement: Placement, now: float) -> tuple[list[NewURL], list[int]]:
        """Route every waiting URL again under the new ring.

        Returns the URLs that are now this peer's own, and the ids of the
        unacknowledged batches they came from (forgotten here; the caller admits
        the URLs and drops their outbox rows). URLs kept on disk alone are the caller's
        to read back (``reloads``).
        """
        self._placement = placement
        self._scale_linger()
        waiting: list[NewURL] = []
        dropped: list[int] = []
        for to, box in self._outboxes.items():
            waiting.extend(box.urls)
            if box.urls:
                self._unhold(to, len(box.urls))
        self._outboxes = {}
        self._filled = {}
        spilled = bool(self._spilled)
        for batch_id, pending in list(self._unacked.items()):
            # A batch whose owner still owns every URL in it keeps its place.
            if all(placement.owner(u.host) == pending.batch.owner for u in pending.batch.urls):
                continue
            waiting.extend(pending.batch.urls)
            dropped.append(batch_id)
            self._forget(pending)
        # Resends timed afresh (the retry may have changed with the linger): each batch
        # that waits on its own schedule, and the oldest of each backed-off owner, which
        # probes it now that its probe may have been re-routed.
        self._resends = []
        for owner in self._owners.values():
            probe = next(iter(owner.held.values()))
            for pending in owner.held.values():
                if pending.ticket != _PARKED or pending is probe:
                    self._schedule(pending)
        self.stats.rerouted_urls += len(waiting)
        local = self.enqueue(waiting, now)
        if spilled:  # rows on disk alone may now be anyone's, this peer's too
            self._spilled = set(placement.members) | {self.self_id}
        return local, dropped

    def backlog(self) -> int:
        """URLs waiting to be sent or acknowledged (those on disk alone counted as they
        were kept there: a URL found again meanwhile counts twice, until they are back)."""
        return self.held() + self._spilled_urls

    def holds(self, batch_id: int) -> bool:
        """Whether the batch is still waiting for its owner's acknowledgement here."""
        return batch_id in self._unacked

    def held(self, owner: str | None = None) -> int:
        """URLs waiting here in memory, for ``owner`` or for all (the rest of the
        backlog is on disk alone)."""
        return sum(self._held.values()) if owner is None else self._held.get(owner, 0)

    def reloads(self) -> list[str]:
        """Owners whose URLs kept on disk alone may come back now: it answers, and holds
        at most half the cap here (this peer's own id: rows a ring change made ours)."""
        if not self._spilled:
            return []
        low = self._hold_cap // 2
        return [
            o
            for o in self._spilled
            if o == self.self_id or (not self._silent(o) and self._held.get(o, 0) <= low)
        ]

    def reload(
        self, owner: str, rows: Iterable[NewURL], now: float, skip: Collection[int] = ()
    ) -> list[NewURL]:
        """Take back ``owner``'s URLs kept on disk alone: ``rows`` are the outbox's rows
        of the hosts it owns kept there, read lazily, up to the cap; ``skip``, those not
        to take (held here already: :meth:`held_fps`; acknowledged, still on disk).
        Returns the rows taken: held here now, or, when ``owner`` is this peer's id,
        this peer's own, which the caller admits, at most a chunk a call (the owner
        stays in :meth:`reloads` while more are left). Should reading ``rows`` fail,
        the owner's URLs stay on disk, to be read again."""
        fresh = (u for u in rows if u.fp not in skip)
        self._spilled.discard(owner)
        try:
            if owner == self.self_id:
                # A chunk at a time, as the outbox is read at a start (or the cap, if
                # lower): the caller admits them at some 60 us each before the next.
                room = min(self._hold_cap, OUTBOX_CHUNK)
            else:
                room = max(self._hold_cap - self._held.get(owner, 0), 0)
            taken = list(itertools.islice(fresh, room))
            more = len(taken) == room and next(fresh, None) is not None
        except BaseException:
            self._spilled.add(owner)
            raise
        if owner != self.self_id:
            self.enqueue(taken, now)
        if more:
            self._spilled.add(owner)  # more than the cap: the rest once it has taken these
        self._spilled_urls = max(self._spilled_urls - len(taken), 0) if self._spilled else 0
        return taken

    def take_marks(self) -> list[int]:
        """The URLs kept on disk alone since the last call: the caller marks their rows
        so (the outbox's index of them is what :meth:`reload`'s rows are read from)."""
        marks, self._marks = self._marks, []
        return marks

    def held_fps(self) -> set[int]:
        """The URLs held here, in memory."""
        fps = {u.fp for box in self._outboxes.values() for u in box.urls}
        fps.update(u.fp for p in self._unacked.values() for u in p.batch.urls)
        return fps

    def _remember(self, fp: int, owner: str) -> None:
        recent = self._recent
        recent[fp] = owner
        recent.move_to_end(fp)
        if len(recent) > self._recent_size:
            recent.popitem(last=False)


def url_items(items: Iterable[WireURL], *, host: str | None = None) -> list[NewURL]:
    """URLs from another peer (a batch, a hand-off, a replica), normalised again: an
    authentic peer can still be a buggy one. URLs that do not normalise are dropped;
    with ``host``, every URL must belong to it (WireError otherwise)."""
    urls: list[NewURL] = []
    for raw, depth, score in items:
        if (new := url_item(raw, depth, score, host)) is not None:
            urls.append(new)
    return urls


def batch_items(items: Iterable[BatchURL]) -> list[NewURL]:
    """A batch's URLs as :func:`url_items` takes them, each with the redirects in a
    row that led to it."""
    urls: list[NewURL] = []
    for raw, depth, score, redirects in items:
        if (new := url_item(raw, depth, score, None)) is not None:
            urls.append(new._replace(redirects=redirects) if redirects else new)
    return urls


def url_item(raw: str, depth: int, score: float, host: str | None) -> NewURL | None:
    """A URL from another peer, normalised and fingerprinted here (an authentic peer
    can still be a buggy one); None if it does not normalise. With ``host``, it must
    belong to it (WireError otherwise)."""
    try:
        url = normalize(raw)
    except BadURL:
        return None
    key = host_key(url)
    if host is not None and key != host:
        raise WireError(f"a URL of {key} among {host}'s")
    return NewURL(fingerprint(url), url, key, depth, score)


def mark_to_wire(mark: HostMark, floor: float) -> Mark:
    """A host's politeness mark as it travels: the wait after its last request with
    the sender's --delay (``floor``) in it, as a peer of an earlier version takes a
    mark (its reader adds no --delay of its own; the shard's mark keeps only what the
    server asked, a review)."""
    return Mark(mark.last_end, max(mark.delay, floor), mark.pages)


def mark_from_wire(mark: Mark) -> HostMark:
    """A host's politeness mark from another peer (checked when it was decoded)."""
    return HostMark(mark.last_end, mark.delay, mark.pages)
