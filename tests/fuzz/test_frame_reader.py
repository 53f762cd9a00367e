"""The frame reader fed hostile streams: garbage from strangers, and frames written
with the right secret and then damaged (bodies re-signed so that they reach the
decoder, lengths rewritten, frames replayed, misdirected or signed with the wrong
key). Whatever arrives, and however the network cuts it up, the reader only hands
back its events, the same ones for the same bytes, admits nothing forged or
repeated, and never holds more than one frame and one read (and, until a frame has
authenticated, no more than the first frame's smaller cap)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import cbor2
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.common import (
    KEY,
    NOW,
    OTHER_KEY,
    RECEIVER,
    check_typed,
    fuzz,
    is_event,
    mutated,
    mutated_bytes,
    plain_values,
    signed,
    wire_values,
)
from ubipy.wire import (
    CLOSED,
    DEFAULT_MAX_FRAME,
    NEED_DATA,
    REFUSAL,
    Event,
    Frame,
    FrameType,
    FrameWriter,
    Rejected,
    RejectReason,
    ReplayGuard,
)
from ubipy.wire.frames import HEADER_LEN, MIN_FRAME, TAG_LEN
from ubipy.wire.reader import FrameReader

# Frame caps, from the smallest a reader takes to the default; the small ones put
# the cap within reach of the frames drawn here.
caps = st.sampled_from([MIN_FRAME, 64, 200, 1024, DEFAULT_MAX_FRAME])


def first_cap_of(cap: int) -> int:
    """The cap on a connection's frames until one authenticates (FIRST_FRAME_CAP in a
    peer), drawn below the frame cap so that the fuzz reaches both."""
    return max(MIN_FRAME, cap // 4)


@dataclass
class Run:
    events: list[Event]
    reader: FrameReader

    @property
    def frames(self) -> list[Frame]:
        return [e for e in self.events if isinstance(e, Frame)]

    def summary(self) -> list[str]:
        """The events up to the close, as text (repr, not ==: a NaN in a payload is not
        equal to itself); the NEED_DATA in between depend on how the bytes came."""
        events = self.events[: self.events.index(CLOSED) + 1]
        return [repr(e) for e in events if e is not NEED_DATA]


def drain(reader: FrameReader, cap: int, first_cap: int) -> list[Event]:
    events: list[Event] = []
    # Each Frame or Rejected consumes at least a header, so a reader that goes on
    # past this many events has stopped making progress.
    for _ in range(reader.buffered + 2):
        event = reader.next_event(NOW)
        assert is_event(event), event
        if isinstance(event, Rejected):
            # Fatal reasons close the reader; they are never a per-frame event.
            assert not event.fatal and isinstance(event.reason, RejectReason)
        events.append(event)
        if event is NEED_DATA or event is CLOSED:
            # Waiting for more, it holds less than one whole frame with its length,
            # and, until a frame has authenticated, less than the first frame's cap.
            assert reader.buffered < HEADER_LEN + (cap if reader.frames else first_cap)
            return events
    raise AssertionError("the reader made no progress")


def run(data: bytes, cap: int, chunks: list[int] | None = None) -> Run:
    """Feed ``data`` in pieces (None: one byte at a time), then the end of stream."""
    first_cap = first_cap_of(cap)
    reader = FrameReader(
        KEY, ReplayGuard(local_id=RECEIVER), max_frame=cap, first_max_frame=first_cap
    )
    if chunks is None:
        pieces = [data[i : i + 1] for i in range(len(data))]
    else:
        pieces, pos = [], 0
        for size in [*chunks, len(data)]:
            pieces.append(data[pos : pos + size])
            pos += size
    events: list[Event] = []
    for piece in [p for p in pieces if p]:
        reader.receive_data(piece)
        # A frame at most, and the one read that has just arrived.
        assert reader.buffered <= HEADER_LEN + cap + len(piece)
        events += drain(reader, cap, first_cap)
    reader.receive_data(b"")
    events += drain(reader, cap, first_cap)
    closed_at = events.index(CLOSED)
    assert all(e is CLOSED for e in events[closed_at:]), "an event after the close"
    assert reader.close_reason is None or reader.close_reason.fatal
    # Closed, it holds nothing and stays closed.
    assert reader.buffered == 0
    reader.receive_data(b"more")
    assert reader.next_event(NOW) is CLOSED
    return Run(events, reader)


def run_every_way(data: bytes, cap: int, chunks: list[int]) -> Run:
    """Whole, in the drawn pieces and one byte at a time: the same events each way."""
    whole = run(data, cap, [])
    assert run(data, cap, chunks).summary() == whole.summary()
    assert run(data, cap, None).summary() == whole.summary()
    return whole


chunkings = st.lists(st.integers(1, 300), max_size=12)

# Streams without the key: random bytes, and random bytes behind plausible lengths
# (so that the fuzz reaches the tag check rather than stopping at the first length).
strangers = st.one_of(
    st.binary(max_size=1500),
    st.lists(st.binary(min_size=1, max_size=200), max_size=6).map(
        lambda bodies: b"".join(
            struct.pack(">I", TAG_LEN + len(b)) + bytes(TAG_LEN) + b for b in bodies
        )
    ),
    st.lists(wire_values.map(cbor2.dumps), max_size=4).map(
        lambda bodies: b"".join(signed(b, OTHER_KEY) for b in bodies)
    ),
)


@fuzz(30)
@given(strangers, caps, chunkings)
def test_bytes_from_a_stranger_are_never_admitted(data: bytes, cap: int, chunks: list[int]) -> None:
    assert not run_every_way(data, cap, chunks).frames


# --------------------------------------------------------------------------- damaged frames

_KINDS = [k for k in FrameType]
# Lengths around every boundary the reader checks, and the largest a prefix holds.
_LENGTHS = [0, 1, TAG_LEN, MIN_FRAME - 1, MIN_FRAME, 64, 65, 200, 201, 1024, 1025,
            DEFAULT_MAX_FRAME, DEFAULT_MAX_FRAME + 1, 2**31, 2**32 - 1]  # fmt: skip


@dataclass
class Stream:
    data: bytes
    # The frames written by the book, by (sender, epoch, seq), in order, up to the
    # first damaged one: those must all be admitted (unless the cap refuses them).
    intact_prefix: list[tuple[str, int, int, int]]


@st.composite
def damaged_streams(draw: st.DrawFn) -> Stream:
    writers = [FrameWriter(KEY, "alice", 1), FrameWriter(KEY, "carol", 7)]
    units: list[bytes] = []
    prefix: list[tuple[str, int, int, int]] = []
    damaged = False
    for _ in range(draw(st.integers(1, 6))):
        w = draw(st.sampled_from(writers))
        kind = draw(st.sampled_from(_KINDS))
        to = draw(st.sampled_from(["", RECEIVER, "mallory"]))
        sent_at = NOW + draw(st.sampled_from([0.0, 0.0, 1.5, -59.0, 3600.0]))
        seq = w.next_seq
        frame = w.frame(kind, draw(plain_values), sent_at, to=to)
        body = frame[HEADER_LEN + TAG_LEN :]
        how = draw(
            st.sampled_from(
                [
                    "intact",
                    "body_bytes",
                    "body_tree",
                    "length",
                    "raw",
                    "replay",
                    "foreign",
                    "refusal",
                ]
            )
        )
        if how == "body_bytes":
            # Re-signed: the damaged body reaches the CBOR decoder and the checks.
            frame = signed(draw(mutated_bytes(body)))
        elif how == "body_tree":
            frame = signed(cbor2.dumps(draw(mutated(cbor2.loads(body)))))
        elif how == "length":
            frame = struct.pack(">I", draw(st.sampled_from(_LENGTHS))) + frame[HEADER_LEN:]
        elif how == "raw":
            frame = draw(mutated_bytes(frame))
        elif how == "replay" and units:
            frame = draw(st.sampled_from(units))
        elif how == "foreign":
            frame = signed(body, OTHER_KEY)
        elif how == "refusal":
            frame = REFUSAL
        fresh = to != "mallory" and sent_at - NOW <= 60.0
        if how != "intact" or not fresh:
            damaged = True
        elif not damaged:
            prefix.append((w.sender, w.epoch, seq, len(frame) - HEADER_LEN))
        units.append(frame)
    return Stream(b"".join(units), prefix)


def _plain(value: object) -> bool:
    """Whether a writer takes ``value`` as a payload (no tags, 64-bit integers)."""
    try:
        FrameWriter(KEY, "probe", 0).frame(FrameType.SEED, value, NOW)
    except ValueError:
        return False
    return True


@fuzz(30)
@given(damaged_streams(), caps, chunkings)
def test_damaged_frames_never_escape_and_good_ones_still_arrive(
    stream: Stream, cap: int, chunks: list[int]
) -> None:
    result = run_every_way(stream.data, cap, chunks)
    admitted = result.frames
    keys = [(f.sender, f.epoch, f.seq) for f in admitted]
    assert len(keys) == len(set(keys)), "a frame was admitted twice"
    for frame in admitted:
        assert frame.recipient in ("", RECEIVER)
        assert abs(frame.sent_at - NOW) <= 60.0
        # Plain data a writer could have sent, and the typed decoding refuses only
        # with WireError (check_typed lets anything else propagate).
        assert _plain(frame.payload)
        check_typed(frame)
    expected: list[tuple[str, int, int]] = []
    for sender, epoch, seq, size in stream.intact_prefix:
        if size > (cap if expected else first_cap_of(cap)):
            break
        expected.append((sender, epoch, seq))
    assert keys[: len(expected)] == expected


@fuzz(40)
@given(
    length=st.sampled_from(_LENGTHS) | st.integers(0, 2**32 - 1),
    rest=st.binary(max_size=400),
    cap=caps,
    chunks=chunkings,
)
def test_a_length_alone_never_buys_more_than_one_frame_of_memory(
    length: int, rest: bytes, cap: int, chunks: list[int]
) -> None:
    # run() checks the buffer after every read; here the length decides at once.
    result = run_every_way(struct.pack(">I", length) + rest, cap, chunks)
    reason = result.reader.close_reason
    if length > first_cap_of(cap):
        assert reason is RejectReason.TOO_LARGE
        # Refused on the length alone: not a byte of the body was waited for.
        assert all(e is CLOSED for e in result.events)
    elif length == 0:
        assert reason is RejectReason.REFUSED
    elif length < MIN_FRAME:
        assert reason is RejectReason.BAD_LENGTH
    elif len(rest) < length:
        assert reason is RejectReason.TRUNCATED
