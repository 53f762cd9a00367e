"""The membership protocol's messages and their strict wire codec.

Every message turns into plain CBOR-able builtins with ``to_wire()`` (a list whose
first item is a small type code, to keep datagrams small) and back with
``message_from_wire()``. The input of the latter comes off the network: it is
authenticated by the transport, but a bug or a hostile peer must still not be able
to make the state machine hold wrong types, huge lists or absurd numbers, so it
checks everything and raises ``WireError`` (a ``ValueError``) and nothing else.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

from ubipy.errors import WireError
from ubipy.peeraddress import check_peer_address

MAX_ID_CHARS: Final = 64
# Piggybacked updates per message. The sender puts far fewer (see
# MembershipConfig.max_piggyback); the wire limit only bounds what we accept.
MAX_UPDATES: Final = 64
MAX_PUSH_PULL_MEMBERS: Final = 10_000
MAX_SEQ: Final = 2**32 - 1
MAX_INCARNATION: Final = 2**63 - 1


class MemberState(enum.IntEnum):
    """A member's state as one peer sees it. The values go on the wire."""

    ALIVE = 0
    SUSPECT = 1
    DEAD = 2
    LEFT = 3


# States that still hold a place on the ring and are probed. A suspect keeps its
# place: moving hosts away and back on every false suspicion would cost more than
# the few seconds a really dead owner keeps them.
LIVE_STATES: Final = frozenset({MemberState.ALIVE, MemberState.SUSPECT})


@dataclass(frozen=True, slots=True)
class Member:
    """One peer as seen by another: ``incarnation`` orders rumours about it."""

    id: str
    address: str
    state: MemberState
    incarnation: int

    def to_wire(self) -> list[object]:
        return [self.id, self.address, int(self.state), self.incarnation]


@dataclass(frozen=True, slots=True)
class Update:
    """A rumour about one member, piggybacked on other messages.

    ``source`` is the peer that started it: the member itself for ALIVE and LEFT,
    the accuser for SUSPECT and DEAD (distinct accusers are what shorten a
    suspicion, see Lifeguard).
    """

    member_id: str
    address: str
    state: MemberState
    incarnation: int
    source: str

    def to_wire(self) -> list[object]:
        return [self.member_id, self.address, int(self.state), self.incarnation, self.source]


@dataclass(frozen=True, slots=True)
class Ping:
    """A probe. ``target_id`` lets a peer that now sits at the address of a
    departed member refuse to answer for it."""

    seq: int
    target_id: str
    updates: tuple[Update, ...] = ()

    def to_wire(self) -> list[object]:
        return [_PING, self.seq, self.target_id, _updates_to_wire(self.updates)]


@dataclass(frozen=True, slots=True)
class Ack:
    """The answer to a Ping, or to a PingReq (forwarded by the helper)."""

    seq: int
    updates: tuple[Update, ...] = ()

    def to_wire(self) -> list[object]:
        return [_ACK, self.seq, _updates_to_wire(self.updates)]


@dataclass(frozen=True, slots=True)
class PingReq:
    """Ask the receiver to ping ``target`` for us and forward its Ack with our seq."""

    seq: int
    target_id: str
    target_address: str
    updates: tuple[Update, ...] = ()

    def to_wire(self) -> list[object]:
        return [
            _PING_REQ,
            self.seq,
            self.target_id,
            self.target_address,
            _updates_to_wire(self.updates),
        ]


@dataclass(frozen=True, slots=True)
class Gossip:
    """Updates alone, sent every gossip interval while any are waiting."""

    updates: tuple[Update, ...]

    def to_wire(self) -> list[object]:
        return [_GOSSIP, _updates_to_wire(self.updates)]


@dataclass(frozen=True, slots=True)
class PushPull:
    """The sender's whole member table (tombstones included); a request is
    answered with the receiver's table (``is_reply``) over the same stream."""

    members: tuple[Member, ...]
    is_reply: bool

    def to_wire(self) -> list[object]:
        return [_PUSH_PULL, [m.to_wire() for m in self.members], self.is_reply]


@dataclass(frozen=True, slots=True)
class Leave:
    """Sent directly to every member by a peer that leaves on purpose."""

    member_id: str
    address: str
    incarnation: int

    def to_wire(self) -> list[object]:
        return [_LEAVE, self.member_id, self.address, self.incarnation]


Message = Ping | Ack | PingReq | Gossip | PushPull | Leave

