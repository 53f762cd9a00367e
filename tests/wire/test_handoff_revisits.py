"""HANDOFF's ``revisits``: under --recrawl a host handed to a new owner carries its
pages' revisit state. An optional field: sent only when there is any, a frame
without it reads as before, a peer of an earlier version (which reads the fields it
knows) takes the rest as it did; and every value in it is checked (a malformed one
is a WireError, never a crash)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import cbor2
import pytest

from tests.wire.framing import read_both_ways
from ubipy.errors import FrameError, WireError
from ubipy.wire import (
    MAX_ITEMS,
    MAX_REVISIT_URL,
    MAX_VALIDATOR,
    MAX_WALL,
    FrameType,
    Handoff,
    Mark,
    Revisit,
    decode,
)

NOW = 1_700_000_000.0
MARK = Mark(NOW - 1.5, 0.25, 3)
PAGE = Revisit(
    "http://a.test/p1.html",
    2,
    5,
    2,
    3600.5,
    NOW - 60.0,
    NOW + 540.0,
    0.25,
    '"v1"',
    "Mon, 01 Jan 2024 00:00:00 GMT",
    "0123456789abcdef0123456789abcdef",
    4,
    3,
    2,
    1,
)
# A page of a sitemap, never seen to change, with no validators.
SITEMAP = Revisit("http://a.test/sitemap.xml", 1_000_000, 1, 0, 0.0, NOW, NOW + 60.0)
FRAME = Handoff(7, "a.test", (("http://a.test/p2.html", 1, 0.0),), (11, -12), MARK, (PAGE, SITEMAP))


def _good() -> list[Any]:
    return PAGE.to_wire()


def _with(index: int, value: Any) -> list[Any]:
    entry = _good()
    entry[index] = value
    return entry


def _frame_with(revisits: Any) -> dict[str, Any]:
    return {"id": 1, "host": "a.test", "pending": [], "done": [], "mark": None, **revisits}


def test_a_hand_off_with_revisits_goes_to_the_wire_and_back_unchanged() -> None:
    assert read_both_ways(FrameType.HANDOFF, FRAME.to_wire()) == (FRAME, FRAME)


def test_the_field_is_sent_only_when_there_are_revisits_and_read_as_none_when_absent() -> None:
    """A frame without revisits is byte for byte what it was before they came; one with
    them is that and one field more, which a peer of an earlier version (it reads the
    fields it knows by name) leaves: it takes the host as it did."""
    bare = Handoff(7, "a.test", FRAME.pending, FRAME.done, MARK)
    assert bare.to_wire() == {
        "id": 7,
        "host": "a.test",
        "pending": [["http://a.test/p2.html", 1]],
        "done": [11, -12],
        "mark": MARK.to_wire(),
    }
    wire = FRAME.to_wire()
    assert {k: v for k, v in wire.items() if k != "revisits"} == bare.to_wire()
    assert wire["revisits"] == [PAGE.to_wire(), SITEMAP.to_wire()]
    # From a peer of an earlier version: no revisits.
    assert decode(FrameType.HANDOFF, bare.to_wire()) == bare
    assert bare.revisits == ()


def test_a_later_versions_items_after_a_revisits_own_are_ignored() -> None:
    """A later version may say more of a page, after what this one reads: ignored,
    not refused (refused, the whole hand-off would be, again and again)."""
    entry = [*_good(), "more", [1, 2]]
    again = decode(FrameType.HANDOFF, _frame_with({"revisits": [entry]}))
    assert isinstance(again, Handoff) and again.revisits == (PAGE,)


def test_an_earlier_versions_revisit_has_no_failures() -> None:
    """A peer before the failure counts sends thirteen items: the page comes with none,
    and an earlier peer reads the first thirteen of this one's (the test above)."""
    again = decode(FrameType.HANDOFF, _frame_with({"revisits": [_good()[:13]]}))
    assert isinstance(again, Handoff)
    assert again.revisits == (replace(PAGE, failures=0, missing=0),)


def test_times_and_counts_at_their_bounds_are_taken() -> None:
    edge = Revisit(
        "h://" + "x" * (MAX_REVISIT_URL - 4),
        1_000_000,
        10**12,
        10**12,
        MAX_WALL,
        0.0,
        MAX_WALL,
        1e12,
        "e" * MAX_VALIDATOR,
        None,
        None,
        10**12,
        10**12,
    )
    payload = cbor2.loads(cbor2.dumps(_frame_with({"revisits": [edge.to_wire()]})))
    again = decode(FrameType.HANDOFF, payload)
    assert isinstance(again, Handoff) and again.revisits == (edge,)


