"""Frames to bytes and back: the :class:`FrameWriter`, and the checks an authentic
body passes before it is a :class:`~ubipy.wire.frames.Frame` (plain-data payloads,
CBOR without tags, every field of the right type). No I/O."""

from __future__ import annotations

import hmac
import io
import math
from collections.abc import Iterable
from typing import Any, Final, cast

import cbor2

from ubipy.errors import FrameError
from ubipy.wire.frames import (
    BODY_FIELDS,
    COUNTER_LIMIT,
    DEFAULT_MAX_FRAME,
    DETAIL_MAX,
    FIRST_FRAME_CAP,
    INT_LIMIT,
    LENGTH_PREFIX,
    MAX_ID_LEN,
    MAX_PAYLOAD_DEPTH,
    MIN_FRAME,
    PROTOCOL_VERSION,
    TAG_LEN,
    TYPE_VALUES,
    Frame,
    FrameType,
    Payload,
    Rejected,
    RejectReason,
)
from ubipy.wire.secret import new_epoch

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
                if key_kind is int and not -INT_LIMIT <= cast(int, key) < INT_LIMIT:
                    return "an integer map key beyond 64 bits"
            children = mapping.values()
        for child in children:
            kind = type(child)
            if kind in _LEAF_TYPES:
                continue
            if kind is int:
                if not -INT_LIMIT <= cast(int, child) < INT_LIMIT:
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
        if type(epoch) is not int or not 0 <= epoch < COUNTER_LIMIT:
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
        if frame_type not in TYPE_VALUES:
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
        return LENGTH_PREFIX.pack(size) + hmac.digest(self._secret, body, "sha256") + body

    def hello_before(self, first: bytes, now: float, *, to: str = "") -> bytes:
        """What must go ahead of ``first``, a connection's first frame: a HELLO if it is
        larger than a connection that has not proved the secret may send, else nothing."""
        if len(first) <= FIRST_FRAME_CAP:
            return b""
        return self.frame(FrameType.HELLO, {}, now, to=to)


# --------------------------------------------------------------------------- decoding


class Drop(Exception):
    """Internal: the frame being processed is rejected."""

    def __init__(self, reason: RejectReason, detail: str, sender: str | None = None) -> None:
        super().__init__(detail)
        self.rejected = Rejected(reason, detail[:DETAIL_MAX], sender)


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
        raise Drop(
            RejectReason.MALFORMED, f"undecodable CBOR: {type(exc).__name__}: {exc}"
        ) from exc
    if stream.tell() != len(body):
        # The tag covers them but no field holds them; a writer never sends them, so
        # refusing them keeps one frame to one encoding.
        raise Drop(RejectReason.MALFORMED, f"{len(body) - stream.tell()} bytes after the body")
    return value


def _check_decoder() -> None:
    # cbor2 5.x takes none of the keywords above and would turn every frame into a
    # MALFORMED drop; say so at import instead.
    try:
        ok = _decode(cbor2.dumps([1, "x"])) == [1, "x"]
    except Drop as exc:
        ok = False
        why = exc.rejected.detail
    else:
        why = "round trip differs"
    if not ok:
        raise ImportError(f"ubipy.wire needs cbor2 >= 6.1 ({why})")


_check_decoder()


def parse_body(body: bytes) -> Frame:
    """The frame in an authentic body, or Drop."""
    value = _decode(body)
    if type(value) is not list or not value:
        got = "an empty array" if type(value) is list else f"of type {type(value).__name__}"
        raise Drop(RejectReason.MALFORMED, f"body is {got}, not a frame array")
    fields = cast(list[object], value)
    version = fields[0]
    if type(version) is not int:
        raise Drop(RejectReason.MALFORMED, f"version is a {type(version).__name__}")
    if version != PROTOCOL_VERSION:
        raise Drop(RejectReason.BAD_VERSION, f"version {version}, expected {PROTOCOL_VERSION}")
    if len(fields) != BODY_FIELDS:
        raise Drop(RejectReason.MALFORMED, f"body has {len(fields)} fields, not {BODY_FIELDS}")
    type_, sender, recipient, epoch, seq, sent_at, payload = fields[1:]
    if type(sender) is not str or not 0 < len(sender) <= MAX_ID_LEN:
        raise Drop(RejectReason.MALFORMED, "sender is not a peer id")
    if type(recipient) is not str or len(recipient) > MAX_ID_LEN:
        raise Drop(RejectReason.MALFORMED, "recipient is not a peer id", sender)
    if type(type_) is not int:
        raise Drop(RejectReason.MALFORMED, "type is not an int", sender)
    for name, counter in (("epoch", epoch), ("seq", seq)):
        if type(counter) is not int or not 0 <= counter < COUNTER_LIMIT:
            raise Drop(RejectReason.MALFORMED, f"{name} is not an int in [0, 2**63)", sender)
    # NaN must not get here: every comparison with it is False, so it would pass
    # the freshness check.
    if type(sent_at) not in (float, int) or not math.isfinite(cast(float, sent_at)):
        raise Drop(RejectReason.MALFORMED, "sent_at is not a finite number", sender)
    if type_ not in TYPE_VALUES:
        raise Drop(RejectReason.UNKNOWN_TYPE, f"frame type {type_}", sender)
    problem = _payload_problem(payload)
    if problem is not None:
        raise Drop(RejectReason.MALFORMED, f"payload holds {problem}", sender)
    return Frame(
        FrameType(type_),
        sender,
        recipient,
        cast(int, epoch),
        cast(int, seq),
        float(cast(float, sent_at)),
        payload,
    )