_PING: Final = 1
_ACK: Final = 2
_PING_REQ: Final = 3
_GOSSIP: Final = 4
_PUSH_PULL: Final = 5
_LEAVE: Final = 6


def _updates_to_wire(updates: tuple[Update, ...]) -> list[object]:
    return [u.to_wire() for u in updates]


def message_from_wire(obj: object) -> Message:
    """The message ``obj`` encodes; ``WireError`` if it is malformed in any way."""
    items = _list(obj, "message", 1, 5)
    code = _int(items[0], "type", 0, 255)
    if code == _PING:
        _arity(items, 4)
        return Ping(
            _int(items[1], "seq", 0, MAX_SEQ),
            _member_id(items[2]),
            _updates(items[3]),
        )
    if code == _ACK:
        _arity(items, 3)
        return Ack(_int(items[1], "seq", 0, MAX_SEQ), _updates(items[2]))
    if code == _PING_REQ:
        _arity(items, 5)
        return PingReq(
            _int(items[1], "seq", 0, MAX_SEQ),
            _member_id(items[2]),
            _address(items[3]),
            _updates(items[4]),
        )
    if code == _GOSSIP:
        _arity(items, 2)
        return Gossip(_updates(items[1]))
    if code == _PUSH_PULL:
        _arity(items, 3)
        raw = _list(items[1], "members", 0, MAX_PUSH_PULL_MEMBERS)
        members = tuple(_member(m) for m in raw)
        if len({m.id for m in members}) != len(members):
            raise WireError("push-pull lists a member twice")
        if not isinstance(items[2], bool):
            raise WireError("is_reply must be a bool")
        return PushPull(members, items[2])
    if code == _LEAVE:
        _arity(items, 4)
        return Leave(
            _member_id(items[1]),
            _address(items[2]),
            _int(items[3], "incarnation", 0, MAX_INCARNATION),
        )
    raise WireError(f"unknown message type {code}")


def _arity(items: list[object], n: int) -> None:
    if len(items) != n:
        raise WireError(f"expected {n} items, got {len(items)}")


def _list(obj: object, what: str, lo: int, hi: int) -> list[object]:
    # Only lists: CBOR arrays decode to lists, and a tuple here would mean a caller
    # skipped the wire.
    if not isinstance(obj, list):
        raise WireError(f"{what} must be a list")
    if not lo <= len(obj) <= hi:
        raise WireError(f"{what} has {len(obj)} items, not {lo}..{hi}")
    return obj


def _int(obj: object, what: str, lo: int, hi: int) -> int:
    # bool is an int subclass; True must not pass as seq 1.
    if type(obj) is not int:
        raise WireError(f"{what} must be an int")
    if not lo <= obj <= hi:
        # Not str(obj) for any int: past 4300 digits that raises ValueError.
        shown = obj if obj.bit_length() <= 64 else f"of {obj.bit_length()} bits"
        raise WireError(f"{what} {shown} out of range")
    return obj


def _member_id(obj: object) -> str:
    if type(obj) is not str:
        raise WireError("member id must be a str")
    if not 1 <= len(obj) <= MAX_ID_CHARS or not obj.isprintable():
        raise WireError("member id must be 1..64 printable chars")
    return obj


def _address(obj: object) -> str:
    """``host:port`` (the host may be a bracketed IPv6 literal); the port is checked
    because the driver will hand it to the socket layer."""
    if type(obj) is not str:
        raise WireError("address must be a str")
    try:
        return check_peer_address(obj)
    except ValueError as exc:
        raise WireError(str(exc)) from None


def _state(obj: object) -> MemberState:
    return MemberState(_int(obj, "state", 0, len(MemberState) - 1))


def _update(obj: object) -> Update:
    items = _list(obj, "update", 5, 5)
    return Update(
        _member_id(items[0]),
        _address(items[1]),
        _state(items[2]),
        _int(items[3], "incarnation", 0, MAX_INCARNATION),
        _member_id(items[4]),
    )


def _updates(obj: object) -> tuple[Update, ...]:
    return tuple(_update(u) for u in _list(obj, "updates", 0, MAX_UPDATES))


def _member(obj: object) -> Member:
    items = _list(obj, "member", 4, 4)
    return Member(
        _member_id(items[0]),
        _address(items[1]),
        _state(items[2]),
        _int(items[3], "incarnation", 0, MAX_INCARNATION),
    )
