"""What travels between peers, as types: the frame kinds, an admitted :class:`Frame`,
the :class:`Rejected` bytes and why, and the reader's signals. The layout of a
frame on the wire is drawn in :mod:`ubipy.wire` (the package's docstring).
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

PROTOCOL_VERSION: Final = 1

LENGTH_PREFIX = struct.Struct(">I")
HEADER_LEN: Final = LENGTH_PREFIX.size
TAG_LEN: Final = 32
# The smallest CBOR item is one byte, so anything shorter cannot be a frame.
MIN_FRAME: Final = TAG_LEN + 1
DEFAULT_MAX_FRAME: Final = 4 * 1024 * 1024
# The cap on a connection's frames until one of them authenticates: what a stranger
# can make a peer buffer. A member with a larger first frame sends HELLO before it.
FIRST_FRAME_CAP: Final = 64 * 1024
MAX_ID_LEN: Final = 64
# How deeply lists and maps may nest inside a payload. URL batches and gossip are
# two or three levels deep; the cap keeps every walk over a payload cheap.
MAX_PAYLOAD_DEPTH: Final = 32
BODY_FIELDS: Final = 8
# CBOR integers without a bignum tag span [-2**64, 2**64 - 1]; bignums are refused.
INT_LIMIT: Final = 2**64
# epoch and seq are unsigned and, kept below 2**63, fit a signed 64-bit field in
# another implementation of the protocol.
COUNTER_LIMIT: Final = 2**63
DETAIL_MAX: Final = 200


class FrameType(enum.IntEnum):
    """What a frame carries. Gaps are left for related types added later."""

    MEMBERSHIP = 1
    URL_BATCH = 2
    URL_ACK = 3
    SEED = 4
    SEED_ACK = 5
    STATUS_REQUEST = 6
    STATUS = 7
    HANDOFF = 8
    HANDOFF_ACK = 9
    SCOPE = 10
    SCOPE_ACK = 11
    HANDOFF_DONE = 12
    REPLICA = 13
    REPLICA_ACK = 14
    ERROR = 15
    # Monitoring: a control peer asks to be pushed figures; figures; stop everything.
    CONTROL = 16
    FIGURES = 17
    STOP = 18
    # Nothing but proof of the secret, ahead of a first frame over FIRST_FRAME_CAP.
    HELLO = 19
    # The per-IP rule across peers: a lease on an address, asked of its ring owner.
    IP_LEASE = 20
    IP_GRANT = 21
    IP_RELEASE = 22
    # A new peer asks for the majority lease's base before it counts itself in one.
    BASE_ASK = 23
    BASE = 24
    # A frame for another peer, carried by a third when the two cannot reach each other.
    RELAY = 25


# A set of ints rather than FrameType(value): a hostile value should cost a lookup,
# not an exception.
TYPE_VALUES: Final = frozenset(int(t) for t in FrameType)


class RejectReason(enum.StrEnum):
    """Why bytes from a peer were not admitted as a frame."""

    # Per frame: the frame is dropped and the stream carries on.
    BAD_TAG = "bad_tag"
    BAD_VERSION = "bad_version"
    MALFORMED = "malformed"
    UNKNOWN_TYPE = "unknown_type"
    REPLAY = "replay"
    STALE = "stale"
    REFLECTED = "reflected"
    MISDIRECTED = "misdirected"
    # Fatal: the frame boundaries are lost, so the reader closes.
    TOO_LARGE = "too_large"
    BAD_LENGTH = "bad_length"
    TRUNCATED = "truncated"
    # The far end sent the refusal notice: it could not authenticate our frames.
    REFUSED = "refused"

    @property
    def fatal(self) -> bool:
        return self in _FATAL


_FATAL: Final = frozenset(
    {RejectReason.TOO_LARGE, RejectReason.BAD_LENGTH, RejectReason.TRUNCATED, RejectReason.REFUSED}
)

# What a peer sends, once, on a connection whose first frame it could not
# authenticate, before it closes it: a zero length, which no frame has. The other
# end learns at once that the secrets differ instead of waiting out its patience;
# a stranger learns only that something here speaks this protocol.
REFUSAL: Final = LENGTH_PREFIX.pack(0)

# A payload is plain data: None, bool, int (64-bit), float, str, bytes, and lists
# and str/bytes/int-keyed maps of those. Anything else (tags, sets, datetimes,
# undefined, simple values) is refused on both ends.
Payload: TypeAlias = Any


@dataclass(frozen=True, slots=True)
class Frame:
    """One authentic, fresh, never-before-seen frame."""

    type: FrameType
    sender: str
    recipient: str  # "" means any peer
    epoch: int
    seq: int
    sent_at: float
    payload: Payload


@dataclass(frozen=True, slots=True)
class Rejected:
    """Bytes that were dropped, and why."""

    reason: RejectReason
    detail: str
    # Known only once the tag has verified and the body has decoded.
    sender: str | None = None

    @property
    def fatal(self) -> bool:
        return self.reason.fatal


class Signal(enum.Enum):
    NEED_DATA = "need_data"
    CLOSED = "closed"


NEED_DATA: Final = Signal.NEED_DATA
CLOSED: Final = Signal.CLOSED

Event: TypeAlias = Frame | Rejected | Literal[Signal.NEED_DATA, Signal.CLOSED]
