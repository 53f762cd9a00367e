"""The wire between peers: authenticated, length-prefixed CBOR frames.

This module is a codec in the style of h11: it does no I/O and knows nothing of
trio. A :class:`FrameWriter` turns ``(type, payload)`` into bytes to send; a
:class:`FrameReader` is fed whatever bytes arrive and hands back events
(:class:`Frame`, :class:`Rejected`, :data:`NEED_DATA`, :data:`CLOSED`). A
:class:`~ubipy.peer.replay.ReplayGuard`, shared by all the connections of a peer,
decides whether an authentic frame is fresh and new.

Layout of one frame on the wire::

    +----------------+----------------------+------------------------------+
    | N: u32, BE     | tag: 32 bytes        | body: N - 32 bytes of CBOR   |
    +----------------+----------------------+------------------------------+
    tag  = HMAC-SHA256(key, body)
    body = [version, type, sender, recipient, epoch, seq, sent_at, payload]

``33 <= N <= max_frame``. The tag is checked before the body is decoded, so bytes
from anyone without the cluster key never reach the CBOR decoder. Every time is
wall-clock seconds (``time.time()``), never trio's monotonic clock: ``sent_at`` is
compared with the receiver's clock.
"""

from __future__ import annotations

import enum
import hmac
import io
import math
import secrets
import struct
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast

import cbor2

if TYPE_CHECKING:
    from ubipy.peer.replay import ReplayGuard

__all__ = [
    "CLOSED",
    "DEFAULT_MAX_FRAME",
    "LOOPBACK_SECRET",
    "MAX_ID_LEN",
    "MAX_PAYLOAD_DEPTH",
    "NEED_DATA",
    "PROTOCOL_VERSION",
    "Event",
    "Frame",
    "FrameError",
    "FrameReader",
    "FrameType",
    "FrameWriter",
    "Payload",
    "ReaderState",
    "RejectReason",
    "Rejected",
    "Signal",
    "is_default_secret",
    "new_epoch",
    "secret_from",
]

PROTOCOL_VERSION: Final = 1

_LENGTH = struct.Struct(">I")
HEADER_LEN: Final = _LENGTH.size
TAG_LEN: Final = 32
# The smallest CBOR item is one byte, so anything shorter cannot be a frame.
MIN_FRAME: Final = TAG_LEN + 1
DEFAULT_MAX_FRAME: Final = 4 * 1024 * 1024
MAX_ID_LEN: Final = 64
# How deeply lists and maps may nest inside a payload. URL batches and gossip are
# two or three levels deep; the cap keeps every walk over a payload cheap.
MAX_PAYLOAD_DEPTH: Final = 32
_BODY_FIELDS: Final = 8
# CBOR integers without a bignum tag span [-2**64, 2**64 - 1]; bignums are refused.
_INT_LIMIT: Final = 2**64
# epoch and seq are unsigned and, kept below 2**63, fit a signed 64-bit field in
# another implementation of the protocol.
_COUNTER_LIMIT: Final = 2**63
_DETAIL_MAX: Final = 200


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
    HANDOFF_DONE = 12
    REPLICA = 13
    ERROR = 15
    # Monitoring: a control peer asks to be pushed figures; figures; stop everything.
    CONTROL = 16
    FIGURES = 17
    STOP = 18


# A set of ints rather than FrameType(value): a hostile value should cost a lookup,
# not an exception.
_TYPE_VALUES: Final = frozenset(int(t) for t in FrameType)


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

    @property
    def fatal(self) -> bool:
        return self in _FATAL


_FATAL: Final = frozenset({RejectReason.TOO_LARGE, RejectReason.BAD_LENGTH, RejectReason.TRUNCATED})

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


class FrameError(ValueError):
    """The caller asked the writer for a frame the wire cannot carry."""


# --------------------------------------------------------------------------- secrets

#: The key used when no secret is configured. It is public, so a peer using it
#: must listen on loopback only.
LOOPBACK_SECRET: Final = "ubipy-loopback-only"
# Not versioned with PROTOCOL_VERSION on purpose: a peer speaking another version
# should get BAD_VERSION (a clear message) rather than BAD_TAG.
_KDF_LABEL: Final = b"ubipy/wire/hmac-key"


