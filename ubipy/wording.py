"""Counts in the words users read ("1 seed", "2 seeds"): one helper for every message."""

from __future__ import annotations

__all__ = ["counted"]


def counted(count: int, noun: str, nouns: str | None = None) -> str:
    """``count`` and the noun in its number: ``nouns`` when the plural is not ``noun``+s."""
    return f"{count} {noun if count == 1 else nouns or noun + 's'}"
