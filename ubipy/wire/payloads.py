"""What each frame kind carries, as a typed message (h11's ``_events`` style): one
frozen dataclass per :class:`~ubipy.wire.frames.FrameType`, built from the wire by a
strict ``from_wire`` that raises :class:`~ubipy.errors.WireError` and nothing else,
and turned back into plain data by ``to_wire``.

The checks here are of shape and type (a list of ``[url, depth]`` pairs, finite
times, bounded counts). What a value means to the crawler (does the URL normalise,
is the host this peer's) is the peer's to check. Membership's messages travel
inside a :class:`Gossip` frame undecoded: they are membership's to type, and the
wire knows nothing of membership.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import ClassVar, Final, TypeAlias, cast

from ubipy.errors import FrameError, WireError
from ubipy.peeraddress import check_peer_address
from ubipy.wire.frames import FrameType

# A list of URLs or fingerprints from another peer is at most this long.
MAX_ITEMS: Final = 10_000
MAX_DEPTH: Final = 1_000_000
# Pages a host mark may say a host has had: far more than any site has, and far from
# the 64-bit integers the receiver's shard stores the count in as it grows.
MAX_MARK_PAGES: Final = 10**12
# A politeness delay from another peer longer than a day is not a delay but a bug.
MAX_MARK_DELAY: Final = 86_400.0
# Figures and status rows are flat maps of at most this many fields.
MAX_FIELDS: Final = 100
# The frame kinds a membership frame may say its sender takes.
MAX_TAKES: Final = 32
# A URL's score (OPIC cash: each seed brings 1.0) is at most this: far more than a crawl
# gathers, and far enough from a float's range that sums of scores never reach
# infinity (a link's share of an infinite score made every batch carrying it refused).
MAX_SCORE: Final = 1e12
_MAX_ID = 2**63

#: ``(url, depth, score)`` as it travels: the URL not yet normalised by the receiver,
#: and what the page that linked it gives it under a ranked crawl order (OPIC cash;
#: sent as ``[url, depth]`` when 0).
WireURL: TypeAlias = tuple[str, int, float]
Scalar: TypeAlias = int | float | str | bool | None


# --------------------------------------------------------------------------- checks


def _map(obj: object, what: str) -> dict[object, object]:
    if type(obj) is not dict:
        raise WireError(f"{what} must be a map")
    return cast(dict[object, object], obj)


def _list(obj: object, what: str, limit: int | None = MAX_ITEMS) -> list[object]:
    if type(obj) is not list:
        raise WireError(f"{what} must be a list")
    items = cast(list[object], obj)
    if limit is not None and len(items) > limit:
        raise WireError(f"{what} holds {len(items)} items, more than {limit}")
    return items


def _int(obj: object, what: str, lo: int = 0, hi: int = _MAX_ID) -> int:
    if type(obj) is not int or not lo <= obj < hi:
        raise WireError(f"{what} must be an integer in [{lo}, {hi})")
    return obj


def _str(obj: object, what: str) -> str:
    if type(obj) is not str:
        raise WireError(f"{what} must be a string")
    return obj


def _peer_address(obj: object, what: str) -> str:
    """An address the receiver may dial: checked here, where a bad frame is refused,
    not where the socket layer would raise in a task the sender chose."""
    try:
        return check_peer_address(_str(obj, what))
    except ValueError as exc:
        raise WireError(f"{what}: {exc}") from None


def _finite(obj: object, what: str) -> float:
    if type(obj) not in (int, float):
        raise WireError(f"{what} must be a finite number")
    try:
        value = float(cast(float, obj))
    except OverflowError:  # an int past a float's range (math.isfinite raises it too)
        raise WireError(f"{what} must be a finite number") from None
    if not math.isfinite(value):
        raise WireError(f"{what} must be a finite number")
    return value


def _ids(obj: object, what: str) -> tuple[int, ...]:
    return tuple(_int(i, what) for i in _list(obj, what))


def _fingerprints(obj: object, what: str) -> tuple[int, ...]:
    # A URL's fingerprint is a signed 64-bit integer (SQLite's INTEGER).
    return tuple(_int(fp, what, -_MAX_ID, _MAX_ID) for fp in _list(obj, what))


def _strings(obj: object, what: str, limit: int | None = MAX_ITEMS) -> tuple[str, ...]:
    return tuple(_str(s, what) for s in _list(obj, what, limit))


def _urls(obj: object, what: str) -> tuple[WireURL, ...]:
    urls = []
    for item in _list(obj, what):
        pair = _list(item, f"a URL in {what}", 3)
        if len(pair) not in (2, 3):
            raise WireError(f"a URL in {what} is [url, depth] or [url, depth, score]")
        score = 0.0 if len(pair) == 2 else _finite(pair[2], "a URL's score")
        if not 0 <= score <= MAX_SCORE:
            raise WireError(f"a URL's score in {what} is not in [0, {MAX_SCORE:g}]")
        urls.append((_str(pair[0], "a URL"), _int(pair[1], "a depth", 0, MAX_DEPTH + 1), score))
    return tuple(urls)


def _flat(obj: object, what: str) -> dict[str, Scalar]:
    values = _map(obj, what)
    if len(values) > MAX_FIELDS:
        raise WireError(f"{what} has more than {MAX_FIELDS} fields")
    for key, value in values.items():
        if type(key) is not str or not (value is None or type(value) in (int, float, str, bool)):
            raise WireError(f"{what} is a flat map of numbers and strings")
    return cast(dict[str, Scalar], values)


def _most(items: Collection[object], what: str, limit: int = MAX_ITEMS) -> None:
    """The sender's side of a limit the receiver's from_wire applies: a mistake fails
    here, loudly, not as a frame that every receiver refuses (and its sender resends
    for ever)."""
    if len(items) > limit:
        raise FrameError(f"{what}: {len(items)} items, more than a receiver takes ({limit})")


def _urls_to_wire(urls: tuple[WireURL, ...], what: str) -> list[list[object]]:
    _most(urls, what)
    # Capped, so that no peer sends what the others refuse.
    return [
        [url, depth, min(score, MAX_SCORE)] if score else [url, depth] for url, depth, score in urls
    ]


# --------------------------------------------------------------------------- parts


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


@dataclass(frozen=True, slots=True)
class MemberRow:
    """A member as ``ubipy status`` shows it."""

    id: str
    address: str
    state: str

    def to_wire(self) -> dict[str, object]:
        return {"id": self.id, "address": self.address, "state": self.state}

    @classmethod
    def from_wire(cls, obj: object) -> MemberRow:
        row = _map(obj, "a member")
        return cls(
            _str(row.get("id"), "a member's id"),
            _peer_address(row.get("address"), "a member's address"),
            _str(row.get("state"), "a member's state"),
        )


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True, slots=True)
class Gossip:
    """MEMBERSHIP: one membership message, the sender's address to answer at, and the
    frame kinds added since the first version that the sender takes (their numbers,
    unchecked: a later version's are unknown here): a peer of an earlier version says
    none, and is sent none (it would count them as bad frames, and cut a connection
    after a few in a row)."""

    KIND: ClassVar = FrameType.MEMBERSHIP
    address: str
    message: object  # decoded by membership, which types its own messages
    takes: tuple[int, ...] = ()

    def to_wire(self) -> dict[str, object]:
        wire = {"from": self.address, "msg": self.message}
        _most(self.takes, "the frame kinds a peer takes", MAX_TAKES)
        if self.takes:
            wire["takes"] = list(self.takes)
        return wire

    @classmethod
    def from_wire(cls, obj: object) -> Gossip:
        payload = _map(obj, "a membership frame")
        takes = _list(payload.get("takes", []), "the frame kinds a peer takes", MAX_TAKES)
        return cls(
            _peer_address(payload.get("from"), "a membership sender"),
            payload.get("msg"),
            tuple(_int(kind, "a frame kind a peer takes", 0, 256) for kind in takes),
        )


@dataclass(frozen=True, slots=True)
class UrlBatch:
    """URL_BATCH: URLs for hosts the receiver owns, and acknowledgements of the
    receiver's own batches riding along."""

    KIND: ClassVar = FrameType.URL_BATCH
    id: int
    urls: tuple[WireURL, ...]
    acks: tuple[int, ...] = ()

    def to_wire(self) -> dict[str, object]:
        _most(self.acks, "acknowledged batch ids")
        urls = _urls_to_wire(self.urls, "a batch's URLs")
        return {"id": self.id, "urls": urls, "acks": list(self.acks)}

    @classmethod
    def from_wire(cls, obj: object) -> UrlBatch:
        payload = _map(obj, "a URL batch")
        return cls(
            _int(payload.get("id"), "a batch id"),
            _urls(payload.get("urls"), "a batch's URLs"),
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
class Seed:
    """SEED: URLs to start from (from ``ubipy seed``)."""

    KIND: ClassVar = FrameType.SEED
    urls: tuple[str, ...]

    def to_wire(self) -> dict[str, object]:
        return {"urls": list(self.urls)}

    @classmethod
    def from_wire(cls, obj: object) -> Seed:
        return cls(_strings(_map(obj, "a seed frame").get("urls"), "seed URLs", None))


@dataclass(frozen=True, slots=True)
class SeedAck:
    """SEED_ACK: what became of the seeds, or why none could be taken."""

    KIND: ClassVar = FrameType.SEED_ACK
    offered: int = 0
    admitted: int = 0
    forwarded: int = 0
    refused: tuple[tuple[str, str], ...] = ()
    error: str | None = None

    def to_wire(self) -> dict[str, object]:
        if self.error is not None:
            return {"error": self.error}
        return {
            "offered": self.offered,
            "admitted": self.admitted,
            "forwarded": self.forwarded,
            "refused": [list(r) for r in self.refused],
        }

    @classmethod
    def from_wire(cls, obj: object) -> SeedAck:
        payload = _map(obj, "a seed acknowledgement")
        if "error" in payload:
            return cls(error=_str(payload["error"], "a seed error"))
        refused = []
        for item in _list(payload.get("refused"), "refused seeds", None):
            pair = _strings(item, "a refused seed", 2)
            if len(pair) != 2:
                raise WireError("a refused seed is [url, reason]")
            refused.append((pair[0], pair[1]))
        return cls(
            _int(payload.get("offered"), "seeds offered"),
            _int(payload.get("admitted"), "seeds admitted"),
            _int(payload.get("forwarded"), "seeds forwarded"),
            tuple(refused),
        )


@dataclass(frozen=True, slots=True)
class StatusRequest:
    """STATUS_REQUEST: this peer's figures, and with ``cluster`` every live member's."""

    KIND: ClassVar = FrameType.STATUS_REQUEST
    cluster: bool = False

    def to_wire(self) -> dict[str, object]:
        return {"cluster": self.cluster}

    @classmethod
    def from_wire(cls, obj: object) -> StatusRequest:
        return cls(_map(obj, "a status request").get("cluster") is True)


@dataclass(frozen=True, slots=True)
class Status:
    """STATUS: the members as the answering peer sees them, and each peer's figures."""

    KIND: ClassVar = FrameType.STATUS
    members: tuple[MemberRow, ...]
    peers: tuple[Mapping[str, Scalar], ...]

    def to_wire(self) -> dict[str, object]:
        _most(self.members, "members")
        _most(self.peers, "peers")
        for figures in self.peers:
            _most(figures, "a peer's figures", MAX_FIELDS)
        return {
            "members": [m.to_wire() for m in self.members],
            "peers": [dict(p) for p in self.peers],
        }

    @classmethod
    def from_wire(cls, obj: object) -> Status:
        payload = _map(obj, "a status")
        return cls(
            tuple(MemberRow.from_wire(m) for m in _list(payload.get("members"), "members")),
            tuple(_flat(p, "a peer's figures") for p in _list(payload.get("peers"), "peers")),
        )


@dataclass(frozen=True, slots=True)
class Handoff:
    """HANDOFF: a host moving to its new owner, in chunks; the last carries its mark."""

    KIND: ClassVar = FrameType.HANDOFF
    id: int
    host: str
    pending: tuple[WireURL, ...]
    done: tuple[int, ...]
    mark: Mark | None = None

    def to_wire(self) -> dict[str, object]:
        _most(self.done, "done fingerprints")
        return {
            "id": self.id,
            "host": self.host,
            "pending": _urls_to_wire(self.pending, "a hand-off's URLs"),
            "done": list(self.done),
            "mark": None if self.mark is None else self.mark.to_wire(),
        }

    @classmethod
    def from_wire(cls, obj: object) -> Handoff:
        payload = _map(obj, "a hand-off")
        return cls(
            _int(payload.get("id"), "a hand-off id"),
            _str(payload.get("host"), "a hand-off's host"),
            _urls(payload.get("pending"), "a hand-off's URLs"),
            _fingerprints(payload.get("done"), "done fingerprints"),
            _mark(payload.get("mark")),
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

    def to_wire(self) -> dict[str, object]:
        wire: dict[str, object] = {"ring": self.ring}
        if self.token:
            wire["token"] = self.token
        if self.ask:
            wire["ask"] = True
        return wire

    @classmethod
    def from_wire(cls, obj: object) -> HandoffDone:
        payload = _map(obj, "HANDOFF_DONE")
        return cls(
            _str(payload.get("ring"), "HANDOFF_DONE's ring"),
            _int(payload.get("token", 0), "HANDOFF_DONE's token"),
            payload.get("ask") is True,
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


@dataclass(frozen=True, slots=True)
class Control:
    """CONTROL: push figures to the control centre; ``peer`` is its peer's address."""

    KIND: ClassVar = FrameType.CONTROL
    control: str
    peer: str

    def to_wire(self) -> dict[str, object]:
        return {"control": self.control, "peer": self.peer}

    @classmethod
    def from_wire(cls, obj: object) -> Control:
        payload = _map(obj, "CONTROL")
        return cls(
            _peer_address(payload.get("control"), "the control centre's address"),
            _peer_address(payload.get("peer"), "the control peer's address"),
        )


@dataclass(frozen=True, slots=True)
class Figures:
    """FIGURES: a peer's latest figures, pushed to the control peer."""

    KIND: ClassVar = FrameType.FIGURES
    values: Mapping[str, Scalar] = field(default_factory=dict)

    def to_wire(self) -> dict[str, object]:
        _most(self.values, "figures", MAX_FIELDS)
        return dict(self.values)

    @classmethod
    def from_wire(cls, obj: object) -> Figures:
        return cls(_flat(obj, "figures"))


@dataclass(frozen=True, slots=True)
class Stop:
    """STOP: stop gracefully (the whole cluster is stopping)."""

    KIND: ClassVar = FrameType.STOP

    def to_wire(self) -> dict[str, object]:
        return {}

    @classmethod
    def from_wire(cls, obj: object) -> Stop:
        _map(obj, "STOP")
        return cls()


@dataclass(frozen=True, slots=True)
class Hello:
    """HELLO: nothing but an authentic frame, sent ahead of a first frame larger than
    a stranger's connection may send (FIRST_FRAME_CAP); the receiver drops it."""

    KIND: ClassVar = FrameType.HELLO

    def to_wire(self) -> dict[str, object]:
        return {}

    @classmethod
    def from_wire(cls, obj: object) -> Hello:
        _map(obj, "HELLO")
        return cls()