def _derive(secret: str) -> bytes:
    # Human secrets are short and low in entropy; one keyed hash at least turns them
    # into a uniform 32-byte key that is used for nothing but this wire.
    return hmac.digest(_KDF_LABEL, secret.encode("utf-8"), "sha256")


_DEFAULT_KEY: Final = _derive(LOOPBACK_SECRET)


def secret_from(value: str | None) -> bytes:
    """The wire key for ``--secret`` / ``UBIPY_SECRET``.

    None or "" (an unset or empty variable) gives the public loopback-only key.
    """
    return _derive(value or LOOPBACK_SECRET)


def is_default_secret(key: bytes) -> bool:
    """True for the public loopback key: the caller must then bind loopback only."""
    return hmac.compare_digest(key, _DEFAULT_KEY)


def new_epoch() -> int:
    """A random epoch for this process start (63 bits, never negative)."""
    return secrets.randbits(63)


# --------------------------------------------------------------------------- payloads

_LEAF_TYPES: Final = frozenset({type(None), bool, float, str, bytes})
_KEY_TYPES: Final = frozenset({str, bytes, int})


def _payload_problem(value: object) -> str | None:
    """Why ``value`` is not plain data the wire carries, or None if it is.

    Exact types, not isinstance: a bool is an int and a str subclass may encode as
    something else. Iterative, and only containers go on the stack (a batch of URLs
    is one list of leaves), so a cyclic or absurdly deep value costs at most
    MAX_PAYLOAD_DEPTH levels rather than a RecursionError.
    """
    stack: list[tuple[object, int]] = [([value], -1)]
    while stack:
        container, depth = stack.pop()
        if depth >= MAX_PAYLOAD_DEPTH:
            return f"lists or maps nested deeper than {MAX_PAYLOAD_DEPTH}"
        children: Iterable[object]
        if type(container) is list:
            children = cast(list[object], container)
        else:
            mapping = cast(dict[object, object], container)
            for key in mapping:
                key_kind = type(key)
                if key_kind not in _KEY_TYPES:
                    return f"a map key of type {key_kind.__name__}"
                if key_kind is int and not -_INT_LIMIT <= cast(int, key) < _INT_LIMIT:
                    return "an integer map key beyond 64 bits"
            children = mapping.values()
        for child in children:
            kind = type(child)
            if kind in _LEAF_TYPES:
                continue
            if kind is int:
                if not -_INT_LIMIT <= cast(int, child) < _INT_LIMIT:
                    return "an integer beyond 64 bits"
            elif kind is list or kind is dict:
                stack.append((child, depth + 1))
            else:
                return f"a value of type {kind.__name__}"
    return None


# --------------------------------------------------------------------------- writer


def _check_id(name: str, value: str, *, allow_empty: bool) -> None:
    if type(value) is not str or len(value) > MAX_ID_LEN or (not value and not allow_empty):
        raise FrameError(f"{name} must be a str of 1 to {MAX_ID_LEN} characters: {value!r}")


class FrameWriter:
    """Encodes frames from one sender. One per process: every frame it writes, to any
    peer, takes the next sequence number of its epoch."""

    def __init__(
        self,
        secret: bytes,
        sender: str,
        epoch: int | None = None,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
    ) -> None:
        _check_id("sender", sender, allow_empty=False)
        if epoch is None:
            epoch = new_epoch()
        if type(epoch) is not int or not 0 <= epoch < _COUNTER_LIMIT:
            raise FrameError(f"epoch must be an int in [0, 2**63): {epoch!r}")
        if max_frame < MIN_FRAME:
            raise FrameError(f"max_frame must be at least {MIN_FRAME}")
        self._secret = secret
        self._sender = sender
        self._epoch = epoch
        self._max_frame = max_frame
        self._seq = 0

    @property
    def sender(self) -> str:
        return self._sender

    @property
    def epoch(self) -> int:
        return self._epoch

    @property
    def next_seq(self) -> int:
        return self._seq

    def frame(self, frame_type: FrameType, payload: Payload, now: float, *, to: str = "") -> bytes:
        """The bytes of one frame; raises FrameError if it cannot be carried.

        ``to`` names the receiving peer. A frame with ``to=""`` is accepted by any
        peer, so a captured one can be replayed to a *different* peer (once each,
        within the skew): leave it empty only for idempotent frames, or when the
        receiver's id is not known yet.
        """
        if frame_type not in _TYPE_VALUES:
            raise FrameError(f"unknown frame type {frame_type!r}")
        _check_id("recipient", to, allow_empty=True)
        if type(now) not in (float, int) or not math.isfinite(now):
            raise FrameError(f"now must be a finite number of seconds: {now!r}")
        # Checked here so that a caller's mistake fails loudly at the sender rather
        # than as silent MALFORMED drops at every receiver.
        problem = _payload_problem(payload)
        if problem is not None:
            raise FrameError(f"payload holds {problem}")
        body = cbor2.dumps(
            [
                PROTOCOL_VERSION,
                int(frame_type),
                self._sender,
                to,
                self._epoch,
                self._seq,
                float(now),
                payload,
            ]
        )
        size = TAG_LEN + len(body)
        if size > self._max_frame:
            raise FrameError(f"frame of {size} bytes exceeds the cap of {self._max_frame}")
        self._seq += 1
        return _LENGTH.pack(size) + hmac.digest(self._secret, body, "sha256") + body


