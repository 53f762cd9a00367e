"""Counts in the words users read ("1 seed", "2 seeds"): one helper for every message."""

from __future__ import annotations

__all__ = ["counted", "listed"]


def counted(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` and the noun in its number: ``nouns`` when the plural is not ``noun``+s."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"


def listed(items: list[str]) -> str:
    """Items as a sentence lists them: "a", "a and b", "a, b and c"."""
    return " and ".join(filter(None, (", ".join(items[:-1]), items[-1]))) if items else ""
