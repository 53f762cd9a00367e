"""Counts in messages read as English: "1 seed", "2 seeds"."""

from __future__ import annotations

from ubipy.wording import counted


def test_one_is_singular_and_the_rest_plural() -> None:
    assert counted(1, "seed") == "1 seed"
    assert [counted(n, "seed") for n in (0, 2, 60_001)] == ["0 seeds", "2 seeds", "60001 seeds"]
    assert counted(1, "body", "bodies") == "1 body"
    assert counted(3, "body", "bodies") == "3 bodies"
