"""What each frame kind carries, as a typed message (h11's ``_events`` style): one
frozen dataclass per :class:`~ubipy.wire.frames.FrameType`, built from the wire by a
strict ``from_wire`` that raises :class:`~ubipy.errors.WireError` and nothing else,
and turned back into plain data by ``to_wire``.

The checks here are of shape and type (finite times, bounded counts, lists of
strings); the frames that carry URLs are in :mod:`ubipy.wire.urlframes`, and check
theirs with these. What a value means to the crawler (does the URL normalise, is the
host this peer's) is the peer's to check. Membership's messages travel
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


# --------------------------------------------------------------------------- parts


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
