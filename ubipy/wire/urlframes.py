"""The frames that carry URLs to their hosts' owners: a batch of URLs found for hosts
another peer owns (URL_BATCH, acknowledged by URL_ACK), a host handed to its new owner
(HANDOFF, HANDOFF_ACK, HANDOFF_DONE), and copies of an owner's hosts for the next peer
clockwise (REPLICA, REPLICA_ACK); and the entries they share, a URL as it travels and
a host's politeness :class:`Mark`, and what a continuous crawl knows of a page it
refreshes (:class:`Revisit`), which goes with its host to a new owner.

Checked here: shape and types, as in :mod:`ubipy.wire.payloads`.
"""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass
from typing import ClassVar, Final, TypeAlias

from ubipy.errors import WireError
from ubipy.wire.frames import MAX_ID_LEN, FrameType
from ubipy.wire.payloads import (
    MAX_DEPTH,
    MAX_MARK_DELAY,
    MAX_MARK_PAGES,
    MAX_SCORE,
    _fingerprints,
    _finite,
    _ids,
    _int,
    _list,
    _map,
    _most,
    _str,
)

#: ``(url, depth, score)`` as it travels: the URL not yet normalised by the receiver,
#: and what the page that linked it gives it under a ranked crawl order (OPIC cash;
#: sent as ``[url, depth]`` when 0).
WireURL: TypeAlias = tuple[str, int, float]
#: ``(url, depth, score, redirects)`` as a URL_BATCH carries it: a :data:`WireURL` and how
#: many redirects in a row led to it (0: a link, a seed, a sitemap's entry), so that a
#: chain of redirects across hosts other peers own is counted on, not afresh, by each
#: (a redirect is no link hop: --max-depth does not bound a chain).
BatchURL: TypeAlias = tuple[str, int, float, int]

# The redirects in a row a batch may say led to a URL: more than a peer follows (the
# peer's MAX_REDIRECTS, 20), so that a later version may follow more.
MAX_REDIRECTS_CARRIED: Final = 100
# A page's URL in a :class:`Revisit` is at most this long (a peer keeps none longer
# than 2,048 characters: room for a later version's), its validators and digest at most
# this: what a server's ETag or Last-Modified says, or a digest's hex, is far shorter;
# a peer holding a longer one sends none (the page is asked once without it).
MAX_REVISIT_URL: Final = 8_192
MAX_VALIDATOR: Final = 1_024
# Visits (and lastmod checks) a page's history may count: as many as a host mark's
# pages, far from the 64-bit integers the receiver's shard stores them in as they grow.
MAX_VISITS: Final = MAX_MARK_PAGES
# A wall-clock time a page's history gives is at most this (the year 5138), and so is
# the time it covers: a bigger one is a bug, and two of them subtracted overflowed.
MAX_WALL: Final = 1e11
# The leaves a HANDOFF_DONE tells of (the sender's latest).
MAX_LEAVES_TOLD: Final = 64
# The items a revisit entry has at least (a peer before the failure counts sends no
# more), and those this version reads; a later version may add more after them, which
# this one ignores (refused, a whole hand-off would be, again and again).
_REVISIT_FIELDS: Final = 13
_REVISIT_READ: Final = 15
_REVISIT_MOST: Final = 64


# --------------------------------------------------------------------------- entries


def _url(item: object, what: str) -> WireURL:
    pair = _list(item, f"a URL in {what}", 3)
    if len(pair) not in (2, 3):
        raise WireError(f"a URL in {what} is [url, depth] or [url, depth, score]")
    score = 0.0 if len(pair) == 2 else _finite(pair[2], "a URL's score")
    if not 0 <= score <= MAX_SCORE:
        raise WireError(f"a URL's score in {what} is not in [0, {MAX_SCORE:g}]")
    return (_str(pair[0], "a URL"), _int(pair[1], "a depth", 0, MAX_DEPTH + 1), score)


def _urls(obj: object, what: str) -> tuple[WireURL, ...]:
    return tuple([_url(item, what) for item in _list(obj, what)])


def _urls_to_wire(urls: tuple[WireURL, ...], what: str) -> list[list[object]]:
    _most(urls, what)
    # Capped, so that no peer sends what the others refuse.
    return [
        [url, depth, min(score, MAX_SCORE)] if score else [url, depth] for url, depth, score in urls
    ]


