"""A list of any size (a seed file, the scope's roots) goes in frames each far under
the cap, measured on the frames as encoded, nothing lost or reordered."""

from __future__ import annotations

import random

import pytest

from ubipy.fetch.urls import MAX_URL_LENGTH
from ubipy.wire import (
    BATCH_ITEMS,
    DEFAULT_MAX_FRAME,
    FrameWriter,
    Scope,
    Seed,
    SeedAck,
    batches,
    new_epoch,
    secret_from,
)
from ubipy.wire.payloads import MAX_ITEMS

WRITER = FrameWriter(secret_from("s"), "cli-0123abcd", new_epoch())


def frame_size(message: Seed | SeedAck | Scope) -> int:
    return len(WRITER.frame(message.KIND, message.to_wire(), 0.0))


def long_urls(n: int, seed: int = 1) -> list[str]:
    """URLs of every length up to the longest a seed may be, mostly long ones."""
    rng = random.Random(seed)
    urls = []
    for i in range(n):
        length = rng.choice([MAX_URL_LENGTH, MAX_URL_LENGTH - 1, rng.randrange(30, MAX_URL_LENGTH)])
        head = f"http://h{i % 97}.example.test/{i}/"
        urls.append(head + "a" * (length - len(head)))
    return urls


def test_many_long_urls_go_in_frames_far_under_the_cap() -> None:
    urls = long_urls(20_000)
    assert sum(map(len, urls)) > 6 * DEFAULT_MAX_FRAME  # one frame could never carry them
    runs = list(batches(urls))
    assert [u for run in runs for u in run] == urls
    for run in runs:
        assert frame_size(Seed(run)) <= DEFAULT_MAX_FRAME // 8
        # The answer may echo every URL back as refused; it must fit too.
        refused = SeedAck(len(run), 0, 0, tuple((u, "control_chars") for u in run))
        assert frame_size(refused) <= DEFAULT_MAX_FRAME // 4


def test_short_urls_are_bounded_by_count() -> None:
    urls = [f"http://h{i}.test/" for i in range(BATCH_ITEMS * 5 + 3)]
    runs = list(batches(urls))
    assert [len(r) for r in runs] == [BATCH_ITEMS] * 5 + [3]
    assert all(frame_size(Seed(r)) <= DEFAULT_MAX_FRAME // 8 for r in runs)


def test_scope_roots_stay_within_what_a_receiver_takes() -> None:
    roots = [f"d{i:06d}.example" for i in range(3 * MAX_ITEMS + 1)]
    runs = list(batches(roots, max_items=MAX_ITEMS))
    assert [len(r) for r in runs] == [MAX_ITEMS] * 3 + [1]
    # Each is a frame a receiver decodes (a list over MAX_ITEMS it would refuse).
    assert all(Scope.from_wire(Scope(r).to_wire()).roots == r for r in runs)


def test_non_ascii_is_measured_in_encoded_bytes() -> None:
    text = "é" * 1000  # 2,000 bytes in UTF-8
    runs = list(batches([text] * 10, max_bytes=4_100))
    assert [len(r) for r in runs] == [2] * 5


def test_an_overlong_string_goes_alone_and_nothing_is_empty() -> None:
    assert list(batches(["x" * 50, "y", "z"], max_bytes=20)) == [("x" * 50,), ("y", "z")]
    assert list(batches([])) == []
    with pytest.raises(ValueError, match="max_items"):
        list(batches(["x"], max_items=MAX_ITEMS + 1))
