"""The IP lease frames (IP_LEASE, IP_GRANT, IP_RELEASE): each goes to the wire and back
through a real frame; a malformed one, alone or inside an authentic frame, is a
WireError and nothing else."""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.wire.framing import read_both_ways
from ubipy.errors import WireError
from ubipy.wire import (
    Frame,
    FrameReader,
    FrameType,
    FrameWriter,
    IpGrant,
    IpLease,
    IpRelease,
    ReplayGuard,
    decode,
    secret_from,
)
from ubipy.wire.leases import MAX_ADDRESS_LEN

KEY = secret_from("leases")
NOW = 1_700_000_000.0


def through_a_frame(kind: FrameType, payload: Any) -> Frame:
    data = FrameWriter(KEY, "a").frame(kind, payload, NOW)
    reader = FrameReader(KEY, ReplayGuard(local_id="b"))
    reader.receive_data(data)
    frame = reader.next_event(NOW)
    assert isinstance(frame, Frame)
    return frame


@pytest.mark.parametrize(
    "message",
    [
        IpLease(1, "11.1.1.1"),
        IpLease(2**63 - 1, "2001:db8::1"),
        IpLease(3, "11.1.1.1", run=2**62 - 1),
        IpLease(4, "11.1.1.1", run=0, held=True),
        IpGrant(1, "11.1.1.1", True),
        IpGrant(2, "11.1.1.1", False, 12.5),
        IpRelease(1, "a" * MAX_ADDRESS_LEN),
        IpRelease(3, "11.1.1.1", 30.0),
    ],
    ids=repr,
)
def test_a_lease_frame_goes_to_the_wire_and_back(message: IpLease | IpGrant | IpRelease) -> None:
    frame = through_a_frame(message.KIND, message.to_wire())
    assert decode(frame.type, frame.payload) == message


def test_a_release_without_a_wait_is_the_frame_older_peers_send_and_read() -> None:
    """A release says the server's wait only when there is one: an older peer reads
    ``id`` and ``address`` alone, and sends no ``wait``."""
    assert IpRelease(1, "11.1.1.1").to_wire() == {"id": 1, "address": "11.1.1.1"}
    older = {"id": 1, "address": "11.1.1.1"}
    assert decode(FrameType.IP_RELEASE, older) == IpRelease(1, "11.1.1.1", 0.0)


@pytest.mark.parametrize(
    "lease",
    [IpLease(7, "11.1.1.1", run=2**61 + 5), IpLease(7, "11.1.1.1", run=9, held=True)],
    ids=repr,
)
def test_a_lease_s_run_and_renewal_read_whole_and_a_byte_at_a_time(lease: IpLease) -> None:
    assert read_both_ways(lease.KIND, lease.to_wire()) == (lease, lease)


def test_an_ask_without_a_run_is_the_frame_older_peers_send_and_read() -> None:
    """``run`` and ``held`` go only when set: a peer of an earlier version sends
    neither (read as no run, no renewal), and reads ``id`` and ``address`` alone of a
    frame that has them, as a key it does not know is ignored here too."""
    assert IpLease(1, "11.1.1.1").to_wire() == {"id": 1, "address": "11.1.1.1"}
    assert IpLease(1, "11.1.1.1", run=5).to_wire() == {"id": 1, "address": "11.1.1.1", "run": 5}
    older = {"id": 1, "address": "11.1.1.1"}
    assert decode(FrameType.IP_LEASE, older) == IpLease(1, "11.1.1.1", None, False)
    later = {"id": 1, "address": "11.1.1.1", "run": 5, "held": True, "what": [1, "x"]}
    assert decode(FrameType.IP_LEASE, later) == IpLease(1, "11.1.1.1", 5, True)


def test_the_kinds_take_the_numbers_after_hello() -> None:
    assert (FrameType.IP_LEASE, FrameType.IP_GRANT, FrameType.IP_RELEASE) == (20, 21, 22)


