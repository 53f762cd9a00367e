"""What the fuzz tests share: their hypothesis settings, strategies for the values a
hostile peer or web page can hand us, and mutations of well-formed ones.

In CI each test runs a modest, fixed set of examples (``derandomize``: a run never
fails on a case drawn for the first time, and the whole directory costs a few
seconds). For a long local search, ``UBIPY_FUZZ_EXAMPLES=20000 pytest tests/fuzz``
runs that many examples per test, freshly drawn.
"""

from __future__ import annotations

import dataclasses
import datetime
import hmac
import math
import os
from collections.abc import Callable
from typing import Any, cast

import cbor2
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from ubipy.errors import WireError
from ubipy.membership import message_from_wire
from ubipy.wire import (
    CLOSED,
    NEED_DATA,
    PROTOCOL_VERSION,
    Frame,
    Gossip,
    Message,
    Rejected,
    decode,
    secret_from,
)
from ubipy.wire.frames import LENGTH_PREFIX, TAG_LEN

_EXAMPLES = int(os.environ.get("UBIPY_FUZZ_EXAMPLES") or 0)
_CI = bool(os.environ.get("CI"))


def fuzz(examples: int) -> settings:
    """The settings of one fuzz test that runs ``examples`` examples in CI."""
    return settings(
        max_examples=_EXAMPLES or examples,
        deadline=None,
        derandomize=_CI and not _EXAMPLES,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


# --------------------------------------------------------------------------- values

# Integers a CBOR major type 0/1 holds, and the ones just past it that only a bignum
# tag (or a Python caller) can carry.
cbor_ints = st.integers(-(2**64), 2**64 - 1)
huge_ints = st.sampled_from(
    [2**63 - 1, 2**63, 2**64, -(2**63) - 1, -(2**64) - 1, 10**400, -(10**400)]
) | st.builds(pow, st.just(-2), st.just(20001))  # past str()'s 4300 digits (built: no repr)
any_floats = st.floats() | st.sampled_from(
    [math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308]
)

# Tags cbor2 gives a meaning of its own (dates, bignums, decimals, shared references
# that build cycles, regexes, MIME, sets, IP addresses, self-describe), tags it
# does not know, and the largest one.
TAG_NUMBERS = [0, 1, 2, 3, 4, 5, 6, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 32, 33, 34, 35,
               36, 37, 52, 54, 256, 258, 260, 261, 1004, 43000, 55799, 9999, 2**64 - 1]  # fmt: skip
tag_numbers = st.sampled_from(TAG_NUMBERS) | st.integers(0, 2**64 - 1)

# Leaves cbor2 can write, so a strategy built of them turns into bytes.
wire_leaves = st.one_of(
    st.none(),
    st.booleans(),
    cbor_ints,
    huge_ints,
    any_floats,
    st.text(max_size=40),
    st.binary(max_size=40),
    st.just(cbor2.undefined),
    st.integers(0, 255).filter(lambda v: not 20 <= v <= 31).map(cbor2.CBORSimpleValue),
)
wire_keys = st.text(max_size=8) | st.binary(max_size=8) | cbor_ints | st.booleans() | st.none()

wire_values: st.SearchStrategy[Any] = st.recursive(
    wire_leaves,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(wire_keys, inner, max_size=5)
        | st.builds(cbor2.CBORTag, tag_numbers, inner)
    ),
    max_leaves=15,
)

# Plain data, what a writer sends as a payload.
plain_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | cbor_ints
    | any_floats
    | st.text(max_size=40)
    | st.binary(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(
            st.text(max_size=8) | st.binary(max_size=8) | cbor_ints, inner, max_size=5
        )
    ),
    max_leaves=15,
)

# What a laxer decoder than ubipy's would have handed over: cbor2's own semantic
# types, tuples and frozen maps (cbor2 makes map keys of arrays and maps hashable),
# strings with lone surrogates (no CBOR decoder makes them, but a Python caller can).
_odd_leaves = st.one_of(
    st.datetimes(timezones=st.none() | st.just(datetime.UTC)),
    st.dates(),
    st.decimals(allow_nan=True),
    st.fractions(),
    st.uuids(),
    st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
)
any_keys = wire_keys | huge_ints | any_floats | st.tuples(wire_leaves, wire_leaves)

