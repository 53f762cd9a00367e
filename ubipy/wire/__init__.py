"""The wire between peers: authenticated, length-prefixed CBOR frames.

This package is a codec in the style of h11: it does no I/O and knows nothing of
trio. A :class:`FrameWriter` turns ``(type, payload)`` into bytes to send; a
:class:`FrameReader` is fed whatever bytes arrive and hands back events
(:class:`Frame`, :class:`Rejected`, :data:`NEED_DATA`, :data:`CLOSED`). A
:class:`ReplayGuard`, shared by all the connections of a peer,
decides whether an authentic frame is fresh and new. What each kind of frame
carries is a typed message (:mod:`ubipy.wire.payloads`, those carrying URLs
:mod:`ubipy.wire.urlframes`): :func:`decode` builds it
from an admitted frame's payload, raising :class:`WireError` if it is malformed.

Layout of one frame on the wire::

    +----------------+----------------------+------------------------------+
    | N: u32, BE     | tag: 32 bytes        | body: N - 32 bytes of CBOR   |
    +----------------+----------------------+------------------------------+
    tag  = HMAC-SHA256(key, body)
    body = [version, type, sender, recipient, epoch, seq, sent_at, payload]

``33 <= N <= max_frame``, and ``N <= FIRST_FRAME_CAP`` (64 KiB) for a connection's
frames until one authenticates (a peer whose first frame is larger sends a HELLO
before it); ``N = 0`` alone (:data:`REFUSAL`) is the refusal notice a
peer sends before closing a connection whose first frame it could not authenticate.
The tag is checked before the body is decoded, so bytes from anyone without the
cluster key never reach the CBOR decoder. Every time is
wall-clock seconds (``time.time()``), never trio's monotonic clock: ``sent_at`` is
compared with the receiver's clock.
"""

from ubipy.errors import FrameError, WireError
from ubipy.wire.batches import BATCH_BYTES, BATCH_ITEMS, batches
from ubipy.wire.codec import FrameWriter
from ubipy.wire.frames import (
    CLOSED,
    DEFAULT_MAX_FRAME,
    FIRST_FRAME_CAP,
    MAX_ID_LEN,
    MAX_PAYLOAD_DEPTH,
    NEED_DATA,
    PROTOCOL_VERSION,
    REFUSAL,
    Event,
    Frame,
    FrameType,
    Payload,
    Rejected,
    RejectReason,
    Signal,
)
from ubipy.wire.leases import MAX_LEASE_WAIT, IpGrant, IpLease, IpRelease
from ubipy.wire.majority import MAX_BASE, BaseAnswer, BaseAsk
from ubipy.wire.payloads import (
    MAX_ITEMS,
    MAX_MARK_DELAY,
    Control,
    Figures,
    Gossip,
    Hello,
    MemberRow,
    Scalar,
    Seed,
    SeedAck,
    Status,
    StatusRequest,
    Stop,
)
from ubipy.wire.reader import HTTP_ANSWER, FrameReader, ReaderState
from ubipy.wire.registry import MESSAGE_TYPES, Message, decode
from ubipy.wire.relay import MAX_RELAYED, Relay
from ubipy.wire.replay import DEFAULT_MAX_SKEW, ReplayGuard
from ubipy.wire.scopes import Scope, ScopeAck
from ubipy.wire.secret import (
    LOOPBACK_SECRET,
    is_default_secret,
    new_epoch,
    secret_doubt,
    secret_from,
)
from ubipy.wire.urlframes import (
    MAX_LEAVES_TOLD,
    MAX_REDIRECTS_CARRIED,
    MAX_REVISIT_URL,
    MAX_VALIDATOR,
    MAX_WALL,
    BatchURL,
    Handoff,
    HandoffAck,
    HandoffDone,
    HostCopy,
    Mark,
    Replica,
    ReplicaAck,
    Revisit,
    UrlAck,
    UrlBatch,
    WireURL,
)

__all__ = [
    "BATCH_BYTES",
    "BATCH_ITEMS",
    "CLOSED",
    "DEFAULT_MAX_FRAME",
    "DEFAULT_MAX_SKEW",
    "FIRST_FRAME_CAP",
    "HTTP_ANSWER",
    "LOOPBACK_SECRET",
    "MAX_BASE",
    "MAX_ID_LEN",
    "MAX_ITEMS",
    "MAX_LEASE_WAIT",
    "MAX_LEAVES_TOLD",
    "MAX_MARK_DELAY",
    "MAX_PAYLOAD_DEPTH",
    "MAX_REDIRECTS_CARRIED",
    "MAX_RELAYED",
    "MAX_REVISIT_URL",
    "MAX_VALIDATOR",
    "MAX_WALL",
    "MESSAGE_TYPES",
    "NEED_DATA",
    "PROTOCOL_VERSION",
    "REFUSAL",
    "BaseAnswer",
    "BaseAsk",
    "BatchURL",
    "Control",
    "Event",
    "Figures",
    "Frame",
    "FrameError",
    "FrameReader",
    "FrameType",
    "FrameWriter",
    "Gossip",
    "Handoff",
    "HandoffAck",
    "HandoffDone",
    "Hello",
    "HostCopy",
    "IpGrant",
    "IpLease",
    "IpRelease",
    "Mark",
    "MemberRow",
    "Message",
    "Payload",
    "ReaderState",
    "RejectReason",
    "Rejected",
    "Relay",
    "ReplayGuard",
    "Replica",
    "ReplicaAck",
    "Revisit",
    "Scalar",
    "Scope",
    "ScopeAck",
    "Seed",
    "SeedAck",
    "Signal",
    "Status",
    "StatusRequest",
    "Stop",
    "UrlAck",
    "UrlBatch",
    "WireError",
    "WireURL",
    "batches",
    "decode",
    "is_default_secret",
    "new_epoch",
    "secret_doubt",
    "secret_from",
]
