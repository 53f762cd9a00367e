"""The seed thesis's placements (its chapter 4.1.4), kept to be measured against.

Both hash the host once, with the same seeded xxh3-64 as the ring, so the schemes
differ only in how that number becomes a member. ``successors`` has the meaning the
ring gives it in every scheme: ``successors[k]`` is who would own the host if
``successors[:k]`` all left, i.e. the fallback order the scheme itself implies.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xxhash import xxh3_64_intdigest

from ubipy.ring.hashing import HOST_SEED, host_point
from ubipy.ring.placement import EmptyRingError, check_count, normalise_members


class ModuloPlacement:
    """One level: ``node = hash(host) mod N`` over the sorted member ids.

    Balanced, but almost every host moves when N changes: the thesis's reason for
    its second level.
    """

    __slots__ = ("_members",)

    def __init__(self, members: Iterable[str]) -> None:
        self._members = normalise_members(members)

    def __repr__(self) -> str:
        return f"ModuloPlacement({len(self._members)} members)"

    @property
    def members(self) -> tuple[str, ...]:
        return self._members

    def owner(self, host: str) -> str:
        members = self._members
        if not members:
            raise EmptyRingError()
        return members[xxh3_64_intdigest(host.encode("utf-8"), seed=HOST_SEED) % len(members)]

    def successors(self, host: str, n: int) -> list[str]:
        check_count(n)
        if n and not self._members:
            raise EmptyRingError()
        h = host_point(host)
        left = list(self._members)
        found: list[str] = []
        while left and len(found) < n:
            found.append(left.pop(h % len(left)))
        return found


class TwoLevelPlacement:
    """Two levels: ``logic_num`` logical slots, then the live physical nodes.

    ``roster`` is the crawl cycle's plan: logical slot ``i`` belongs to physical node
    ``roster[i]`` (the thesis assumes logical node i is physical node i, which is a
    roster of the initial members in id order, the default). ``logic_num`` defaults
    to ``len(roster)`` and may exceed it, leaving slots with no planned node.

    As in the thesis, with ``h = hash(host)``: slot ``h % logic_num`` decides when its
    node is alive (``idArray_logic``); an orphaned slot's host goes to
    ``idArray_physic[h % physic_num]``, the live members in id order (the thesis
    orders them by connection; id order keeps the scheme a pure function of the
    member set). The thesis applies the same ``hash()`` at both levels, and so does
    this: when ``logic_num`` is a multiple of ``physic_num`` a whole orphaned slot
    lands on one node rather than being spread.

    A live member outside the roster has no slot: it only ever receives orphaned
    hosts, so the scheme cannot grow past its plan without a new cycle.
    """

    __slots__ = ("_alive", "_logic_num", "_members", "_physic", "_roster")

    def __init__(
        self,
        members: Iterable[str],
        roster: Sequence[str] | None = None,
        logic_num: int | None = None,
    ) -> None:
        self._members = normalise_members(members)
        self._roster = tuple(self._members if roster is None else roster)
        if len(set(self._roster)) != len(self._roster):
            # Slots are assigned by position, so a repeated id would own two slots.
            raise ValueError("roster ids must be distinct")
        self._logic_num = max(1, len(self._roster)) if logic_num is None else logic_num
        if self._logic_num < max(1, len(self._roster)):
            raise ValueError(
                f"logic_num must be >= max(1, len(roster)), got {self._logic_num} "
                f"for a roster of {len(self._roster)}"
            )
        live = set(self._members)
        # idArray_logic, with the slot's node in place of True (None for False).
        self._alive: list[str | None] = [m if m in live else None for m in self._roster]
        self._alive += [None] * (self._logic_num - len(self._roster))
        self._physic = self._members

    def __repr__(self) -> str:
        return (
            f"TwoLevelPlacement({len(self._members)} members, "
            f"logic_num={self._logic_num}, roster={len(self._roster)})"
        )

    @property
    def members(self) -> tuple[str, ...]:
        return self._members

    @property
    def roster(self) -> tuple[str, ...]:
        return self._roster

    @property
    def logic_num(self) -> int:
        return self._logic_num

    def owner(self, host: str) -> str:
        h = xxh3_64_intdigest(host.encode("utf-8"), seed=HOST_SEED)
        node = self._alive[h % self._logic_num]
        if node is not None:
            return node
        physic = self._physic
        if not physic:
            raise EmptyRingError()
        return physic[h % len(physic)]

    def successors(self, host: str, n: int) -> list[str]:
        check_count(n)
        if n and not self._members:
            raise EmptyRingError()
        h = host_point(host)
        slot_node = self._alive[h % self._logic_num]
        left = list(self._physic)
        found: list[str] = []
        while left and len(found) < n:
            if slot_node is not None and slot_node not in found:
                member = slot_node
                left.remove(member)
            else:
                member = left.pop(h % len(left))
            found.append(member)
        return found
