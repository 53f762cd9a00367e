"""Membership messages under hostile input: any value, well-formed messages with a
few nodes damaged, and arbitrary bytes where a membership frame's message goes.
``message_from_wire`` builds a message or raises WireError; what it builds survives
the wire unchanged, and a membership fed such messages keeps running."""

from __future__ import annotations

import random
from typing import Any

import cbor2
from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.common import (
    KEY,
    NOW,
    RECEIVER,
    any_values,
    body_with_raw_payload,
    check_typed,
    fuzz,
    mutated,
    mutated_bytes,
    same,
    signed,
    wire_values,
)
from ubipy.errors import WireError
from ubipy.membership import (
    LIVE_STATES,
    Ack,
    Gossip,
    Leave,
    Member,
    MembershipConfig,
    MemberState,
    Message,
    Ping,
    PingReq,
    PushPull,
    Update,
    message_from_wire,
)
from ubipy.membership.machine import Membership
from ubipy.wire import Frame, FrameType, Rejected, ReplayGuard
from ubipy.wire.reader import FrameReader

SELF = "me"
ids = st.sampled_from([SELF, "a", "b", "peer-ü"]) | st.text(min_size=1, max_size=64).filter(
    str.isprintable
)
addresses = st.builds(
    "{}:{}".format,
    st.sampled_from(["a.test", "10.0.0.1", "[::1]", "[fe80::1%eth0]"])
    | st.from_regex(r"[a-z0-9.\-]{1,40}", fullmatch=True),
    st.integers(1, 65535),
)
states = st.sampled_from(MemberState)
incarnations = st.sampled_from([0, 1, 2**63 - 1]) | st.integers(0, 2**63 - 1)
seqs = st.integers(0, 2**32 - 1)
updates = st.lists(st.builds(Update, ids, addresses, states, incarnations, ids), max_size=6).map(
    tuple
)
members = st.lists(st.builds(Member, ids, addresses, states, incarnations), max_size=6).map(
    lambda ms: tuple({m.id: m for m in ms}.values())
)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Ping, seqs, ids, updates),
    st.builds(Ack, seqs, updates),
    st.builds(PingReq, seqs, ids, addresses, updates),
    st.builds(Gossip, updates),
    st.builds(PushPull, members, st.booleans()),
    st.builds(Leave, ids, addresses, incarnations),
)


def parses_or_refuses(obj: Any) -> Message | None:
    try:
        message = message_from_wire(obj)
    except WireError:
        return None
    assert same(message_from_wire(message.to_wire()), message)
    return message


@fuzz(60)
@given(any_values)
# Found by this fuzz: the range error formatted the integer, and str() of one past
# 4300 digits raised ValueError instead of the WireError.
@example([pow(-2, 20001)])
@example([1, pow(2, 20001), "a", []])
def test_any_value_is_a_message_or_a_wire_error(obj: Any) -> None:
    parses_or_refuses(obj)


@fuzz(50)
@given(
    st.integers(0, 7).flatmap(
        lambda code: st.lists(any_values, max_size=5).map(lambda rest: [code, *rest])
    )
)
def test_any_fields_behind_a_type_code_are_a_message_or_a_wire_error(obj: list[Any]) -> None:
    parses_or_refuses(obj)


@fuzz(60)
@given(messages, st.data())
def test_a_damaged_message_is_a_message_or_a_wire_error(
    message: Message, data: st.DataObject
) -> None:
    wire = message.to_wire()
    assert message_from_wire(wire) == message
    parses_or_refuses(data.draw(mutated(wire, any_values)))


def _gossip_payload(address: bytes, raw: bytes) -> bytes:
    """The CBOR of {"from": address, "msg": <raw bytes, whatever they are>}."""
    return b"\xa2" + cbor2.dumps("from") + address + cbor2.dumps("msg") + raw


@st.composite
def message_bytes(draw: st.DrawFn) -> bytes:
    how = draw(st.sampled_from(["bytes", "value", "damaged"]))
    if how == "bytes":
        return draw(st.binary(min_size=1, max_size=200))
    if how == "value":
        return cbor2.dumps(draw(wire_values))
    return draw(mutated_bytes(cbor2.dumps(draw(messages).to_wire())))


@fuzz(50)
@given(st.sampled_from([cbor2.dumps("a.test:7000"), cbor2.dumps(7), b"\xf6"]), message_bytes())
def test_any_bytes_in_a_membership_frame_are_taken_or_refused(address: bytes, raw: bytes) -> None:
    body = body_with_raw_payload(int(FrameType.MEMBERSHIP), _gossip_payload(address, raw))
    reader = FrameReader(KEY, ReplayGuard(local_id=RECEIVER))
    reader.receive_data(signed(body))
    event = reader.next_event(NOW)
    assert isinstance(event, Frame | Rejected)
    if isinstance(event, Frame):
        check_typed(event)


@fuzz(25)
@given(st.lists(st.tuples(addresses, messages, st.floats(0, 30)), max_size=12))
def test_a_membership_fed_hostile_messages_keeps_running_and_stays_alive(
    received: list[tuple[str, Message, float]],
) -> None:
    # Well-formed but hostile: rumours of our own death, pushes of strangers, acks
    # for pings never sent. Whatever the order, nothing raises and this peer
    # refutes what is said against it.
    m = Membership(SELF, "me.test:7000", MembershipConfig(), random.Random(0))
    now = 0.0
    for address, message, wait in received:
        now += wait
        m.receive(now, address, message)
        m.tick(now)
    me = m.member(SELF)
    assert me is not None and me.state in LIVE_STATES
