"""The growing Bloom filter in front of admission's exact seen-set: no false negatives
however far it grows, and its false-positive rate within the one asked for."""

from __future__ import annotations

import random

import pytest

from ubipy.store.bloom import GrowingBloom


def test_every_key_added_is_found_as_it_grows_past_its_capacity() -> None:
    rng = random.Random(7)
    keys = [rng.getrandbits(64) for _ in range(30_000)]
    bloom = GrowingBloom(1_000, 0.01)
    for k in keys:
        bloom.add(k)
    assert bloom.filters == 4  # 1,000 then 4,000, 16,000 and 64,000 keys
    assert all(k in bloom for k in keys)


def test_the_false_positive_rate_stays_under_the_one_asked_for() -> None:
    rng = random.Random(8)
    bloom = GrowingBloom(1_000, 0.01)
    added = {rng.getrandbits(64) for _ in range(20_000)}
    for k in added:
        bloom.add(k)
    others = [k for k in (rng.getrandbits(64) for _ in range(50_000)) if k not in added]
    false = sum(k in bloom for k in others)
    assert false / len(others) < 0.01


@pytest.mark.parametrize(("capacity", "rate"), [(0, 0.01), (10, 0.0), (10, 1.0)])
def test_an_impossible_filter_is_refused(capacity: int, rate: float) -> None:
    with pytest.raises(ValueError, match="capacity"):
        GrowingBloom(capacity, rate)
