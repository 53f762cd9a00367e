"""The SCOPE frame: the seeds' roots and hosts, shared with every member
(:mod:`ubipy.peer.scopesharing`), and its acknowledgement, SCOPE_ACK.

A SCOPE frame carries no number: a peer of an earlier version refuses any new field
in it. Its acknowledgement names it by a digest of what it carries instead, which
both ends work out alike.

Checked here: shape and types, as in :mod:`ubipy.wire.payloads`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar

import cbor2

from ubipy.wire.frames import FrameType
from ubipy.wire.payloads import _int, _list, _map, _most, _strings


@dataclass(frozen=True, slots=True)
class Scope:
    """SCOPE: the seeds' roots, so every peer follows the same links, and the hosts
    the seeds were on, whose addresses may be ones a crawler is otherwise refused.
    On the wire ``[roots, seeds]``, or a bare list of roots when there are no seeds'
    hosts, as before they were sent (a peer from then takes it)."""

    KIND: ClassVar = FrameType.SCOPE
    roots: tuple[str, ...]
    seeds: tuple[str, ...] = ()

    @property
    def digest(self) -> int:
        """What names this frame in its acknowledgement: the same on every peer."""
        # CBOR's encoding of two arrays of text is one byte string in any language.
        encoded = cbor2.dumps([list(self.roots), list(self.seeds)])
        return int.from_bytes(hashlib.blake2b(encoded, digest_size=8).digest()) >> 1

    def to_wire(self) -> list[object]:
        _most(self.roots, "scope roots")
        _most(self.seeds, "seed hosts")
        if not self.seeds:
            return list(self.roots)
        return [list(self.roots), list(self.seeds)]

    @classmethod
    def from_wire(cls, obj: object) -> Scope:
        items = _list(obj, "scope")
        if len(items) == 2 and all(isinstance(i, list) for i in items):
            return cls(_strings(items[0], "scope roots"), _strings(items[1], "seed hosts"))
        return cls(_strings(items, "scope roots"))


@dataclass(frozen=True, slots=True)
class ScopeAck:
    """SCOPE_ACK: the roots and hosts of the SCOPE frame of this ``digest`` are taken,
    and kept in the receiver's shard."""

    KIND: ClassVar = FrameType.SCOPE_ACK
    digest: int

    def to_wire(self) -> dict[str, object]:
        return {"digest": self.digest}

    @classmethod
    def from_wire(cls, obj: object) -> ScopeAck:
        return cls(_int(_map(obj, "a scope acknowledgement").get("digest"), "a scope digest"))