# --------------------------------------------------------------------------- decoding


class _Drop(Exception):
    """Internal: the frame being processed is rejected."""

    def __init__(self, reason: RejectReason, detail: str, sender: str | None = None) -> None:
        super().__init__(detail)
        self.rejected = Rejected(reason, detail[:_DETAIL_MAX], sender)


def _refuse_tag(tag: cbor2.CBORTag, immutable: bool) -> Any:
    raise ValueError(f"CBOR tag {tag.tag} is not allowed on the wire")


def _refuse_semantic(value: Any, immutable: bool) -> Any:
    raise ValueError("semantic CBOR tags are not allowed on the wire")


# cbor2 decodes these tags itself, before and regardless of tag_hook (datetimes,
# Decimal, compiled regexes, MIME messages, shared references that build cycles,
# bignums through an int-from-string conversion...). Overriding each one makes any
# tag an error; tag_hook refuses the rest. Found by probing cbor2 6.3 for every tag
# below 70000; _payload_problem() still checks the types of whatever comes out, in
# case a later cbor2 adds another.
_BUILTIN_TAGS: Final = (
    0, 1, 2, 3, 4, 5, 25, 28, 29, 30, 35, 36, 37, 52, 54, 100, 256, 258, 260, 261,
    1004, 43000, 55799,
)  # fmt: skip
_NO_SEMANTICS: Final = {tag: _refuse_semantic for tag in _BUILTIN_TAGS}


def _decode(body: bytes) -> object:
    stream = io.BytesIO(body)
    try:
        value = cbor2.CBORDecoder(
            stream,
            tag_hook=_refuse_tag,
            semantic_decoders=_NO_SEMANTICS,
            # +1: the body array itself is one level.
            max_depth=MAX_PAYLOAD_DEPTH + 1,
            allow_indefinite=False,
            allow_duplicate_keys=False,
            str_errors="strict",
        ).decode()
    # Exception, not a list of types: cbor2 is decoding bytes chosen by the peer, and
    # has let several types through over its versions (6.3 still leaks a bare
    # ValueError for a bignum over 4300 digits). Nothing else runs in this block.
    except Exception as exc:
        raise _Drop(
            RejectReason.MALFORMED, f"undecodable CBOR: {type(exc).__name__}: {exc}"
        ) from exc
    if stream.tell() != len(body):
        # The tag covers them but no field holds them; a writer never sends them, so
        # refusing them keeps one frame to one encoding.
        raise _Drop(RejectReason.MALFORMED, f"{len(body) - stream.tell()} bytes after the body")
    return value


def _check_decoder() -> None:
    # cbor2 5.x takes none of the keywords above and would turn every frame into a
    # MALFORMED drop; say so at import instead.
    try:
        ok = _decode(cbor2.dumps([1, "x"])) == [1, "x"]
    except _Drop as exc:
        ok = False
        why = exc.rejected.detail
    else:
        why = "round trip differs"
    if not ok:
        raise ImportError(f"ubipy.peer.wire needs cbor2 >= 6.1 ({why})")


_check_decoder()