any_values: st.SearchStrategy[Any] = st.recursive(
    wire_leaves | _odd_leaves,
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(any_keys, inner, max_size=5)
        | st.builds(cbor2.CBORTag, tag_numbers, inner)
        | st.lists(inner, max_size=4).map(tuple)
        | st.frozensets(wire_leaves, max_size=4)
        | st.dictionaries(wire_keys, inner, max_size=3).map(cbor2.frozendict)
    ),
    max_leaves=15,
)


# --------------------------------------------------------------------------- mutations

Path = tuple[Any, ...]


def _paths(value: Any, path: Path = ()) -> list[Path]:
    """Every node of a tree of lists and dicts, as the keys that lead to it."""
    out = [path]
    if type(value) is list:
        for i, item in enumerate(value):
            out += _paths(item, (*path, i))
    elif type(value) is dict:
        for key, item in value.items():
            out += _paths(item, (*path, key))
    return out


def _replace(value: Any, path: Path, edit: Callable[[Any], Any]) -> Any:
    """A copy of ``value`` with the node at ``path`` replaced by ``edit(node)``."""
    if not path:
        return edit(value)
    head, rest = path[0], path[1:]
    if type(value) is list:
        copy = list(value)
        copy[head] = _replace(copy[head], rest, edit)
        return copy
    mapping = dict(value)
    mapping[head] = _replace(mapping[head], rest, edit)
    return mapping


