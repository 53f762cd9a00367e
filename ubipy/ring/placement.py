"""What every placement scheme offers, and the checks they share."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from ubipy.errors import UbipyError


class EmptyRingError(UbipyError, LookupError):
    """Raised when a host is looked up in a placement with no members."""

    def __init__(self) -> None:
        super().__init__("no members: a placement with no members owns no host")


@runtime_checkable
class Placement(Protocol):
    """Who owns a host, as a pure function of the member ids.

    Every peer that builds the same scheme from the same members (in any order)
    must get the same answers.
    """

    @property
    def members(self) -> tuple[str, ...]:
        """The distinct member ids, sorted."""
        ...

    def owner(self, host: str) -> str:
        """The member that crawls ``host``; raises EmptyRingError without members."""
        ...

    def successors(self, host: str, n: int) -> list[str]:
        """Up to ``n`` distinct members in fallback order; the first is ``owner(host)``."""
        ...


def normalise_members(members: Iterable[str]) -> tuple[str, ...]:
    """Distinct ids in sorted order.

    Duplicates are collapsed rather than rejected: a membership view is a set, and a
    gossip snapshot that lists a peer twice should not be fatal. Sorting makes every
    derived table independent of the order in which peers were heard of.
    """
    unique = set()
    for member in members:
        if not isinstance(member, str):
            raise TypeError(f"member ids are str, got {type(member).__name__}")
        unique.add(member)
    return tuple(sorted(unique))


def check_count(n: int) -> None:
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