@pytest.mark.parametrize(
    "revisits",
    [
        None,
        "x",
        {"0": _good()},
        [_good()] * (MAX_ITEMS + 1),
        [None],
        [_good()[:12]],  # an item short
        [[*_good(), *range(60)]],  # far more than any version says of a page
        # The URL: a string, not empty, not longer than MAX_REVISIT_URL.
        [_with(0, None)],
        [_with(0, "")],
        [_with(0, 5)],
        [_with(0, "h://" + "x" * MAX_REVISIT_URL)],
        # Depth, visits, changes, checks: integers in bounds (no bool, no float).
        [_with(1, -1)],
        [_with(1, 1_000_001)],
        [_with(1, 1.0)],
        [_with(1, True)],
        [_with(2, -1)],
        [_with(2, 10**12 + 1)],
        [_with(2, 2**64)],
        [_with(3, 6)],  # more changes than visits
        [_with(3, "2")],
        [_with(11, -1)],
        [_with(12, 5)],  # more agreed than checks
        [_with(12, None)],
        [_with(13, -1)],
        [_with(13, "1")],
        [_with(14, 3)],  # more 404s than failures
        # Times: finite, in [0, MAX_WALL].
        *([_with(i, v)] for i in (4, 5, 6) for v in (math.nan, math.inf, -1.0, 2e11, "1", None)),
        [_with(6, 10**400)],
        # Importance: finite, in [0, MAX_SCORE].
        *([_with(7, v)] for v in (math.nan, -0.5, 1e13, None)),
        # Validators and digest: null or a string of at most MAX_VALIDATOR characters.
        *([_with(i, v)] for i in (8, 9, 10) for v in (1, b"x", "x" * (MAX_VALIDATOR + 1))),
    ],
)
def test_a_malformed_revisit_is_a_wire_error(revisits: Any) -> None:
    with pytest.raises(WireError):
        decode(FrameType.HANDOFF, _frame_with({"revisits": revisits}))


def test_a_sender_refuses_to_write_more_revisits_than_a_receiver_takes() -> None:
    most = Handoff(1, "a.test", (), (), None, (SITEMAP,) * MAX_ITEMS)
    assert decode(FrameType.HANDOFF, cbor2.loads(cbor2.dumps(most.to_wire()))) == most
    with pytest.raises(FrameError, match=f"more than a receiver takes \\({MAX_ITEMS}\\)"):
        Handoff(1, "a.test", (), (), None, (SITEMAP,) * (MAX_ITEMS + 1)).to_wire()


def test_a_revisit_a_receiver_would_refuse_cannot_be_made() -> None:
    with pytest.raises(WireError):
        Revisit("http://a.test/", 0, 1, 2, 0.0, NOW, NOW)
    with pytest.raises(WireError):
        Revisit("http://a.test/", 0, 1, 0, 0.0, math.nan, NOW)


def test_a_seeded_hosts_first_lookup_goes_to_the_wire_and_back() -> None:
    """Sent only for a seed's host looked up here (an empty list: it allowed nothing);
    a peer of an earlier version leaves the field, and one that sends none is read as
    none."""
    looked = Handoff(7, "a.test", (), (), None, (), ("10.0.0.5", "fd00::1"))
    assert looked.to_wire()["seed_lookup"] == ["10.0.0.5", "fd00::1"]
    assert read_both_ways(FrameType.HANDOFF, looked.to_wire()) == (looked, looked)
    public = Handoff(7, "a.test", (), (), None, (), ())
    assert decode(FrameType.HANDOFF, public.to_wire()) == public
    assert "seed_lookup" not in Handoff(7, "a.test", (), (), None).to_wire()


@pytest.mark.parametrize("bad", ["10.0.0.5", ["no.address"], ["FD00::1"], ["10.0.0.5"] * 65, [5]])
def test_a_seed_lookup_of_anything_but_a_few_addresses_is_refused(bad: Any) -> None:
    with pytest.raises(WireError):
        decode(FrameType.HANDOFF, _frame_with({"seed_lookup": bad}))