def _batch_urls(obj: object, redirects: object) -> tuple[BatchURL, ...]:
    """A batch's ``urls`` and the ``[index, count]`` pairs of its ``redirects``: how
    many redirects in a row led to the URL at that index (none named: 0)."""
    items = _list(obj, "a batch's URLs")
    led: dict[int, int] = {}
    for entry in _list(redirects, "a batch's redirects"):
        pair = _list(entry, "a URL's redirects", 2)
        if len(pair) != 2:
            raise WireError("a URL's redirects are [index, count]")
        index = _int(pair[0], "the index of a URL with redirects", 0, len(items))
        if index in led:
            raise WireError(f"the redirects of the URL at {index} are given twice")
        led[index] = _int(pair[1], "a URL's redirects", 0, MAX_REDIRECTS_CARRIED + 1)
    if not led:
        return tuple([(*_url(item, "a batch's URLs"), 0) for item in items])
    return tuple([(*_url(item, "a batch's URLs"), led.get(i, 0)) for i, item in enumerate(items)])


def _batch_to_wire(urls: tuple[BatchURL, ...]) -> tuple[list[list[object]], list[list[int]]]:
    """A batch's ``urls`` and ``redirects`` (see :func:`_batch_urls`), both capped as
    a receiver takes them."""
    _most(urls, "a batch's URLs")
    entries: list[list[object]] = []
    redirects: list[list[int]] = []
    for url, depth, score, led in urls:
        entries.append([url, depth, min(score, MAX_SCORE)] if score else [url, depth])
        if led:
            redirects.append([len(entries) - 1, min(led, MAX_REDIRECTS_CARRIED)])
    return entries, redirects


@dataclass(frozen=True, slots=True)
class Mark:
    """A host's politeness as it moves between peers: when its last request ended
    (wall clock), its delay and its pages so far. Checked: a time that is not finite
    would hold the host for ever."""

    last_end: float
    delay: float
    pages: int

    def __post_init__(self) -> None:
        if not (math.isfinite(self.last_end) and math.isfinite(self.delay)):
            raise WireError("a host mark's times are finite numbers")
        if not 0 <= self.delay <= MAX_MARK_DELAY:
            raise WireError("a host mark's delay is between 0 and a day")
        if not 0 <= self.pages <= MAX_MARK_PAGES:
            raise WireError(f"a host mark's pages are a count up to {MAX_MARK_PAGES}")

    def to_wire(self) -> list[object]:
        return [self.last_end, self.delay, self.pages]

    @classmethod
    def from_wire(cls, obj: object) -> Mark:
        items = _list(obj, "a host mark", 3)
        if len(items) != 3:
            raise WireError("a host mark is [last_end, delay, pages]")
        return cls(
            _finite(items[0], "a mark's last end"),
            _finite(items[1], "a mark's delay"),
            _int(items[2], "a mark's pages", 0, MAX_MARK_PAGES + 1),
        )


def _mark(obj: object) -> Mark | None:
    return None if obj is None else Mark.from_wire(obj)


# A host's first lookup as a seed allowed at most this many addresses (a name has few).
MAX_SEED_ADDRESSES: Final = 64


def _seed_lookup(obj: object) -> tuple[str, ...] | None:
    """None (the host was not looked up as a seed's), or the addresses its first lookup
    allowed: each an IP address, written as Python writes it."""
    if obj is None:
        return None
    items = _list(obj, "a seed lookup")
    if len(items) > MAX_SEED_ADDRESSES:
        raise WireError(f"a seed lookup of more than {MAX_SEED_ADDRESSES} addresses")
    addresses = []
    for item in items:
        text = _str(item, "a seed lookup's address")
        try:
            address = str(ipaddress.ip_address(text))
        except ValueError:
            raise WireError(f"a seed lookup's address is no IP address: {text[:64]!r}") from None
        if address != text:
            raise WireError(f"a seed lookup's address not written as {address}")
        addresses.append(address)
    return tuple(addresses)


def _text(obj: object, what: str, most: int) -> str | None:
    """None, or a string of at most ``most`` characters."""
    if obj is None:
        return None
    if type(obj) is not str or len(obj) > most:
        raise WireError(f"{what} must be a string of at most {most} characters, or null")
    return obj


