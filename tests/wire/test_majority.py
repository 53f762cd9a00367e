"""The majority base frames (BASE_ASK, BASE): each goes to the wire and back through a
real frame; a malformed one is a WireError and nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from tests.wire.test_leases import through_a_frame
from ubipy.errors import WireError
from ubipy.wire import MAX_BASE, MAX_ID_LEN, BaseAnswer, BaseAsk, FrameType, decode


@pytest.mark.parametrize(
    "message",
    [
        BaseAsk(),
        BaseAnswer((), False),
        BaseAnswer((), False, informed=True),
        BaseAnswer((), False, informed=True, left=True),
        BaseAnswer(("a" * MAX_ID_LEN, "b"), True),
        BaseAnswer(("a", "b", "c"), True, joint=("a", "b")),
        BaseAnswer(tuple(f"{i:016x}" for i in range(MAX_BASE)), True),
    ],
    ids=lambda m: repr(m)[:60],
)
def test_a_base_frame_goes_to_the_wire_and_back(message: BaseAsk | BaseAnswer) -> None:
    frame = through_a_frame(message.KIND, message.to_wire())
    assert decode(frame.type, frame.payload) == message


def test_the_kinds_take_the_numbers_after_the_ip_leases() -> None:
    assert (FrameType.BASE_ASK, FrameType.BASE) == (23, 24)


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        (FrameType.BASE_ASK, []),
        (FrameType.BASE_ASK, None),
        (FrameType.BASE, {}),
        (FrameType.BASE, {"members": [], "holds": 1}),
        (FrameType.BASE, {"members": [], "holds": True, "informed": None}),
        (FrameType.BASE, {"members": "ab", "holds": True}),
        (FrameType.BASE, {"members": [1], "holds": True}),
        (FrameType.BASE, {"members": [""], "holds": True}),
        (FrameType.BASE, {"members": ["a" * (MAX_ID_LEN + 1)], "holds": True}),
        (FrameType.BASE, {"members": ["a"] * (MAX_BASE + 1), "holds": True}),
        (FrameType.BASE, [["a"], True]),
        (FrameType.BASE, {"members": ["a"], "holds": True, "joint": "a"}),
        (FrameType.BASE, {"members": ["a"], "holds": True, "joint": [""]}),
        (FrameType.BASE, {"members": [], "holds": False, "left": 1}),
    ],
)
def test_a_malformed_base_payload_is_a_wire_error(kind: FrameType, payload: Any) -> None:
    with pytest.raises(WireError):
        decode(kind, payload)
    frame = through_a_frame(kind, payload)
    with pytest.raises(WireError):
        decode(frame.type, frame.payload)


def test_left_goes_only_when_true() -> None:
    """A peer of an earlier version reads what it knows of a BASE (a key it does not
    know is never sent for nothing)."""
    assert "left" not in BaseAnswer((), False).to_wire()
    assert BaseAnswer((), False, left=True).to_wire()["left"] is True
