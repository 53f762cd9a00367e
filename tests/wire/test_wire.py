"""The wire codec: frames round-trip, and nothing forged, replayed or malformed gets in."""

from __future__ import annotations

import datetime
import hmac
import math
import re
import struct
from collections.abc import Callable, Iterable
from typing import Any

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ubipy.wire import (
    CLOSED,
    DEFAULT_MAX_FRAME,
    LOOPBACK_SECRET,
    MAX_ID_LEN,
    MAX_PAYLOAD_DEPTH,
    NEED_DATA,
    PROTOCOL_VERSION,
    REFUSAL,
    Event,
    Frame,
    FrameError,
    FrameReader,
    FrameType,
    FrameWriter,
    ReaderState,
    Rejected,
    RejectReason,
    ReplayGuard,
    is_default_secret,
    secret_from,
)
from ubipy.wire import codec as wire_codec
from ubipy.wire import reader as wire_reader

KEY = secret_from("correct horse battery staple")
OTHER_KEY = secret_from("wrong horse")
NOW = 1_700_000_000.0
FUZZ = settings(max_examples=200, deadline=None)


# --------------------------------------------------------------------------- helpers


def drain(reader: FrameReader, now: float = NOW) -> list[Event]:
    """Every event up to and including the next NEED_DATA or CLOSED."""
    events: list[Event] = []
    # A reader consumes at least one byte per Frame or Rejected, so this bound is
    # only hit by a reader that loops without progress.
    for _ in range(reader.buffered + 2):
        event = reader.next_event(now)
        events.append(event)
        if event is NEED_DATA or event is CLOSED:
            return events
    raise AssertionError("reader made no progress")


def feed(
    reader: FrameReader, data: bytes, chunks: Iterable[int] = (), *, eof: bool = True
) -> list[Event]:
    """Feed ``data`` in pieces of the given sizes (then the rest), draining after each."""
    events: list[Event] = []
    pos = 0
    for size in [*chunks, len(data)]:
        piece = data[pos : pos + max(size, 1)]
        pos += len(piece)
        if piece:
            reader.receive_data(piece)
            events += drain(reader)
    if eof:
        reader.receive_data(b"")
        events += drain(reader)
    return events


def frames(events: Iterable[Event]) -> list[Frame]:
    return [e for e in events if isinstance(e, Frame)]


def rejections(events: Iterable[Event]) -> list[RejectReason]:
    return [e.reason for e in events if isinstance(e, Rejected)]


def signed(body: bytes, key: bytes = KEY) -> bytes:
    """A frame around an arbitrary body, with a valid tag under ``key``."""
    return struct.pack(">I", 32 + len(body)) + hmac.digest(key, body, "sha256") + body


def body(
    *,
    version: Any = PROTOCOL_VERSION,
    type_: Any = int(FrameType.URL_BATCH),
    sender: Any = "alice",
    recipient: Any = "",
    epoch: Any = 1,
    seq: Any = 0,
    sent_at: Any = NOW,
    payload: Any = None,
) -> bytes:
    return cbor2.dumps([version, type_, sender, recipient, epoch, seq, sent_at, payload])


def reader(guard: ReplayGuard | None = None, **kwargs: Any) -> FrameReader:
    return FrameReader(KEY, guard if guard is not None else ReplayGuard(), **kwargs)


def one(data: bytes, guard: ReplayGuard | None = None) -> Event:
    """The first event of a stream holding ``data``."""
    events = feed(reader(guard), data)
    return events[0]


# --------------------------------------------------------------------------- round trip

PAYLOADS: list[Any] = [
    None,
    True,
    0,
    -1,
    2**64 - 1,
    -(2**64),
    1.5,
    "",
    "héllo ✓",
    b"\x00\xff",
    [],
    {},
    [f"https://h{i}.synth.test/p/{i}" for i in range(50)],
    {"urls": ["https://a.test/"], "batch": 7, b"raw": [1, [2, [3, {"k": None}]]], 5: -5.0},
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=repr)
def test_round_trip_fed_whole_and_byte_by_byte(payload: Any) -> None:
    w = FrameWriter(KEY, "alice", 42)
    data = w.frame(FrameType.URL_BATCH, payload, NOW, to="bob")
    expected = Frame(FrameType.URL_BATCH, "alice", "bob", 42, 0, NOW, payload)
    assert frames(feed(reader(), data)) == [expected]
    assert frames(feed(reader(), data, [1] * len(data))) == [expected]


