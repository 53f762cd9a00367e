"""The shard's rows as the rest of the store and the peer take them: a URL admitted,
a frontier row, a host's politeness mark (:mod:`ubipy.store.shard` holds them)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["FrontierRow", "HostMark", "NewURL"]


class FrontierRow(NamedTuple):
    """A URL in the frontier: one is made for every URL admitted and every one loaded
    into a host's window. A named tuple, as :class:`NewURL` is and for its reason."""

    fp: int
    seq: int
    url: str
    host: str
    depth: int
    # Its priority under a crawl order other than breadth-first (0 under bfs).
    score: float = 0.0


class NewURL(NamedTuple):
    """A URL that passed admission and is about to enter the frontier.

    A named tuple, not a frozen dataclass like the shard's other records: one is made
    for every link of every page (twice under a ranked order), and a tuple is made in
    half the time (0.64 against 1.37 us; the frozen dataclass sets each field through
    ``object.__setattr__``)."""

    fp: int
    url: str
    host: str
    depth: int
    # What the page that linked it gives it under the crawl order (OPIC cash); a
    # URL already known gets it added to its score (see Shard.credit).
    score: float = 0.0
    # Redirects in a row that led to it (0: a link, a seed), carried to its host's owner.
    redirects: int = 0


@dataclass(frozen=True, slots=True)
class HostMark:
    """What politeness must remember of a host across restarts."""

    last_end: float  # wall-clock time the last request ended
    delay: float
    pages: int
    # Tries of its robots.txt that failed while it had no rules (a restart counts on
    # from there; another peer taking the host over counts afresh).
    robots_tries: int = 0

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> HostMark:
        """From (last_end, delay, pages[, robots_tries]) as SQLite returns them (a
        replica's mark, another peer's, has no tries: its successor counts afresh)."""
        return cls(float(row[0]), float(row[1]), int(row[2]), int(row[3]) if len(row) > 3 else 0)
