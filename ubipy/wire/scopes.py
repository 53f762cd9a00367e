"""The SCOPE frame: the seeds' roots and hosts, shared with every member
(:mod:`ubipy.peer.scopesharing`).

Checked here: shape and types, as in :mod:`ubipy.wire.payloads`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ubipy.wire.frames import FrameType
from ubipy.wire.payloads import _list, _strings


@dataclass(frozen=True, slots=True)
class Scope:
    """SCOPE: the seeds' roots, so every peer follows the same links, and the hosts
    the seeds were on, whose addresses may be ones a crawler is otherwise refused.
    On the wire ``[roots, seeds]``, or a bare list of roots when there are no seeds'
    hosts, as before they were sent (a peer from then takes it)."""

    KIND: ClassVar = FrameType.SCOPE
    roots: tuple[str, ...]
    seeds: tuple[str, ...] = ()

    def to_wire(self) -> list[object]:
        if not self.seeds:
            return list(self.roots)
        return [list(self.roots), list(self.seeds)]

    @classmethod
    def from_wire(cls, obj: object) -> Scope:
        items = _list(obj, "scope")
        if len(items) == 2 and all(isinstance(i, list) for i in items):
            return cls(_strings(items[0], "scope roots"), _strings(items[1], "seed hosts"))
        return cls(_strings(items, "scope roots"))