def test_many_frames_back_to_back_in_one_buffer() -> None:
    w = FrameWriter(KEY, "alice", 9)
    data = b"".join(w.frame(FrameType(t), PAYLOADS[i % len(PAYLOADS)], NOW) for i, t in
                    enumerate([1, 2, 3, 4, 5, 6, 7, 8, 9, 15] * 20))  # fmt: skip
    for chunks in ([], [1] * len(data), [7, 1000, 3, 5000]):
        r = reader()
        got = frames(feed(r, data, chunks))
        assert [f.seq for f in got] == list(range(200))
        assert [f.payload for f in got] == [PAYLOADS[i % len(PAYLOADS)] for i in range(200)]
        assert r.frames == 200
        assert r.state is ReaderState.CLOSED
        assert r.close_reason is None
        assert not r.counts


def test_writer_numbers_frames_and_reader_reports_fields() -> None:
    w = FrameWriter(KEY, "alice", 5)
    assert (w.sender, w.epoch, w.next_seq) == ("alice", 5, 0)
    data = w.frame(FrameType.STATUS, {"pages": 3}, 123.25) + w.frame(FrameType.SEED, [], 124)
    assert w.next_seq == 2
    r = reader(ReplayGuard(max_skew=10))
    r.receive_data(data)
    first, second = r.next_event(124.0), r.next_event(124.0)
    assert first == Frame(FrameType.STATUS, "alice", "", 5, 0, 123.25, {"pages": 3})
    assert isinstance(second, Frame)
    assert (second.seq, second.sent_at, type(second.sent_at)) == (1, 124.0, float)
    assert r.next_event(124.0) is NEED_DATA


def test_wire_layout_is_length_tag_body() -> None:
    data = FrameWriter(KEY, "alice", 3).frame(FrameType.URL_ACK, [1, 2], NOW, to="bob")
    (n,) = struct.unpack(">I", data[:4])
    assert n == len(data) - 4
    tag, raw = data[4:36], data[36:]
    assert tag == hmac.digest(KEY, raw, "sha256")
    assert cbor2.loads(raw) == [1, 3, "alice", "bob", 3, 0, NOW, [1, 2]]


def test_event_types_narrow_for_callers() -> None:
    # Written the way a caller would; mypy --strict checks the narrowing.
    r = reader()
    r.receive_data(FrameWriter(KEY, "alice", 1).frame(FrameType.SEED, ["u"], NOW))
    event = r.next_event(NOW)
    if event is NEED_DATA or event is CLOSED:
        raise AssertionError(event)
    if isinstance(event, Rejected):
        raise AssertionError(event.reason)
    assert event.payload == ["u"]


# --------------------------------------------------------------------------- per-frame drops


def test_wrong_secret_is_bad_tag_and_never_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    data = FrameWriter(OTHER_KEY, "mallory", 1).frame(FrameType.SEED, ["https://evil/"], NOW)

    def boom(*args: object, **kwargs: object) -> None:
        raise AssertionError("an unauthenticated body reached the CBOR decoder")

    monkeypatch.setattr(cbor2, "CBORDecoder", boom)
    monkeypatch.setattr(cbor2, "loads", boom)
    r = reader()
    events = feed(r, data * 3)
    assert rejections(events) == [RejectReason.BAD_TAG] * 3
    assert events[-1] is CLOSED and r.close_reason is None
    assert r.counts == {RejectReason.BAD_TAG: 3}
    assert isinstance(events[0], Rejected) and events[0].sender is None


def test_flipped_tag_bit_is_bad_tag() -> None:
    data = bytearray(FrameWriter(KEY, "alice", 1).frame(FrameType.SEED, [], NOW))
    data[10] ^= 0x01
    assert rejections([one(bytes(data))]) == [RejectReason.BAD_TAG]


