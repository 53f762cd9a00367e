"""Counts in messages read as English: "1 seed", "2 seeds"."""

from __future__ import annotations

from ubipy.wording import counted, listed


def test_one_is_singular_and_the_rest_plural() -> None:
    assert counted(1, "seed") == "1 seed"
    assert [counted(n, "seed") for n in (0, 2, 60_001)] == ["0 seeds", "2 seeds", "60001 seeds"]
    assert counted(1, "body", "bodies") == "1 body"
    assert counted(3, "body", "bodies") == "3 bodies"


def test_items_are_listed_as_a_sentence_lists_them() -> None:
    assert listed([]) == ""
    assert listed(["3 pages"]) == "3 pages"
    assert listed(["3 pages", "1 sitemap"]) == "3 pages and 1 sitemap"
    assert listed(["3 pages", "1 sitemap", "2 visits"]) == "3 pages, 1 sitemap and 2 visits"