@dataclass(frozen=True, slots=True)
class Revisit:
    """A page a continuous crawl refreshes, as its host's HANDOFF carries it to a new
    owner: its URL (the receiver normalises it and takes its fingerprint, as for any
    URL from a peer), its depth, its history (visits, the visits after the first that
    found it changed, the seconds from its first visit to its last, the last visit),
    when it is due again (wall clock: the sender's), its importance, the validators and
    digest of the copy kept, its host's sitemap lastmods its visits checked and how
    many agreed, and its failed answers in a row and the 404s among them (two items a
    peer before them leaves out: 0 then, and one of them ignores them). Checked:
    counts and times a plan would divide by, add up or wait for are finite and bounded,
    strings bounded."""

    url: str
    depth: int
    visits: int
    changes: int
    observed: float
    last_visit: float
    due: float
    importance: float = 0.0
    etag: str | None = None
    last_modified: str | None = None
    digest: str | None = None
    checks: int = 0
    agreed: int = 0
    failures: int = 0
    missing: int = 0

    def __post_init__(self) -> None:
        if not 0 < len(self.url) <= MAX_REVISIT_URL:
            raise WireError(f"a revisit's URL is 1 to {MAX_REVISIT_URL} characters")
        if not 0 <= self.depth <= MAX_DEPTH:
            raise WireError(f"a revisit's depth is in [0, {MAX_DEPTH}]")
        if not (0 <= self.visits <= MAX_VISITS and 0 <= self.changes <= self.visits):
            raise WireError(
                "a revisit's visits and changes are counts, its changes at most its visits"
            )
        if not 0 <= self.agreed <= self.checks <= MAX_VISITS:
            raise WireError("a revisit's lastmod checks are a count, its agreed ones at most them")
        if not 0 <= self.missing <= self.failures <= MAX_VISITS:
            raise WireError("a revisit's failures are a count, its 404s among them at most them")
        times = (self.observed, self.last_visit, self.due)
        if not all(math.isfinite(t) and 0 <= t <= MAX_WALL for t in times):
            raise WireError(f"a revisit's times are finite numbers in [0, {MAX_WALL:g}]")
        if not (math.isfinite(self.importance) and 0 <= self.importance <= MAX_SCORE):
            raise WireError(f"a revisit's importance is in [0, {MAX_SCORE:g}]")
        for text in (self.etag, self.last_modified, self.digest):
            if text is not None and len(text) > MAX_VALIDATOR:
                raise WireError(f"a revisit's validators are at most {MAX_VALIDATOR} characters")

    def to_wire(self) -> list[object]:
        return [
            self.url,
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
        ]

    @classmethod
    def from_wire(cls, obj: object) -> Revisit:
        items = _list(obj, "a revisit", _REVISIT_MOST)
        if len(items) < _REVISIT_FIELDS:
            raise WireError(
                "a revisit is [url, depth, visits, changes, observed, last_visit, due, "
                "importance, etag, last_modified, digest, checks, agreed, failures?, missing?]"
            )
        url = items[0]
        if type(url) is not str or not 0 < len(url) <= MAX_REVISIT_URL:
            raise WireError(
                f"a revisit's URL must be a string of 1 to {MAX_REVISIT_URL} characters"
            )
        return cls(
            url,
            _int(items[1], "a revisit's depth", 0, MAX_DEPTH + 1),
            _int(items[2], "a revisit's visits", 0, MAX_VISITS + 1),
            _int(items[3], "a revisit's changes", 0, MAX_VISITS + 1),
            _finite(items[4], "a revisit's observed seconds"),
            _finite(items[5], "a revisit's last visit"),
            _finite(items[6], "a revisit's due time"),
            _finite(items[7], "a revisit's importance"),
            _text(items[8], "a revisit's ETag", MAX_VALIDATOR),
            _text(items[9], "a revisit's Last-Modified", MAX_VALIDATOR),
            _text(items[10], "a revisit's digest", MAX_VALIDATOR),
            _int(items[11], "a revisit's lastmod checks", 0, MAX_VISITS + 1),
            _int(items[12], "a revisit's lastmod checks agreed", 0, MAX_VISITS + 1),
            *(
                _int(item, "a revisit's failures", 0, MAX_VISITS + 1)
                for item in items[_REVISIT_FIELDS:_REVISIT_READ]
            ),
        )