@pytest.mark.parametrize(
    "raw",
    [body(version=2), body(version=0), cbor2.dumps([2, "a future layout"])],
    ids=["v2", "v0", "v2-other-shape"],
)
def test_unknown_version(raw: bytes) -> None:
    event = one(signed(raw))
    assert isinstance(event, Rejected) and event.reason is RejectReason.BAD_VERSION


@pytest.mark.parametrize("type_", [0, 26, 100, 255, 2**63])
def test_unknown_type(type_: int) -> None:
    event = one(signed(body(type_=type_)))
    assert isinstance(event, Rejected)
    assert (event.reason, event.sender) == (RejectReason.UNKNOWN_TYPE, "alice")


# An 8-field body up to and including seq, written by hand for what cbor2 will not
# encode; followed by sent_at and the payload.
HEAD = b"\x88\x01\x02\x65alice\x60\x01\x00"
MALFORMED_BODIES: dict[str, bytes] = {
    "not cbor": b"\xff",
    "truncated cbor": body()[:-1],
    "trailing bytes": body() + b"\x00",
    "reserved additional info": b"\x1c",
    "bad utf-8": HEAD + b"\xfb" + struct.pack(">d", NOW) + b"\x62\xff\xfe",
    "indefinite array": b"\x9f" + body()[1:] + b"\xff",
    "map": cbor2.dumps({"version": 1}),
    "int": cbor2.dumps(1),
    "empty array": cbor2.dumps([]),
    "version str": cbor2.dumps(["1", 2, "alice", "", 1, 0, NOW, None]),
    "version bool": body(version=True),
    "too few fields": cbor2.dumps([1, 2, "alice", "", 1, 0, NOW]),
    "too many fields": cbor2.dumps([1, 2, "alice", "", 1, 0, NOW, None, None]),
    "old 7-field layout": cbor2.dumps([1, 2, "alice", 1, 0, NOW, None]),
    "type str": body(type_="URL_BATCH"),
    "type bool": body(type_=True),
    "type float": body(type_=2.0),
    "sender empty": body(sender=""),
    "sender too long": body(sender="a" * (MAX_ID_LEN + 1)),
    "sender bytes": body(sender=b"alice"),
    "recipient int": body(recipient=7),
    "recipient too long": body(recipient="b" * (MAX_ID_LEN + 1)),
    "epoch negative": body(epoch=-1),
    "epoch 2**63": body(epoch=2**63),
    "epoch float": body(epoch=1.0),
    "epoch bool": body(epoch=True),
    "seq negative": body(seq=-1),
    "seq none": body(seq=None),
    "sent_at nan": body(sent_at=math.nan),
    "sent_at inf": body(sent_at=math.inf),
    "sent_at str": body(sent_at="now"),
    "sent_at bool": body(sent_at=True),
    "payload datetime": body(payload=datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)),
    "payload epoch tag": body(payload=cbor2.CBORTag(1, 5)),
    "payload bignum": body(payload=2**64),
    "payload negative bignum": body(payload=-(2**64) - 1),
    "payload set": body(payload={1, 2}),
    "payload regex": body(payload=re.compile("(a+)+$")),
    "payload unknown tag": body(payload=cbor2.CBORTag(9999, "x")),
    "payload self-describe tag": body(payload=cbor2.CBORTag(55799, 1)),
    "payload undefined": body(payload=cbor2.undefined),
    "payload simple value": body(payload=cbor2.CBORSimpleValue(99)),
    "payload array map key": HEAD + b"\xf9\x00\x00\xa1\x81\x01\x02",
    "payload float map key": body(payload={1.5: 1}),
    "payload duplicate keys": HEAD + b"\xf9\x00\x00\xa2\x01\x02\x01\x03",
    "payload shared cycle": HEAD + b"\xf9\x00\x00\xd8\x1c\x81\xd8\x1d\x00",
    "payload too deep": body()[:-1] + b"\x81" * (MAX_PAYLOAD_DEPTH + 1) + b"\xf6",
    "payload absurdly deep": body()[:-1] + b"\x81" * 100_000 + b"\xf6",
    "payload huge declared length": body()[:-1] + b"\x9b" + b"\x7f" + b"\xff" * 7,
}


