"""The reader of one connection's byte stream, as a state machine (h11 style): fed
bytes, it hands back frames, rejections and signals; the legal moves sit in one
table. No I/O."""

from __future__ import annotations

import enum
import hmac
from collections import Counter
from typing import Final

from ubipy.wire.codec import Drop, parse_body
from ubipy.wire.frames import (
    CLOSED,
    DEFAULT_MAX_FRAME,
    HEADER_LEN,
    LENGTH_PREFIX,
    MIN_FRAME,
    NEED_DATA,
    TAG_LEN,
    Event,
    Frame,
    Rejected,
    RejectReason,
    Signal,
)
from ubipy.wire.replay import ReplayGuard


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
        self,
        secret: bytes,
        guard: ReplayGuard,
        *,
        max_frame: int = DEFAULT_MAX_FRAME,
        first_max_frame: int | None = None,
    ) -> None:
        first = max_frame if first_max_frame is None else first_max_frame
        if not MIN_FRAME <= first <= max_frame:
            raise ValueError(f"need {MIN_FRAME} <= first_max_frame <= max_frame")
        self._secret = secret
        self._guard = guard
        self._max_frame = max_frame
        # Until a frame authenticates, what the far end can make us buffer.
        self._first_max_frame = first
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
            (size,) = LENGTH_PREFIX.unpack_from(self._buf, self._pos)
            # Decided on the length alone, before a byte of the body is buffered:
            # a peer cannot make us hold more than the cap for it.
            cap = self._max_frame if self.frames else self._first_max_frame
            if size > cap:
                said = "" if self.frames else spoken(size)
                return self._fail(
                    _Input.LENGTH_BAD,
                    RejectReason.TOO_LARGE,
                    f"frame of {size} bytes, cap {cap}{said}",
                )
            if size == 0:
                return self._fail(
                    _Input.LENGTH_BAD,
                    RejectReason.REFUSED,
                    "the far end could not authenticate our frames (the secrets differ)",
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
                frame = parse_body(body)
            except Drop as drop:
                rejected = drop.rejected
            else:
                verdict = self._guard.admit(frame, now)
                if verdict is None:
                    self.frames += 1
                    return frame
                rejected = verdict
        self.counts[rejected.reason] += 1
        return rejected


#: The end of a reader's close detail when the first bytes were an HTTP answer's.
HTTP_ANSWER = " (the bytes of an HTTP answer)"


def spoken(length: int) -> str:
    """What a stream's first four bytes, read as a frame's length, were, if another
    protocol's: a log that said "frame of 1195725856 bytes" meant "GET " (QA)."""
    head = length.to_bytes(HEADER_LEN, "big")
    if head == b"HTTP":
        return HTTP_ANSWER
    if head[:2] == b"\x16\x03":
        return " (the bytes of a TLS handshake)"
    if head.rstrip(b" ").isalpha() and head.rstrip(b" ").isupper():
        return " (the bytes of an HTTP request)"
    return ""