def _parse(body: bytes) -> Frame:
    """The frame in an authentic body, or _Drop."""
    value = _decode(body)
    if type(value) is not list or not value:
        got = "an empty array" if type(value) is list else f"of type {type(value).__name__}"
        raise _Drop(RejectReason.MALFORMED, f"body is {got}, not a frame array")
    fields = cast(list[object], value)
    version = fields[0]
    if type(version) is not int:
        raise _Drop(RejectReason.MALFORMED, f"version is a {type(version).__name__}")
    if version != PROTOCOL_VERSION:
        raise _Drop(RejectReason.BAD_VERSION, f"version {version}, expected {PROTOCOL_VERSION}")
    if len(fields) != _BODY_FIELDS:
        raise _Drop(RejectReason.MALFORMED, f"body has {len(fields)} fields, not {_BODY_FIELDS}")
    type_, sender, recipient, epoch, seq, sent_at, payload = fields[1:]
    if type(sender) is not str or not 0 < len(sender) <= MAX_ID_LEN:
        raise _Drop(RejectReason.MALFORMED, "sender is not a peer id")
    if type(recipient) is not str or len(recipient) > MAX_ID_LEN:
        raise _Drop(RejectReason.MALFORMED, "recipient is not a peer id", sender)
    if type(type_) is not int:
        raise _Drop(RejectReason.MALFORMED, "type is not an int", sender)
    for name, counter in (("epoch", epoch), ("seq", seq)):
        if type(counter) is not int or not 0 <= counter < _COUNTER_LIMIT:
            raise _Drop(RejectReason.MALFORMED, f"{name} is not an int in [0, 2**63)", sender)
    # NaN must not get here: every comparison with it is False, so it would pass
    # the freshness check.
    if type(sent_at) not in (float, int) or not math.isfinite(cast(float, sent_at)):
        raise _Drop(RejectReason.MALFORMED, "sent_at is not a finite number", sender)
    if type_ not in _TYPE_VALUES:
        raise _Drop(RejectReason.UNKNOWN_TYPE, f"frame type {type_}", sender)
    problem = _payload_problem(payload)
    if problem is not None:
        raise _Drop(RejectReason.MALFORMED, f"payload holds {problem}", sender)
    return Frame(
        FrameType(type_),
        sender,
        recipient,
        cast(int, epoch),
        cast(int, seq),
        float(cast(float, sent_at)),
        payload,
    )


# --------------------------------------------------------------------------- reader


class ReaderState(enum.Enum):
    HEADER = "header"  # waiting for the 4-byte length
    BODY = "body"  # waiting for the tag and body of a known length
    CLOSED = "closed"  # end of stream, or the frame boundaries are lost


class _Input(enum.Enum):
    LENGTH_OK = enum.auto()
    LENGTH_BAD = enum.auto()
    FRAME_DONE = enum.auto()  # a whole frame consumed, admitted or not
    EOF = enum.auto()
    CLOSE = enum.auto()  # the caller gave up on the connection


# Every legal move of the reader; anything else is a bug in this module.
_TRANSITIONS: Final[dict[tuple[ReaderState, _Input], ReaderState]] = {
    (ReaderState.HEADER, _Input.LENGTH_OK): ReaderState.BODY,
    (ReaderState.HEADER, _Input.LENGTH_BAD): ReaderState.CLOSED,
    (ReaderState.HEADER, _Input.EOF): ReaderState.CLOSED,
    (ReaderState.HEADER, _Input.CLOSE): ReaderState.CLOSED,
    (ReaderState.BODY, _Input.FRAME_DONE): ReaderState.HEADER,
    (ReaderState.BODY, _Input.EOF): ReaderState.CLOSED,
    (ReaderState.BODY, _Input.CLOSE): ReaderState.CLOSED,
    (ReaderState.CLOSED, _Input.CLOSE): ReaderState.CLOSED,
}

# Consumed bytes are dropped from the front of the buffer in chunks of at least
# this much, so a buffer of many small frames is not shifted once per frame.
_COMPACT_AT: Final = 64 * 1024