@pytest.mark.parametrize("raw", MALFORMED_BODIES.values(), ids=MALFORMED_BODIES.keys())
def test_malformed_body_under_a_valid_tag(raw: bytes) -> None:
    r = reader()
    events = feed(r, signed(raw) + FrameWriter(KEY, "bob", 1).frame(FrameType.SEED, [], NOW))
    assert rejections(events) == [RejectReason.MALFORMED]
    # The stream carries on: the next valid frame is delivered.
    assert [f.sender for f in frames(events)] == ["bob"]
    assert events[-1] is CLOSED and r.close_reason is None


def test_sent_at_may_be_an_integer() -> None:
    event = one(signed(body(sent_at=int(NOW))))
    assert isinstance(event, Frame) and event.sent_at == NOW and type(event.sent_at) is float


def test_payload_at_the_depth_limit_round_trips() -> None:
    payload: Any = None
    for _ in range(MAX_PAYLOAD_DEPTH):
        payload = [payload]
    data = FrameWriter(KEY, "alice", 1).frame(FrameType.STATUS, payload, NOW)
    assert frames(feed(reader(), data))[0].payload == payload
    with pytest.raises(FrameError, match="deeper"):
        FrameWriter(KEY, "alice", 1).frame(FrameType.STATUS, [payload], NOW)


def test_replay_of_an_identical_frame() -> None:
    data = FrameWriter(KEY, "alice", 1).frame(FrameType.URL_BATCH, ["u"], NOW)
    guard = ReplayGuard()
    first = feed(reader(guard), data * 2)
    # ...and on another connection of the same peer.
    second = feed(reader(guard), data)
    assert len(frames(first)) == 1
    assert rejections(first) == rejections(second) == [RejectReason.REPLAY]


def test_old_seq_outside_the_window_is_a_replay() -> None:
    w = FrameWriter(KEY, "alice", 1)
    old = w.frame(FrameType.URL_BATCH, [], NOW)  # seq 0, never delivered
    for _ in range(1023):
        w.frame(FrameType.URL_BATCH, [], NOW)
    edge = w.frame(FrameType.URL_BATCH, [], NOW)  # seq 1024
    guard = ReplayGuard(window=1024)
    assert len(frames(feed(reader(guard), edge))) == 1
    event = one(old, guard)
    assert isinstance(event, Rejected) and event.reason is RejectReason.REPLAY
    assert "window" in event.detail


@pytest.mark.parametrize("skew", [-61.0, 61.0, -1e9, 1e9])
def test_stale_sent_at(skew: float) -> None:
    data = FrameWriter(KEY, "alice", 1).frame(FrameType.SEED, [], NOW + skew)
    event = one(data, ReplayGuard(max_skew=60))
    assert isinstance(event, Rejected) and event.reason is RejectReason.STALE


@pytest.mark.parametrize("skew", [-60.0, 0.0, 59.9, 60.0])
def test_fresh_enough_sent_at(skew: float) -> None:
    data = FrameWriter(KEY, "alice", 1).frame(FrameType.SEED, [], NOW + skew)
    assert isinstance(one(data, ReplayGuard(max_skew=60)), Frame)


def test_a_restarted_peer_with_a_new_epoch_is_accepted() -> None:
    guard = ReplayGuard()
    before = FrameWriter(KEY, "alice", 111)
    after = FrameWriter(KEY, "alice", 222)  # same id, sequence numbers start over
    data = [before.frame(FrameType.SEED, [i], NOW) for i in range(3)]
    data += [after.frame(FrameType.SEED, [i], NOW) for i in range(3)]
    events = feed(reader(guard), b"".join(data) + data[0] + data[3])
    assert [(f.epoch, f.seq) for f in frames(events)] == [(111, 0), (111, 1), (111, 2),
                                                          (222, 0), (222, 1), (222, 2)]  # fmt: skip
    assert rejections(events) == [RejectReason.REPLAY] * 2


