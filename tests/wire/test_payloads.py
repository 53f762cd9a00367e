"""The typed frame payloads: every kind goes to the wire and back unchanged, through
a real frame; anything else a peer could send is a WireError and nothing else."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import cbor2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.wire.framing import read_both_ways
from ubipy.errors import FrameError, WireError
from ubipy.wire import (
    MESSAGE_TYPES,
    BaseAnswer,
    BaseAsk,
    Control,
    Figures,
    Frame,
    FrameReader,
    FrameType,
    FrameWriter,
    Gossip,
    Handoff,
    HandoffAck,
    HandoffDone,
    Hello,
    HostCopy,
    IpGrant,
    IpLease,
    IpRelease,
    Mark,
    MemberRow,
    Message,
    Relay,
    ReplayGuard,
    Replica,
    ReplicaAck,
    Scope,
    ScopeAck,
    Seed,
    SeedAck,
    Status,
    StatusRequest,
    Stop,
    UrlAck,
    UrlBatch,
    decode,
    secret_from,
)
from ubipy.wire.payloads import MAX_FIELDS, MAX_ITEMS, MAX_SCORE, MAX_TAKES
from ubipy.wire.urlframes import MAX_REDIRECTS_CARRIED

KEY = secret_from("payloads")
NOW = 1_700_000_000.0
MARK = Mark(NOW - 1.5, 0.25, 3)

EXAMPLES: list[Message] = [
    Gossip("10.0.0.1:7000", [1, 2, "x"]),
    Gossip("10.0.0.1:7000", [4, []], (11, 200)),
    UrlBatch(7, (("http://a.test/", 0, 0.0, 0), ("http://b.test/x", 3, 0.125, 0)), acks=(1, 2)),
    # The redirects in a row that led to a URL, whatever its score.
    UrlBatch(
        9,
        (
            ("http://a.test/", 0, 0.0, 0),
            ("http://b.test/", 2, 0.0, 20),
            ("http://c.test/", 0, 0.5, 1),
        ),
    ),
    UrlBatch(8, ()),
    UrlAck((1, 2, 3)),
    Seed(("http://a.test/",)),
    SeedAck(3, 1, 1, (("ftp://x", "scheme"),)),
    SeedAck(error="disk full"),
    StatusRequest(cluster=True),
    StatusRequest(),
    Status(
        (MemberRow("a", "10.0.0.1:7000", "alive"),),
        ({"peer_id": "a", "pages": 3, "pages_per_second": 1.5, "storage_error": None},),
    ),
    # Fingerprints are signed 64-bit integers, the lowest and highest included.
    Handoff(4, "a.test", (("http://a.test/", 1, 2.5),), (-(2**63), -12, 11, 2**63 - 1), MARK),
    Handoff(5, "a.test", (), (), None),
    HandoffAck(4),
    HandoffAck(4, refused=True),
    Scope(("a.test", "b.test")),
    Scope(("a.test",), ("www.a.test", "10.0.0.5:8080")),
    ScopeAck(2**63 - 1),
    HandoffDone("ring-key"),
    HandoffDone("ring-key", token=7),
    HandoffDone("", token=2**62, ask=True),
    HandoffDone("a,b", token=3, left=(("c", "a,b"), ("d", "a"))),
    Replica(
        (HostCopy("a.test", (("http://a.test/", 0, 0.0),), (-5,), MARK), HostCopy("b.test", (), ()))
    ),
    Replica((HostCopy("c.test", (), (1,)),), seq=9),
    ReplicaAck(9),
    Control("127.0.0.1:8080", "10.0.0.1:7000"),
    Figures({"pages": 3, "idle": True}),
    Stop(),
    Hello(),
    IpLease(3, "11.1.1.1"),
    IpGrant(3, "11.1.1.1", True),
    IpGrant(4, "2001:db8::1", False, 0.75),
    IpRelease(3, "11.1.1.1"),
    BaseAsk(),
    BaseAnswer(("a", "b"), True),
    Relay("b", b"\x00\x00\x00\x21" + bytes(33)),
    Relay("b", b"frame", 1),
]


def test_every_frame_kind_but_the_reserved_one_has_a_message() -> None:
    assert set(MESSAGE_TYPES) == set(FrameType) - {FrameType.ERROR}
    assert {type(m) for m in EXAMPLES} == set(MESSAGE_TYPES.values())


def through_a_frame(message: Message) -> Frame:
    data = FrameWriter(KEY, "a").frame(message.KIND, message.to_wire(), NOW)
    reader = FrameReader(KEY, ReplayGuard(local_id="b"))
    reader.receive_data(data)
    frame = reader.next_event(NOW)
    assert isinstance(frame, Frame)
    return frame


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_a_message_goes_to_the_wire_and_back_unchanged(message: Message) -> None:
    frame = through_a_frame(message)
    assert frame.type is message.KIND
    assert decode(frame.type, frame.payload) == message


def test_the_reserved_error_kind_is_refused() -> None:
    with pytest.raises(WireError, match="ERROR"):
        decode(FrameType.ERROR, {})


@pytest.mark.parametrize(
    ("kind", "payload"),
    [
        (FrameType.MEMBERSHIP, {"msg": []}),
        # Addresses the receiver would dial: a port no socket takes is refused here,
        # not raised by the socket layer in a task the sender chose.
        (FrameType.MEMBERSHIP, {"from": "127.0.0.1:" + "9" * 30, "msg": {}}),
        (FrameType.MEMBERSHIP, {"from": "127.0.0.1:65536", "msg": {}}),
        (FrameType.MEMBERSHIP, {"from": "127.0.0.1:0", "msg": {}}),
        (FrameType.MEMBERSHIP, {"from": ":7000", "msg": {}}),
        (FrameType.CONTROL, {"control": "127.0.0.1:8080", "peer": "127.0.0.1:" + "9" * 30}),
        (FrameType.CONTROL, {"control": "127.0.0.1:99999", "peer": "127.0.0.1:3"}),
        (FrameType.URL_BATCH, {"id": -1, "urls": []}),
        (FrameType.URL_BATCH, {"id": 1, "urls": [["http://a.test/"]]}),
        (FrameType.URL_BATCH, {"id": 1, "urls": [["http://a.test/", -1]]}),
        (FrameType.URL_BATCH, {"id": 1, "urls": [[1, 2]]}),
        (FrameType.URL_BATCH, {"id": 1, "urls": [["http://a.test/", 0, -1.0]]}),
        (FrameType.URL_BATCH, {"id": 1, "urls": [["http://a.test/", 0, float("nan")]]}),
        (FrameType.URL_BATCH, {"id": 1, "urls": [["http://a.test/", 0, 1e308]]}),
        (FrameType.URL_BATCH, {"id": 1, "urls": [["http://a.test/", 0, "1"]]}),
        (FrameType.URL_BATCH, {"id": 1, "urls": [["http://a.test/", 0, 1.0, 2]]}),
        (FrameType.URL_BATCH, {"id": 1, "urls": "nope"}),
        (FrameType.URL_BATCH, {"id": 1, "urls": [["u", 0]] * 10_001}),
        (FrameType.URL_BATCH, {"id": 1, "urls": [], "acks": ["1"]}),
        # The redirects in a row that led to a URL: [index, count] pairs, each count
        # an integer up to MAX_REDIRECTS_CARRIED, each index a URL's of the batch, once.
        *(
            (FrameType.URL_BATCH, {"id": 1, "urls": [["http://a.test/", 0]], "redirects": led})
            for led in (
                [[0, -1]],
                [[0, MAX_REDIRECTS_CARRIED + 1]],
                [[0, 2**64]],
                [[0, "3"]],
                [[0, 3.0]],
                [[0, True]],
                [[0, None]],
                [[1, 3]],
                [[-1, 3]],
                [[0, 3], [0, 4]],
                [[0]],
                [[0, 3, 1]],
                [0, 3],
                {0: 3},
                None,
                "0:3",
            )
        ),
        (FrameType.URL_ACK, {"ids": [True]}),
        (FrameType.SEED, {"urls": "http://a.test/"}),
        (FrameType.SEED_ACK, {"offered": 1}),
        (FrameType.STATUS, {"members": [{"id": "a"}], "peers": []}),
        (FrameType.STATUS, {"members": [], "peers": [{"x": {"nested": 1}}]}),
        (FrameType.HANDOFF, {"id": 1, "host": 2, "pending": [], "done": []}),
        (FrameType.HANDOFF, {"id": 1, "host": "a", "pending": [], "done": [], "mark": "soon"}),
        (FrameType.HANDOFF, {"id": 1, "host": "a", "pending": [], "done": [2**63]}),
        (FrameType.HANDOFF_ACK, {}),
        (FrameType.SCOPE, ["a", 1]),
        (FrameType.SCOPE_ACK, {"digest": -1}),
        (FrameType.MEMBERSHIP, {"from": "10.0.0.1:7000", "msg": [4, []], "takes": 11}),
        (FrameType.MEMBERSHIP, {"from": "10.0.0.1:7000", "msg": [4, []], "takes": [11] * 33}),
        (FrameType.MEMBERSHIP, {"from": "10.0.0.1:7000", "msg": [4, []], "takes": ["SCOPE_ACK"]}),
        (FrameType.SCOPE_ACK, []),
        (FrameType.HANDOFF_DONE, {}),
        (FrameType.REPLICA, {"hosts": "x"}),
        (FrameType.REPLICA, {"hosts": [["h.test", [["http://h.test/", 0]]]]}),
        (FrameType.REPLICA, {"hosts": [[1, [], []]]}),
        (FrameType.REPLICA, {"hosts": [["h.test", [], ["1"]]]}),
        # Politeness marks that would hold a host for ever, or are not marks at all.
        (FrameType.REPLICA, {"hosts": [["h.test", [], [], [math.inf, 1.0, 0]]]}),
        (FrameType.REPLICA, {"hosts": [["h.test", [], [], [1.0, -1.0, 0]]]}),
        (FrameType.REPLICA, {"hosts": [["h.test", [], [], [1.0, 1e9, 0]]]}),
        (FrameType.REPLICA, {"hosts": [["h.test", [], [], [1.0, 1.0]]]}),
        (FrameType.REPLICA, {"hosts": [["h.test", [], [], [1.0, 1.0, True]]]}),
        # A count the receiver's shard could not store once it grew by a page.
        (FrameType.REPLICA, {"hosts": [["h.test", [], [], [1.0, 1.0, 2**63 - 1]]]}),
        (
            FrameType.HANDOFF,
            {"id": 1, "host": "a", "pending": [], "done": [], "mark": [1.0, 1.0, 10**13]},
        ),
        (FrameType.CONTROL, {"control": "127.0.0.1:8080"}),
        (FrameType.CONTROL, {"control": 5, "peer": "127.0.0.1:3"}),
        (FrameType.FIGURES, [1, 2]),
        (FrameType.FIGURES, {"pages": [1]}),
        (FrameType.FIGURES, {1: 2}),
        (FrameType.FIGURES, {f"k{i}": i for i in range(101)}),
        (FrameType.STOP, [1]),
        (FrameType.HANDOFF_DONE, {"ring": "a", "left": ["c", "a"]}),
        (FrameType.HANDOFF_DONE, {"ring": "a", "left": {"c": 1}}),
        (FrameType.HANDOFF_DONE, {"ring": "a", "left": {f"p{i}": "a" for i in range(65)}}),
        (FrameType.HANDOFF_DONE, {"ring": "a", "left": {"p" * 65: ""}}),
        (FrameType.HANDOFF_DONE, {"ring": "a", "left": {"": ""}}),
    ],
)
def test_a_malformed_payload_is_a_wire_error(kind: FrameType, payload: Any) -> None:
    with pytest.raises(WireError):
        decode(kind, payload)


plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**64), 2**64 - 1)
    | st.floats()
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(max_size=8) | st.integers(0, 9), inner, max_size=5)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from(sorted(MESSAGE_TYPES)), payload=plain)
def test_whatever_a_peer_sends_decodes_or_is_a_wire_error(kind: FrameType, payload: Any) -> None:
    try:
        message = decode(kind, payload)
    except WireError:
        return
    # Compared as bytes: a NaN a peer may send is not equal to itself.
    again = decode(kind, message.to_wire())
    assert cbor2.dumps(again.to_wire()) == cbor2.dumps(message.to_wire())


def test_a_score_too_large_to_add_up_is_refused_and_never_sent() -> None:
    """Scores are added up (a link found again brings its cash, a page's links share
    it): 1e308 twice was infinity, and a batch carrying a link's share of it was
    refused for ever. Such a score is refused; one a peer has is sent capped."""
    huge = UrlBatch(1, (("http://a.test/", 0, 1e300, 0), ("http://a.test/b", 0, 0.5, 0)))
    again = decode(FrameType.URL_BATCH, cbor2.loads(cbor2.dumps(huge.to_wire())))
    assert isinstance(again, UrlBatch)
    assert [score for _, _, score, _ in again.urls] == [MAX_SCORE, 0.5]


def test_a_batch_says_how_many_redirects_led_to_a_url_only_when_any_did() -> None:
    """A redirect is no link hop, so the peer that owns a redirect's target counts the
    chain on from what the batch says (counted afresh, two hosts of two peers
    redirecting to each other were followed for ever). A link costs no byte: the
    payload is as before the count came. The count is a field of its own, not a fourth
    item of the URL's entry: a peer of an earlier version ignores it, where it would
    refuse the batch, for ever."""
    links = UrlBatch(3, (("http://a.test/", 0, 0.0, 0), ("http://b.test/", 1, 0.5, 0)), (2,))
    assert links.to_wire() == {
        "id": 3,
        "urls": [["http://a.test/", 0], ["http://b.test/", 1, 0.5]],
        "acks": [2],
    }
    urls = (
        ("http://a.test/", 0, 0.0, 0),
        ("http://b.test/", 1, 0.5, 7),
        ("http://c.test/", 2, 0.0, 1),
    )
    led = UrlBatch(4, urls)
    wire = led.to_wire()
    assert wire["urls"] == [
        ["http://a.test/", 0],
        ["http://b.test/", 1, 0.5],
        ["http://c.test/", 2],
    ]
    assert wire["redirects"] == [[1, 7], [2, 1]]
    older = {"id": 4, "urls": wire["urls"], "acks": []}  # from a peer of an earlier version
    assert decode(FrameType.URL_BATCH, older) == UrlBatch(4, tuple((*u[:3], 0) for u in urls))
    # Whole, and fed to a reader one byte at a time.
    assert read_both_ways(FrameType.URL_BATCH, wire) == (led, led)


def test_a_count_of_redirects_past_what_a_receiver_takes_is_sent_capped() -> None:
    many = UrlBatch(1, (("http://a.test/", 0, 0.0, 10**6),))
    again = decode(FrameType.URL_BATCH, cbor2.loads(cbor2.dumps(many.to_wire())))
    assert isinstance(again, UrlBatch)
    assert again.urls == (("http://a.test/", 0, 0.0, MAX_REDIRECTS_CARRIED),)


def test_a_scope_of_roots_alone_is_written_and_read_as_before_seeds_hosts_came() -> None:
    """A peer of an earlier version reads a bare list of roots (a rolling upgrade)."""
    assert Scope(("a.test", "b.test")).to_wire() == ["a.test", "b.test"]
    assert Scope.from_wire(["a.test", "b.test"]) == Scope(("a.test", "b.test"))
    assert Scope.from_wire([]) == Scope(())


def test_a_membership_frame_says_what_its_sender_takes_only_when_it_takes_anything() -> None:
    """A peer of an earlier version sends no ``takes`` (read as nothing) and ignores it."""
    assert Gossip("10.0.0.1:7000", [4, []]).to_wire() == {"from": "10.0.0.1:7000", "msg": [4, []]}
    older = {"from": "10.0.0.1:7000", "msg": [4, []]}
    assert decode(FrameType.MEMBERSHIP, older) == Gossip("10.0.0.1:7000", [4, []], ())


def test_a_scope_frame_is_named_by_what_it_carries() -> None:
    """SCOPE carries no number (an earlier version refuses a new field), so its
    acknowledgement names it by a digest: the same for the same roots and hosts, on
    the receiver as on the sender, and another for any other."""
    sent = Scope(("a.test", "b.test"), ("www.a.test",))
    received = decode(FrameType.SCOPE, cbor2.loads(cbor2.dumps(sent.to_wire())))
    assert isinstance(received, Scope) and received.digest == sent.digest
    others = [
        Scope(("a.test", "b.test")),
        Scope(("a.test",), ("b.test", "www.a.test")),
        Scope(("a.test\nb.test",), ("www.a.test",)),
        Scope(("b.test", "a.test"), ("www.a.test",)),
    ]
    assert len({sent.digest, *(o.digest for o in others)}) == 5
    assert all(0 <= o.digest < 2**63 for o in [sent, *others])


_URL = ("http://a.test/", 1, 0.0)
_BATCH_URL = ("http://a.test/", 1, 0.0, 0)
_ROW = MemberRow("p", "10.0.0.1:7000", "alive")


@pytest.mark.parametrize(
    ("make", "limit"),
    [
        pytest.param(lambda n: UrlBatch(1, (_BATCH_URL,) * n), MAX_ITEMS, id="batch-urls"),
        pytest.param(lambda n: UrlBatch(1, (), tuple(range(n))), MAX_ITEMS, id="batch-acks"),
        pytest.param(lambda n: UrlAck(tuple(range(n))), MAX_ITEMS, id="ack-ids"),
        pytest.param(lambda n: Handoff(1, "a.test", (_URL,) * n, ()), MAX_ITEMS, id="handoff-urls"),
        pytest.param(
            lambda n: Handoff(1, "a.test", (), tuple(range(n))), MAX_ITEMS, id="handoff-done"
        ),
        pytest.param(
            lambda n: Replica((HostCopy("a.test", (), ()),) * n), MAX_ITEMS, id="replica-hosts"
        ),
        pytest.param(
            lambda n: Replica((HostCopy("a.test", (_URL,) * n, ()),)), MAX_ITEMS, id="replica-urls"
        ),
        pytest.param(
            lambda n: Replica((HostCopy("a.test", (), tuple(range(n))),)),
            MAX_ITEMS,
            id="replica-done",
        ),
        pytest.param(lambda n: Status((_ROW,) * n, ()), MAX_ITEMS, id="status-members"),
        pytest.param(lambda n: Status((), ({},) * n), MAX_ITEMS, id="status-peers"),
        pytest.param(
            lambda n: Status((), ({f"f{i}": i for i in range(n)},)), MAX_FIELDS, id="status-fields"
        ),
        pytest.param(lambda n: Figures({f"f{i}": i for i in range(n)}), MAX_FIELDS, id="figures"),
        pytest.param(
            lambda n: Gossip("10.0.0.1:7000", [], tuple(range(n))), MAX_TAKES, id="gossip-takes"
        ),
        pytest.param(lambda n: Scope(("a.test",) * n), MAX_ITEMS, id="scope-roots"),
        pytest.param(lambda n: Scope(("a.test",), ("a.test",) * n), MAX_ITEMS, id="scope-seeds"),
    ],
)
def test_a_sender_refuses_to_write_what_its_receivers_refuse(
    make: Callable[[int], Message], limit: int
) -> None:
    """A batch of more URLs than a receiver takes went out, was refused, and was sent
    again every 2 s for ever: now the sender's mistake fails where it is made."""
    most = make(limit)
    assert decode(most.KIND, cbor2.loads(cbor2.dumps(most.to_wire()))) == most
    with pytest.raises(FrameError, match=f"more than a receiver takes \\({limit}\\)"):
        make(limit + 1).to_wire()
