"""The router: every URL goes to the peer the ring names as its host's owner.

Foreign URLs wait in a per-owner outbox and leave as one batch when it holds
``batch_size`` URLs or has lingered ``linger`` seconds. With ``linger_cap``, the
linger is per other member, up to the cap: a peer's foreign links are spread
over one outbox per other member, so each fills that many times slower, and a
fixed linger would send ever thinner batches (more frames per URL) as the
cluster grows; the price is URLs reaching their owner later. A batch stays here until
its owner acknowledges it (after admitting it durably); unacknowledged batches
are sent again after ``retry_after`` seconds, and when the ring changes every
waiting URL is routed afresh: some now belong elsewhere, some to this peer.
Admission is idempotent, so a batch delivered twice does no harm.

Pure: no I/O, no clock; the peer passes ``now`` in and sends what comes out.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ubipy.errors import WireError
from ubipy.fetch import BadURL, fingerprint, host_key, normalize
from ubipy.peer.ids import run_ids
from ubipy.ring import Placement
from ubipy.store import HostMark, NewURL
from ubipy.wire import Mark, WireURL


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


@dataclass(slots=True)
class RouterStats:
    forwarded_urls: int = 0
    batches_sent: int = 0
    batches_resent: int = 0
    batches_acked: int = 0
    rerouted_urls: int = 0
    recent_skips: int = 0


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
        self._unacked: dict[int, _Unacked] = {}
        # Owners with a batch sent again since they last acknowledged one.
        self._backed_off: set[str] = set()
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

    def split(self, urls: Iterable[NewURL]) -> tuple[list[NewURL], list[NewURL]]:
        """(local, foreign): foreign URLs recently forwarded are dropped here."""
        local: list[NewURL] = []
        foreign: list[NewURL] = []
        recent = self._recent
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
        for u in urls:
            owner = self._placement.owner(u.host)
            if owner == self.self_id:
                local.append(u)
                continue
            box = self._outboxes.get(owner)
            if box is None:
                box = self._outboxes[owner] = _Outbox(since=now)
            elif not box.urls:
                box.since = now
            box.urls.append(u)
            self._remember(u.fp, owner)
        return local

    def due(self, now: float) -> list[Batch]:
        """Batches to send now: full outboxes, lingered ones, and unacknowledged resends."""
        out: list[Batch] = []
        for owner, box in self._outboxes.items():
            while len(box.urls) >= self._batch_size:
                out.append(self._seal(owner, box.urls[: self._batch_size], now))
                del box.urls[: self._batch_size]
            # Compared as next_deadline computes it: ``now - since >= linger`` can be
            # False at ``now == since + linger`` (rounding), and the router's loop,
            # woken at that deadline, would find nothing due and spin.
            if box.urls and now >= box.since + self._linger:
                out.append(self._seal(owner, box.urls, now))
                box.urls = []
        for pending in self._unacked.values():
            if now >= self._resend_at(pending):
                pending.sent_at = now
                pending.attempts += 1
                self._backed_off.add(pending.batch.owner)
                self.stats.batches_resent += 1
                out.append(pending.batch)
        return out

    def _seal(self, owner: str, urls: Sequence[NewURL], now: float) -> Batch:
        batch = Batch(next(self._ids), owner, tuple(urls))
        self._unacked[batch.id] = _Unacked(batch, now)
        self.stats.batches_sent += 1
        self.stats.forwarded_urls += len(urls)
        return batch

    def acked(self, batch_id: int) -> Batch | None:
        """The owner admitted the batch: forget it; returns it so its rows can go."""
        pending = self._unacked.pop(batch_id, None)
        if pending is None:
            return None
        self.stats.batches_acked += 1
        # The owner answers again: what it was sent while it did not goes again now,
        # not at the end of its back-off (looked for once, not at every ack).
        owner = pending.batch.owner
        if owner in self._backed_off:
            self._backed_off.discard(owner)
            for other in self._unacked.values():
                if other.batch.owner == owner:
                    other.attempts = 1
        return pending.batch

    def next_deadline(self) -> float | None:
        """When ``due`` next has something to give, if ever."""
        times = [b.since + self._linger for b in self._outboxes.values() if b.urls]
        times += [self._resend_at(p) for p in self._unacked.values()]
        return min(times) if times else None

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
        the URLs and drops their outbox rows).
        """
        self._placement = placement
        self._scale_linger()
        waiting: list[NewURL] = []
        dropped: list[int] = []
        for box in self._outboxes.values():
            waiting.extend(box.urls)
        self._outboxes = {}
        for batch_id, pending in list(self._unacked.items()):
            # A batch whose owner still owns every URL in it keeps its place.
            if all(placement.owner(u.host) == pending.batch.owner for u in pending.batch.urls):
                continue
            waiting.extend(pending.batch.urls)
            dropped.append(batch_id)
            del self._unacked[batch_id]
        self.stats.rerouted_urls += len(waiting)
        return self.enqueue(waiting, now), dropped

    def backlog(self) -> int:
        """URLs waiting to be sent or acknowledged."""
        return sum(len(b.urls) for b in self._outboxes.values()) + sum(
            len(p.batch.urls) for p in self._unacked.values()
        )

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
        try:
            url = normalize(raw)
        except BadURL:
            continue
        key = host_key(url)
        if host is not None and key != host:
            raise WireError(f"a URL of {key} among {host}'s")
        urls.append(NewURL(fingerprint(url), url, key, depth, score))
    return urls


def mark_to_wire(mark: HostMark) -> Mark:
    """A host's politeness mark as it travels."""
    return Mark(mark.last_end, mark.delay, mark.pages)


def mark_from_wire(mark: Mark) -> HostMark:
    """A host's politeness mark from another peer (checked when it was decoded)."""
    return HostMark(mark.last_end, mark.delay, mark.pages)