def test_reflected_and_misdirected_frames() -> None:
    guard = ReplayGuard(local_id="bob")
    ours = FrameWriter(KEY, "bob", 1).frame(FrameType.URL_ACK, [], NOW, to="alice")
    carol_s = FrameWriter(KEY, "alice", 1).frame(FrameType.URL_ACK, [], NOW, to="carol")
    mine = FrameWriter(KEY, "alice", 2).frame(FrameType.URL_ACK, [], NOW, to="bob")
    anyone = FrameWriter(KEY, "alice", 3).frame(FrameType.MEMBERSHIP, [], NOW)
    events = feed(reader(guard), ours + carol_s + mine + anyone)
    assert rejections(events) == [RejectReason.REFLECTED, RejectReason.MISDIRECTED]
    assert [f.recipient for f in frames(events)] == ["bob", ""]


def test_an_old_capture_for_another_peer_is_stale_not_misdirected() -> None:
    """A misdirected frame does not count against its source (a member with a stale
    view sends them); a stale one does: an old capture replayed is a stranger's."""
    guard = ReplayGuard(local_id="bob", max_skew=60)
    old = FrameWriter(KEY, "alice", 1).frame(FrameType.URL_ACK, [], NOW - 3600, to="carol")
    events = feed(reader(guard), old)
    assert rejections(events) == [RejectReason.STALE]


# --------------------------------------------------------------------------- fatal


def test_over_cap_length_closes_before_the_body_arrives() -> None:
    r = reader(max_frame=1000)
    r.receive_data(struct.pack(">I", 1001))
    assert r.next_event(NOW) is CLOSED
    assert r.state is ReaderState.CLOSED
    assert r.close_reason is RejectReason.TOO_LARGE and r.close_reason.fatal
    assert r.counts == {RejectReason.TOO_LARGE: 1}
    # Nothing more is buffered, whatever arrives.
    r.receive_data(b"x" * 5000)
    assert r.buffered == 0
    assert r.next_event(NOW) is CLOSED


@pytest.mark.parametrize(
    ("first", "said"),
    [
        (b"GET / HTTP/1.1\r\n", "(the bytes of an HTTP request)"),
        (b"POST /api HTTP/1.1\r\n", "(the bytes of an HTTP request)"),
        (b"HTTP/1.1 400 Bad Request\r\n", "(the bytes of an HTTP answer)"),
        (b"\x16\x03\x01\x02\x00\x01", "(the bytes of a TLS handshake)"),
        (b"\x7f\x00\x00\x00", ""),
    ],
)
def test_another_protocol_s_first_bytes_are_named_in_the_close_detail(
    first: bytes, said: str
) -> None:
    # Read as a length, "GET " was logged as "frame of 1195725856 bytes" (QA).
    r = reader(max_frame=1000)
    r.receive_data(first)
    assert r.next_event(NOW) is CLOSED and r.close_reason is RejectReason.TOO_LARGE
    assert r.close_detail.endswith(f"cap 1000 {said}".rstrip())


def test_default_cap_is_four_mebibytes() -> None:
    r = reader()
    r.receive_data(struct.pack(">I", DEFAULT_MAX_FRAME))
    assert r.next_event(NOW) is NEED_DATA
    r = reader()
    r.receive_data(struct.pack(">I", DEFAULT_MAX_FRAME + 1))
    assert r.next_event(NOW) is CLOSED and r.close_reason is RejectReason.TOO_LARGE


def test_the_refusal_notice_closes_the_reader_with_its_own_reason() -> None:
    whole = reader()
    whole.receive_data(REFUSAL)
    assert whole.next_event(NOW) is CLOSED and whole.close_reason is RejectReason.REFUSED
    trickled = reader()
    for byte in REFUSAL:
        assert trickled.next_event(NOW) is NEED_DATA
        trickled.receive_data(bytes([byte]))
    assert trickled.next_event(NOW) is CLOSED and trickled.close_reason is RejectReason.REFUSED


@pytest.mark.parametrize("n", [1, 32])
def test_length_too_short_for_a_tag_and_a_body(n: int) -> None:
    r = reader()
    r.receive_data(struct.pack(">I", n) + b"\x00" * n)
    assert r.next_event(NOW) is CLOSED and r.close_reason is RejectReason.BAD_LENGTH