@dataclass(frozen=True, slots=True)
class HostCopy:
    """One host's share of a replica: its pending URLs, the fingerprints of its done
    pages and, when known, its politeness mark."""

    host: str
    pending: tuple[WireURL, ...]
    done: tuple[int, ...]
    mark: Mark | None = None

    def to_wire(self) -> list[object]:
        _most(self.done, "a replica's done fingerprints")
        pending = _urls_to_wire(self.pending, "a replica's URLs")
        entry: list[object] = [self.host, pending, list(self.done)]
        if self.mark is not None:
            entry.append(self.mark.to_wire())
        return entry

    @classmethod
    def from_wire(cls, obj: object) -> HostCopy:
        entry = _list(obj, "a replica entry", 4)
        if len(entry) not in (3, 4):
            raise WireError("a replica entry is [host, [[url, depth], ...], [fp, ...]] and a mark")
        mark = Mark.from_wire(entry[3]) if len(entry) == 4 else None
        return cls(
            _str(entry[0], "a replica's host"),
            _urls(entry[1], "a replica's URLs"),
            _fingerprints(entry[2], "a replica's done fingerprints"),
            mark,
        )


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True, slots=True)
class UrlBatch:
    """URL_BATCH: URLs for hosts the receiver owns, and acknowledgements of the
    receiver's own batches riding along."""

    KIND: ClassVar = FrameType.URL_BATCH
    id: int
    urls: tuple[BatchURL, ...]
    acks: tuple[int, ...] = ()

    def to_wire(self) -> dict[str, object]:
        _most(self.acks, "acknowledged batch ids")
        urls, redirects = _batch_to_wire(self.urls)
        wire: dict[str, object] = {"id": self.id, "urls": urls, "acks": list(self.acks)}
        # Sent only when any URL came by a redirect: a link costs no byte, and a peer
        # of an earlier version ignores a field it does not know (an entry of four
        # items it would refuse, and the batch with it, for ever).
        if redirects:
            wire["redirects"] = redirects
        return wire

    @classmethod
    def from_wire(cls, obj: object) -> UrlBatch:
        payload = _map(obj, "a URL batch")
        return cls(
            _int(payload.get("id"), "a batch id"),
            _batch_urls(payload.get("urls"), payload.get("redirects", [])),
            _ids(payload.get("acks", []), "acknowledged batch ids"),
        )


@dataclass(frozen=True, slots=True)
class UrlAck:
    """URL_ACK: batches durably admitted, when no batch going back carried them."""

    KIND: ClassVar = FrameType.URL_ACK
    ids: tuple[int, ...]

    def to_wire(self) -> dict[str, object]:
        _most(self.ids, "acknowledged batch ids")
        return {"ids": list(self.ids)}

    @classmethod
    def from_wire(cls, obj: object) -> UrlAck:
        return cls(_ids(_map(obj, "a URL acknowledgement").get("ids"), "acknowledged batch ids"))


@dataclass(frozen=True, slots=True)
class Handoff:
    """HANDOFF: a host moving to its new owner, in chunks; the last carries its mark.
    Under ``--recrawl`` the chunks also carry the revisit state of the host's pages
    (``revisits``), so that its new owner goes on refreshing them."""

    KIND: ClassVar = FrameType.HANDOFF
    id: int
    host: str
    pending: tuple[WireURL, ...]
    done: tuple[int, ...]
    mark: Mark | None = None
    revisits: tuple[Revisit, ...] = ()
    # The addresses the host's first lookup as a seed's allowed (None: not a seed's, or
    # not looked up yet): looked up afresh by its new owner, a seeded name of public
    # address rebound to 127.0.0.1 meanwhile was allowed there (a review).
    seed_lookup: tuple[str, ...] | None = None

    def to_wire(self) -> dict[str, object]:
        _most(self.done, "done fingerprints")
        wire: dict[str, object] = {
            "id": self.id,
            "host": self.host,
            "pending": _urls_to_wire(self.pending, "a hand-off's URLs"),
            "done": list(self.done),
            "mark": None if self.mark is None else self.mark.to_wire(),
        }
        # Sent only when there are any: a peer of an earlier version ignores a field it
        # does not know, and takes the host as it did (its pages refreshed by nobody).
        if self.revisits:
            _most(self.revisits, "a hand-off's revisits")
            wire["revisits"] = [r.to_wire() for r in self.revisits]
        if self.seed_lookup is not None:  # likewise
            wire["seed_lookup"] = list(self.seed_lookup)
        return wire

    @classmethod
    def from_wire(cls, obj: object) -> Handoff:
        payload = _map(obj, "a hand-off")
        revisits = _list(payload.get("revisits", []), "a hand-off's revisits")
        return cls(
            _int(payload.get("id"), "a hand-off id"),
            _str(payload.get("host"), "a hand-off's host"),
            _urls(payload.get("pending"), "a hand-off's URLs"),
            _fingerprints(payload.get("done"), "done fingerprints"),
            _mark(payload.get("mark")),
            tuple([Revisit.from_wire(r) for r in revisits]),
            _seed_lookup(payload.get("seed_lookup")),
        )


