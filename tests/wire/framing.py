"""A payload through the frame layer, read whole and fed one byte at a time."""

from __future__ import annotations

from typing import Any

from ubipy.wire import (
    Frame,
    FrameReader,
    FrameType,
    FrameWriter,
    Message,
    ReplayGuard,
    decode,
    secret_from,
)

KEY = secret_from("framing")
NOW = 1_700_000_000.0


def read_both_ways(kind: FrameType, wire: Any) -> tuple[Message, Message]:
    """What a reader makes of ``wire`` framed as ``kind``: fed whole, and fed a byte at
    a time (then the frame comes with the last byte, and only then)."""
    data = FrameWriter(KEY, "a").frame(kind, wire, NOW)
    whole = FrameReader(KEY, ReplayGuard(local_id="b"))
    whole.receive_data(data)
    frame = whole.next_event(NOW)
    assert isinstance(frame, Frame)
    bytewise = FrameReader(KEY, ReplayGuard(local_id="b"))
    events = []
    for i in range(len(data)):
        bytewise.receive_data(data[i : i + 1])
        events.append(bytewise.next_event(NOW))
    frames = [e for e in events if isinstance(e, Frame)]
    assert len(frames) == 1 and events[-1] is frames[0]
    return decode(frame.type, frame.payload), decode(frames[0].type, frames[0].payload)