@pytest.mark.parametrize("cut", [1, 3, 4, 5, 36, -1])
def test_end_of_stream_inside_a_frame(cut: int) -> None:
    data = FrameWriter(KEY, "alice", 1).frame(FrameType.SEED, ["u"], NOW)
    r = reader()
    events = feed(r, data[:cut])
    assert events[-1] is CLOSED and r.close_reason is RejectReason.TRUNCATED
    assert r.counts == {RejectReason.TRUNCATED: 1}


def test_clean_end_of_stream() -> None:
    r = reader()
    assert r.next_event(NOW) is NEED_DATA
    r.receive_data(b"")
    assert r.next_event(NOW) is CLOSED
    assert r.close_reason is None and not r.counts


def test_frames_before_a_fatal_length_are_still_delivered() -> None:
    good = FrameWriter(KEY, "alice", 1).frame(FrameType.SEED, ["u"], NOW)
    events = feed(reader(), good + struct.pack(">I", 2**32 - 1))
    assert len(frames(events)) == 1 and events[-1] is CLOSED


def test_data_after_end_of_stream_is_a_caller_bug() -> None:
    r = reader()
    r.receive_data(b"")
    with pytest.raises(RuntimeError):
        r.receive_data(b"x")


def test_caller_may_close() -> None:
    r = reader()
    r.receive_data(b"\x00\x00")
    r.close()
    r.close()
    assert r.next_event(NOW) is CLOSED and r.close_reason is None and r.buffered == 0


def test_transition_table_is_closed_under_its_states() -> None:
    targets = set(wire_reader._TRANSITIONS.values())
    sources = {state for state, _ in wire_reader._TRANSITIONS}
    assert targets <= sources == set(ReaderState)
    # CLOSED is a sink.
    assert all(new is ReaderState.CLOSED for (old, _), new in wire_reader._TRANSITIONS.items()
               if old is ReaderState.CLOSED)  # fmt: skip


# --------------------------------------------------------------------------- writer, secrets


def test_secrets() -> None:
    default = secret_from(None)
    assert secret_from("") == default == secret_from(LOOPBACK_SECRET)
    assert is_default_secret(default)
    assert not is_default_secret(KEY)
    assert len(KEY) == 32 and KEY != b"correct horse battery staple"
    assert secret_from("a") != secret_from("b")


@pytest.mark.parametrize(
    "payload",
    [(1, 2), {1, 2}, 2**64, bytearray(b"x"), datetime.date(2024, 1, 1),
     {(1,): 2}, {1.5: 2}, FrameType.SEED, cbor2.CBORTag(1, 2), object()],
    # Not repr: an object()'s names its address, which differs between xdist workers.
    ids=lambda p: type(p).__name__ if type(p) is object else repr(p),
)  # fmt: skip
def test_writer_refuses_what_the_reader_would(payload: Any) -> None:
    w = FrameWriter(KEY, "alice", 1)
    with pytest.raises(FrameError, match="payload"):
        w.frame(FrameType.SEED, payload, NOW)
    assert w.next_seq == 0


def test_writer_refuses_a_cyclic_payload() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    with pytest.raises(FrameError):
        FrameWriter(KEY, "alice", 1).frame(FrameType.SEED, cyclic, NOW)


def test_writer_refuses_an_oversized_frame_and_keeps_its_seq() -> None:
    w = FrameWriter(KEY, "alice", 1, max_frame=1000)
    with pytest.raises(FrameError, match="cap"):
        w.frame(FrameType.URL_BATCH, "x" * 1000, NOW)
    assert w.next_seq == 0
    assert len(w.frame(FrameType.URL_BATCH, "x" * 900, NOW)) <= 1004


@pytest.mark.parametrize(
    "call",
    [
        lambda: FrameWriter(KEY, "", 1),
        lambda: FrameWriter(KEY, "a" * (MAX_ID_LEN + 1), 1),
        lambda: FrameWriter(KEY, "alice", -1),
        lambda: FrameWriter(KEY, "alice", 2**63),
        lambda: FrameWriter(KEY, "alice", 1).frame(FrameType.SEED, [], NOW, to="b" * 65),
        lambda: FrameWriter(KEY, "alice", 1).frame(FrameType.SEED, [], math.nan),
        lambda: FrameWriter(KEY, "alice", 1).frame(100, [], NOW),  # type: ignore[arg-type]
    ],
)
def test_writer_argument_checks(call: Callable[[], object]) -> None:
    with pytest.raises(FrameError):
        call()