def _edit(draw: st.DrawFn, node: Any, replacements: st.SearchStrategy[Any]) -> Any:
    """One plausible slip or attack on one node."""
    kind = type(node)
    choices = ["replace", "wrap"]
    if kind is list:
        choices += ["drop", "dup", "append", "empty"] if node else ["append"]
    elif kind is dict:
        choices += ["drop_key", "add_key", "retype_key"] if node else ["add_key"]
    elif kind is int:
        choices += ["int_edge"]
    elif kind is str:
        choices += ["to_bytes", "long_str"]
    elif kind is float:
        choices += ["float_edge"]
    op = draw(st.sampled_from(choices))
    if op == "replace":
        return draw(replacements)
    if op == "wrap":
        return [node]
    if op == "drop":
        i = draw(st.integers(0, len(node) - 1))
        return node[:i] + node[i + 1 :]
    if op == "dup":
        i = draw(st.integers(0, len(node) - 1))
        return [*node[: i + 1], node[i], *node[i + 1 :]]
    if op == "append":
        return [*node, draw(replacements)]
    if op == "empty":
        return []
    if op == "drop_key":
        key = draw(st.sampled_from(list(node)))
        return {k: v for k, v in node.items() if k != key}
    if op == "add_key":
        return {**node, draw(wire_keys): draw(replacements)}
    if op == "retype_key":
        key = draw(st.sampled_from(list(node)))
        # hex() for an int: str() of one past 4300 digits raises.
        new = key.encode() if type(key) is str else hex(key) if type(key) is int else str(key)
        return {(new if k == key else k): v for k, v in node.items()}
    if op == "int_edge":
        return draw(
            st.sampled_from(
                [
                    node + 1,
                    node - 1,
                    -node,
                    -1,
                    node * 2**64,
                    bool(node & 1),
                    2**63,
                    2**64 - 1,
                    float(node) if abs(node) < 2**1000 else math.inf,
                ]
            )
        )
    if op == "to_bytes":
        return node.encode("utf-8", "surrogatepass")
    if op == "long_str":
        # Long enough to pass the smaller frame caps and the checks of lengths.
        return (node or "x") * draw(st.integers(2, 3000 // max(len(node), 1) + 2))
    return draw(
        st.sampled_from(
            [math.nan, math.inf, -math.inf, -0.0, 1e308, int(node) if math.isfinite(node) else 0]
        )
    )


@st.composite
def mutated(draw: st.DrawFn, value: Any, replacements: st.SearchStrategy[Any] = wire_values) -> Any:
    """``value`` (a tree of lists and dicts) after one to three edits at random nodes."""
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(_paths(value)))
        value = _replace(value, path, lambda node: _edit(draw, node, replacements))
    return value


# Bytes that mean something to a CBOR decoder: indefinite lengths and their break,
# lengths of 2**64 - 1 (a string or array that would never fit), tags, half floats.
_HUGE = b"\xff" * 8
_CBOR_TRAPS = [
    b"\x9f",
    b"\xbf",
    b"\x5f",
    b"\x7f",
    b"\xff",
    b"\xf7",
    b"\xf9\x7e\x00",
    b"\x1b" + _HUGE,
    b"\x5b" + _HUGE,
    b"\x7b" + _HUGE,
    b"\x9b" + _HUGE,
    b"\xbb" + _HUGE,
    b"\xdb" + _HUGE,
    b"\xc1",
    b"\xd8\x1c",
    b"\xd8\x1d\x00",
    b"\x00",
    b"\xc2\x5a\x00\x10\x00\x00",
]


@st.composite
def mutated_bytes(draw: st.DrawFn, data: bytes, max_ops: int = 4) -> bytes:
    """``data`` after up to ``max_ops`` byte edits: bits flipped, bytes inserted (CBOR
    traps among them), deleted, overwritten, duplicated or the end cut off."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, max_ops))):
        op = draw(st.sampled_from(["flip", "insert", "trap", "delete", "overwrite", "dup", "cut"]))
        if not buf or op in ("insert", "trap"):
            at = draw(st.integers(0, len(buf)))
            traps = st.sampled_from(_CBOR_TRAPS)
            buf[at:at] = draw(traps if op == "trap" else st.binary(min_size=1, max_size=8))
            continue
        at = draw(st.integers(0, len(buf) - 1))
        if op == "flip":
            buf[at] ^= 1 << draw(st.integers(0, 7))
        elif op == "delete":
            del buf[at : at + draw(st.integers(1, 8))]
        elif op == "overwrite":
            buf[at] = draw(st.sampled_from([0x00, 0xFF, 0x1B, 0x9F, 0xBF, 0xC0, 0xD9, 0xFB]))
        elif op == "dup":
            end = draw(st.integers(at, len(buf)))
            buf[at:at] = buf[at:end]
        else:  # cut
            del buf[at:]
    return bytes(buf)


# --------------------------------------------------------------------------- the wire

KEY = secret_from("fuzz: the cluster secret")
OTHER_KEY = secret_from("fuzz: a stranger's guess")
NOW = 1_700_000_000.0
# The receiving peer's id: frames for another peer are MISDIRECTED.
RECEIVER = "bob"


def signed(body: bytes, key: bytes = KEY) -> bytes:
    """A frame around any body, with a tag that verifies under ``key``."""
    return LENGTH_PREFIX.pack(TAG_LEN + len(body)) + hmac.digest(key, body, "sha256") + body


def body_with_raw_payload(kind: int, raw: bytes, *, sender: str = "alice", seq: int = 0) -> bytes:
    """A frame body whose seven first fields are right and whose payload is ``raw``,
    whatever those bytes are: an array head of 8 and then the fields one by one."""
    fields = [PROTOCOL_VERSION, kind, sender, "", 1, seq, NOW]
    return b"\x88" + b"".join(cbor2.dumps(f) for f in fields) + raw


def is_event(event: object) -> bool:
    return isinstance(event, Frame | Rejected) or event is NEED_DATA or event is CLOSED


def check_typed(frame: Frame) -> Message | None:
    """What the peer does next with an admitted frame: its typed message, and a
    membership frame's own message. Each may refuse with WireError and nothing else."""
    try:
        message = decode(frame.type, frame.payload)
        if isinstance(message, Gossip):
            message_from_wire(message.message)
    except WireError:
        return None
    return message


def same(a: object, b: object) -> bool:
    """Equality that takes a NaN for itself (as the wire does), through messages,
    containers and leaves; repr would do, but not for integers past str()'s limit."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(cast(float, b)))
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, list | tuple):
        other = cast(list[object], b)
        return len(a) == len(other) and all(map(same, a, other))
    if isinstance(a, dict):
        mapping = cast(dict[object, object], b)
        return a.keys() == mapping.keys() and all(same(a[k], mapping[k]) for k in a)
    return a == b