MALFORMED: list[tuple[FrameType, Any]] = [
    (FrameType.IP_LEASE, []),
    (FrameType.IP_LEASE, "11.1.1.1"),
    (FrameType.IP_LEASE, {"address": "11.1.1.1"}),
    (FrameType.IP_LEASE, {"id": 1}),
    (FrameType.IP_LEASE, {"id": -1, "address": "11.1.1.1"}),
    (FrameType.IP_LEASE, {"id": 2**63, "address": "11.1.1.1"}),
    (FrameType.IP_LEASE, {"id": True, "address": "11.1.1.1"}),
    (FrameType.IP_LEASE, {"id": 1.0, "address": "11.1.1.1"}),
    (FrameType.IP_LEASE, {"id": 1, "address": ""}),
    (FrameType.IP_LEASE, {"id": 1, "address": "a" * (MAX_ADDRESS_LEN + 1)}),
    (FrameType.IP_LEASE, {"id": 1, "address": b"11.1.1.1"}),
    (FrameType.IP_LEASE, {"id": 1, "address": ["11.1.1.1"]}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "run": -1}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "run": 2**63}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "run": 2**64 - 1}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "run": 10**400}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "run": 1.0}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "run": "1"}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "run": True}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "run": None}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "run": [1]}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "held": 1}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "held": "true"}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "held": None}),
    (FrameType.IP_LEASE, {"id": 1, "address": "11.1.1.1", "run": 1, "held": 0}),
    (FrameType.IP_GRANT, {"id": 1, "address": "11.1.1.1"}),
    (FrameType.IP_GRANT, {"id": 1, "address": "11.1.1.1", "granted": 1}),
    (FrameType.IP_GRANT, {"id": 1, "address": "11.1.1.1", "granted": None}),
    (FrameType.IP_GRANT, {"id": 1, "granted": True}),
    (FrameType.IP_GRANT, {"id": 1, "address": "11.1.1.1", "granted": False, "wait": -0.5}),
    (FrameType.IP_GRANT, {"id": 1, "address": "11.1.1.1", "granted": False, "wait": math.inf}),
    (FrameType.IP_GRANT, {"id": 1, "address": "11.1.1.1", "granted": False, "wait": math.nan}),
    (FrameType.IP_GRANT, {"id": 1, "address": "11.1.1.1", "granted": False, "wait": 10**400}),
    (FrameType.IP_GRANT, {"id": 1, "address": "11.1.1.1", "granted": False, "wait": 1e6}),
    (FrameType.IP_GRANT, {"id": 1, "address": "11.1.1.1", "granted": False, "wait": "1"}),
    (FrameType.IP_RELEASE, {}),
    (FrameType.IP_RELEASE, {"id": "1", "address": "11.1.1.1"}),
    (FrameType.IP_RELEASE, {"id": 1, "address": 11}),
    (FrameType.IP_RELEASE, [1, "11.1.1.1"]),
    (FrameType.IP_RELEASE, {"id": 1, "address": "11.1.1.1", "wait": -1}),
    (FrameType.IP_RELEASE, {"id": 1, "address": "11.1.1.1", "wait": math.nan}),
    (FrameType.IP_RELEASE, {"id": 1, "address": "11.1.1.1", "wait": 1e6}),
    (FrameType.IP_RELEASE, {"id": 1, "address": "11.1.1.1", "wait": "1"}),
]


@pytest.mark.parametrize(("kind", "payload"), MALFORMED)
def test_a_malformed_lease_payload_is_a_wire_error(kind: FrameType, payload: Any) -> None:
    with pytest.raises(WireError):
        decode(kind, payload)


# A bignum is not plain data: no writer puts one in a frame (the reader refuses it too).
IN_A_FRAME = [
    (kind, payload)
    for kind, payload in MALFORMED
    if not (isinstance(payload, dict) and 10**400 in (payload.get("wait"), payload.get("run")))
]


@pytest.mark.parametrize(("kind", "payload"), IN_A_FRAME)
def test_an_authentic_frame_with_a_malformed_lease_is_a_wire_error(
    kind: FrameType, payload: Any
) -> None:
    """The frame itself is admitted (its payload is plain data): what it carries is
    refused as it is decoded, as the links do before any handler sees it."""
    frame = through_a_frame(kind, payload)
    with pytest.raises(WireError):
        decode(frame.type, frame.payload)


def test_a_message_cannot_be_built_malformed() -> None:
    with pytest.raises(WireError):
        IpLease(1, "")
    with pytest.raises(WireError):
        IpRelease(1, "x" * (MAX_ADDRESS_LEN + 1))
    with pytest.raises(WireError):
        IpGrant(1, "11.1.1.1", False, -1.0)
    with pytest.raises(WireError):
        IpGrant(1, "11.1.1.1", False, math.nan)
    with pytest.raises(WireError):
        IpLease(1, "11.1.1.1", run=-1)
    with pytest.raises(WireError):
        IpLease(1, "11.1.1.1", run=2**63)