def test_writer_draws_an_epoch_when_none_is_given() -> None:
    a, b = FrameWriter(KEY, "alice"), FrameWriter(KEY, "alice")
    assert 0 <= a.epoch < 2**63 and a.epoch != b.epoch


# --------------------------------------------------------------------------- fuzzing

plain_keys = st.text(max_size=8) | st.binary(max_size=8) | st.integers(-(2**64), 2**64 - 1)
plain_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20)
)
plain_payloads = st.recursive(
    plain_scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(plain_keys, inner, max_size=5),
    max_leaves=15,
)
chunkings = st.lists(st.integers(1, 64), max_size=30)


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=600),
        # Plausible lengths with random tags and bodies, so the fuzz reaches the tag check.
        st.lists(st.binary(min_size=1, max_size=80), max_size=6).map(
            lambda bodies: b"".join(struct.pack(">I", 32 + len(b)) + bytes(32) + b for b in bodies)
        ),
        st.lists(st.binary(min_size=33, max_size=120), max_size=6).map(
            lambda parts: b"".join(struct.pack(">I", len(p)) + p for p in parts)
        ),
    ),
    chunkings,
)
def test_fuzz_random_bytes_never_raise_and_never_admit(data: bytes, chunks: list[int]) -> None:
    r = reader()
    events = feed(r, data, chunks)
    assert not frames(events)
    assert events[-1] is CLOSED


@st.composite
def mutated_streams(draw: st.DrawFn) -> tuple[bytes, list[Frame]]:
    """Valid frames, then flipped, inserted, deleted, truncated and duplicated bytes."""
    written: list[Frame] = []
    parts: list[bytes] = []
    for sender, epoch in draw(st.lists(st.sampled_from([("alice", 1), ("bob", 2)]), min_size=1,
                                       max_size=3)):  # fmt: skip
        w = FrameWriter(KEY, sender, epoch)
        for _ in range(draw(st.integers(1, 3))):
            kind = draw(st.sampled_from(FrameType))
            payload = draw(plain_payloads)
            written.append(Frame(kind, sender, "", epoch, w.next_seq, NOW, payload))
            parts.append(w.frame(kind, payload, NOW))
    data = bytearray(b"".join(parts))
    for op in draw(st.lists(st.sampled_from(["flip", "insert", "delete", "truncate", "dup",
                                             "replay"]), max_size=4)):  # fmt: skip
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if op == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 8))]
        elif op == "truncate":
            del data[at:]
        elif op == "dup":
            end = draw(st.integers(at, len(data)))
            data[at:at] = data[at:end]
        else:  # the whole frames again, in reverse order
            data += b"".join(reversed(parts))
    return bytes(data), written


@FUZZ
@given(mutated_streams(), chunkings)
def test_fuzz_mutated_frames_admit_nothing_forged_or_repeated(
    stream: tuple[bytes, list[Frame]], chunks: list[int]
) -> None:
    data, written = stream
    r = reader()
    got = frames(feed(r, data, chunks))
    for frame in got:
        assert frame in written
    keys = [(f.sender, f.epoch, f.seq) for f in got]
    assert len(keys) == len(set(keys))


@FUZZ
@given(
    st.lists(st.tuples(st.sampled_from(FrameType), plain_payloads), min_size=1, max_size=4),
    chunkings,
)
def test_fuzz_random_payloads_round_trip(
    sends: list[tuple[FrameType, Any]], chunks: list[int]
) -> None:
    w = FrameWriter(KEY, "alice", 77)
    data = b"".join(w.frame(kind, payload, NOW, to="bob") for kind, payload in sends)
    got = frames(feed(reader(), data, chunks))
    assert [(f.type, f.payload) for f in got] == sends
    assert [f.seq for f in got] == list(range(len(sends)))