class FrameReader:
    """Decodes one connection's byte stream into events.

    ``receive_data(b"")`` signals end of stream. ``next_event(now)`` returns a
    :class:`Frame`, a per-frame :class:`Rejected` (the stream carries on),
    :data:`NEED_DATA`, or :data:`CLOSED`. When the reader closes because the stream
    cannot be trusted to resynchronise, ``close_reason`` says why (None after a
    clean end of stream) and the caller should close the connection.
    """

    def __init__(
        self, secret: bytes, guard: ReplayGuard, *, max_frame: int = DEFAULT_MAX_FRAME
    ) -> None:
        if max_frame < MIN_FRAME:
            raise ValueError(f"max_frame must be at least {MIN_FRAME}")
        self._secret = secret
        self._guard = guard
        self._max_frame = max_frame
        self._buf = bytearray()
        self._pos = 0
        self._need = 0
        self._eof = False
        self._state = ReaderState.HEADER
        self.close_reason: RejectReason | None = None
        self.close_detail = ""
        self.counts: Counter[RejectReason] = Counter()
        self.frames = 0

    @property
    def state(self) -> ReaderState:
        return self._state

    @property
    def buffered(self) -> int:
        """Bytes received and not yet consumed."""
        return len(self._buf) - self._pos

    def _move(self, event: _Input) -> None:
        try:
            self._state = _TRANSITIONS[self._state, event]
        except KeyError:
            raise RuntimeError(f"FrameReader: no move from {self._state} on {event}") from None

    def receive_data(self, data: bytes) -> None:
        if self._state is ReaderState.CLOSED:
            return  # the caller may still have a read in flight; nothing matters now
        if not data:
            self._eof = True
        elif self._eof:
            raise RuntimeError("FrameReader: data after end of stream")
        else:
            self._buf += data

    def close(self) -> None:
        """Stop reading (e.g. the caller drops a peer that sends too many bad frames)."""
        self._move(_Input.CLOSE)
        self._release()

    def _release(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def _fail(self, event: _Input, reason: RejectReason, detail: str) -> Signal:
        self._move(event)
        self.close_reason = reason
        self.close_detail = detail
        self.counts[reason] += 1
        self._release()
        return CLOSED

    def _take(self, n: int) -> bytes:
        start = self._pos
        self._pos += n
        with memoryview(self._buf) as view:
            chunk = view[start : self._pos].tobytes()
        if self._pos == len(self._buf):
            self._buf.clear()
            self._pos = 0
        elif self._pos >= _COMPACT_AT and 2 * self._pos >= len(self._buf):
            # Only once the consumed part is at least half: each byte is then moved
            # O(1) times, however many frames one receive_data() carried.
            del self._buf[: self._pos]
            self._pos = 0
        return chunk

    def next_event(self, now: float) -> Event:
        if self._state is ReaderState.HEADER:
            if self.buffered < HEADER_LEN:
                if not self._eof:
                    return NEED_DATA
                if self.buffered:
                    return self._fail(
                        _Input.EOF, RejectReason.TRUNCATED, "end of stream in a length"
                    )
                self._move(_Input.EOF)
                return CLOSED
            (size,) = _LENGTH.unpack_from(self._buf, self._pos)
            # Decided on the length alone, before a byte of the body is buffered:
            # a peer cannot make us hold more than max_frame for it.
            if size > self._max_frame:
                return self._fail(
                    _Input.LENGTH_BAD,
                    RejectReason.TOO_LARGE,
                    f"frame of {size} bytes, cap {self._max_frame}",
                )
            if size < MIN_FRAME:
                return self._fail(
                    _Input.LENGTH_BAD, RejectReason.BAD_LENGTH, f"frame of {size} bytes"
                )
            self._take(HEADER_LEN)
            self._need = size
            self._move(_Input.LENGTH_OK)
        if self._state is ReaderState.BODY:
            if self.buffered < self._need:
                if not self._eof:
                    return NEED_DATA
                return self._fail(
                    _Input.EOF,
                    RejectReason.TRUNCATED,
                    f"end of stream {self.buffered} bytes into a frame of {self._need}",
                )
            raw = self._take(self._need)
            self._move(_Input.FRAME_DONE)
            return self._process(raw, now)
        return CLOSED

    def _process(self, raw: bytes, now: float) -> Frame | Rejected:
        tag, body = raw[:TAG_LEN], raw[TAG_LEN:]
        # The tag first: an unauthenticated body never reaches the decoder.
        if not hmac.compare_digest(tag, hmac.digest(self._secret, body, "sha256")):
            rejected = Rejected(RejectReason.BAD_TAG, "authentication failed (wrong secret?)")
        else:
            try:
                frame = _parse(body)
            except _Drop as drop:
                rejected = drop.rejected
            else:
                verdict = self._guard.admit(frame, now)
                if verdict is None:
                    self.frames += 1
                    return frame
                rejected = verdict
        self.counts[rejected.reason] += 1
        return rejected