@dataclass(frozen=True, slots=True)
class HandoffAck:
    """HANDOFF_ACK: the host is taken (durably), or refused (not ours, or leaving)."""

    KIND: ClassVar = FrameType.HANDOFF_ACK
    id: int
    refused: bool = False

    def to_wire(self) -> dict[str, object]:
        return {"id": self.id, "refused": True} if self.refused else {"id": self.id}

    @classmethod
    def from_wire(cls, obj: object) -> HandoffAck:
        payload = _map(obj, "a hand-off acknowledgement")
        return cls(_int(payload.get("id"), "a hand-off id"), payload.get("refused") is True)


@dataclass(frozen=True, slots=True)
class HandoffDone:
    """HANDOFF_DONE: the sender has handed over everything it held under this ring.

    With ``ask``, a request instead: sweep, then say so with this ``token``. Every
    DONE the sender sends the asker afterwards carries its latest ``token``, so the
    asker knows the sweep came after its request (a DONE held up by a partition
    may arrive long after it was true)."""

    KIND: ClassVar = FrameType.HANDOFF_DONE
    ring: str
    token: int = 0
    ask: bool = False
    # The peers that left whose leave's sweep the sender saw done (their own DONE,
    # under a ring without them), with that ring: they hold nothing any more. Told on,
    # so a peer that started after a leave does not wait for the one that left.
    left: tuple[tuple[str, str], ...] = ()

    def to_wire(self) -> dict[str, object]:
        wire: dict[str, object] = {"ring": self.ring}
        if self.token:
            wire["token"] = self.token
        if self.ask:
            wire["ask"] = True
        if self.left:
            _most(self.left, "HANDOFF_DONE's leaves", MAX_LEAVES_TOLD)
            wire["left"] = dict(self.left)
        return wire

    @classmethod
    def from_wire(cls, obj: object) -> HandoffDone:
        payload = _map(obj, "HANDOFF_DONE")
        left = _map(payload.get("left", {}), "HANDOFF_DONE's leaves")
        if len(left) > MAX_LEAVES_TOLD:
            raise WireError(f"HANDOFF_DONE tells of more than {MAX_LEAVES_TOLD} leaves")
        if any(type(p) is not str or not 0 < len(p) <= MAX_ID_LEN for p in left):
            raise WireError(f"a leave's peer id is 1 to {MAX_ID_LEN} characters")
        return cls(
            _str(payload.get("ring"), "HANDOFF_DONE's ring"),
            _int(payload.get("token", 0), "HANDOFF_DONE's token"),
            payload.get("ask") is True,
            tuple(
                (_str(peer, "a leave's peer"), _str(ring, "a leave's ring"))
                for peer, ring in left.items()
            ),
        )


@dataclass(frozen=True, slots=True)
class Replica:
    """REPLICA: copies of what the owner committed, for the next peer clockwise."""

    KIND: ClassVar = FrameType.REPLICA
    hosts: tuple[HostCopy, ...]
    # Answered with a REPLICA_ACK of this number once stored (0: no answer wanted).
    seq: int = 0

    def to_wire(self) -> dict[str, object]:
        _most(self.hosts, "replica hosts")
        return {"hosts": [h.to_wire() for h in self.hosts], "seq": self.seq}

    @classmethod
    def from_wire(cls, obj: object) -> Replica:
        payload = _map(obj, "a replica")
        hosts = _list(payload.get("hosts"), "replica hosts")
        seq = payload.get("seq", 0)
        return cls(tuple(HostCopy.from_wire(h) for h in hosts), _int(seq, "a replica's seq"))


@dataclass(frozen=True, slots=True)
class ReplicaAck:
    """REPLICA_ACK: the copies of REPLICA ``seq`` are stored by the successor."""

    KIND: ClassVar = FrameType.REPLICA_ACK
    seq: int

    def to_wire(self) -> dict[str, object]:
        return {"seq": self.seq}

    @classmethod
    def from_wire(cls, obj: object) -> ReplicaAck:
        return cls(_int(_map(obj, "a replica ack").get("seq"), "a replica ack's seq"))