hostile_values = st.recursive(
    plain_scalars
    | st.just(cbor2.undefined)
    | st.integers(0, 255).filter(lambda v: v < 20 or v > 31).map(cbor2.CBORSimpleValue)
    | st.floats(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(plain_keys, inner, max_size=4)
        | st.builds(cbor2.CBORTag, st.sampled_from([*wire_codec._BUILTIN_TAGS, 6, 24, 9999]), inner)
    ),
    max_leaves=12,
)


@FUZZ
@given(
    st.one_of(
        st.binary(min_size=1, max_size=300),
        st.lists(hostile_values, max_size=10).map(cbor2.dumps),
        st.tuples(st.lists(hostile_values, max_size=9), st.binary(max_size=3)).map(
            lambda t: cbor2.dumps([PROTOCOL_VERSION, *t[0]]) + t[1]
        ),
        st.tuples(hostile_values, st.integers(0, 2**63 - 1), st.sampled_from(FrameType)).map(
            lambda t: body(payload=t[0], seq=t[1], type_=int(t[2]))
        ),
    )
)
def test_fuzz_hostile_bodies_under_a_valid_tag_never_escape(raw: bytes) -> None:
    # Only a key holder can get a body to the decoder; even so nothing may raise,
    # and whatever is admitted must be plain data a writer could have sent.
    r = reader()
    events = feed(r, signed(raw))
    assert events[-1] is CLOSED and r.close_reason is None
    for frame in frames(events):
        FrameWriter(KEY, frame.sender, frame.epoch).frame(frame.type, frame.payload, NOW)


# ------------------------------------------------------- the first frame of a stranger


@pytest.mark.parametrize("one_byte_at_a_time", [False, True])
def test_until_a_frame_authenticates_only_a_small_frame_is_buffered(
    one_byte_at_a_time: bool,
) -> None:
    big = signed(body(payload="x" * 5000))
    r = reader(first_max_frame=4096)
    events = feed(r, big, [1] * len(big) if one_byte_at_a_time else (), eof=False)
    assert events[-1] is CLOSED and r.close_reason is RejectReason.TOO_LARGE
    # Refused on its length: nothing of the body was kept.
    assert r.buffered == 0


@pytest.mark.parametrize("one_byte_at_a_time", [False, True])
def test_after_an_authentic_frame_the_full_cap_applies(one_byte_at_a_time: bool) -> None:
    small = signed(body(seq=0, payload="hi"))
    big = signed(body(seq=1, payload="x" * 5000))
    data = small + big
    events = feed(
        r := reader(first_max_frame=4096), data, [1] * len(data) if one_byte_at_a_time else ()
    )
    assert [f.payload for f in frames(events)] == ["hi", "x" * 5000]
    assert r.close_reason is None


def test_the_first_frame_cap_is_within_the_frame_cap() -> None:
    with pytest.raises(ValueError):
        reader(max_frame=1000, first_max_frame=2000)
    with pytest.raises(ValueError):
        reader(first_max_frame=10)


def test_another_process_under_our_id_is_heard_only_when_it_names_us() -> None:
    """A data directory copied: another live process under our id tells us its
    outbids in membership frames naming us. Our own frame bounced back (our epoch), a
    frame of an earlier life that named another peer or none (a capture replayed), or
    one of another kind, is refused."""
    guard = ReplayGuard(local_id="bob", local_epoch=1)
    bounced = FrameWriter(KEY, "bob", 1).frame(FrameType.MEMBERSHIP, [], NOW, to="bob")
    to_alice = FrameWriter(KEY, "bob", 2).frame(FrameType.MEMBERSHIP, [], NOW, to="alice")
    to_anyone = FrameWriter(KEY, "bob", 3).frame(FrameType.MEMBERSHIP, [], NOW)
    copy = FrameWriter(KEY, "bob", 4)
    told = copy.frame(FrameType.MEMBERSHIP, [], NOW, to="bob")
    urls = copy.frame(FrameType.URL_ACK, [], NOW, to="bob")  # only membership is told
    events = feed(reader(guard), bounced + to_alice + to_anyone + told + told + urls)
    assert [(f.sender, f.epoch) for f in frames(events)] == [("bob", 4)]
    reflected, replay = RejectReason.REFLECTED, RejectReason.REPLAY
    assert rejections(events) == [reflected] * 3 + [replay, reflected]
