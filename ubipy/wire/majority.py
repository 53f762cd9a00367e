"""The majority base frames: how a peer new to a cluster learns the base of the
majority lease (:mod:`ubipy.membership.quorum`) before it counts itself in it.

A new peer started with ``--join`` has no base of its own. Were it to start from
itself alone, the first member it met would make a base of two, and a newcomer that
joined the cut-off side of a partition would crawl beside the majority. So it asks
each member it sees (BASE_ASK) and fetches nothing until one that holds the lease
answers with a base naming it (BASE). A set of newcomers that meet only each other
(a cluster started with every peer naming the others) find out so from the answers,
and the smallest id of them founds the base.

Checked here: shape and types, as in :mod:`ubipy.wire.payloads`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

from ubipy.errors import WireError
from ubipy.wire.frames import MAX_ID_LEN, FrameType
from ubipy.wire.payloads import _map, _strings

# Far more peers than a cluster has: what a base answer may list.
MAX_BASE: Final = 4096


def _check_ids(members: tuple[str, ...]) -> None:
    if len(members) > MAX_BASE:
        raise WireError(f"a base lists at most {MAX_BASE} peers")
    if any(not 0 < len(m) <= MAX_ID_LEN for m in members):
        raise WireError(f"a base's peer ids are 1 to {MAX_ID_LEN} characters")


@dataclass(frozen=True, slots=True)
class BaseAsk:
    """BASE_ASK: a peer with no base yet asks the receiver for its own."""

    KIND: ClassVar = FrameType.BASE_ASK

    def to_wire(self) -> dict[str, object]:
        return {}

    @classmethod
    def from_wire(cls, obj: object) -> BaseAsk:
        _map(obj, "a base request")
        return cls()


@dataclass(frozen=True, slots=True)
class BaseAnswer:
    """BASE: the sender's base (empty: it is new and has none either), whether it
    holds the lease on it now, its joint base while additions to the base are not
    confirmed (the asker holds that joint too), and, from a sender with none,
    whether it has heard
    of a member that has one (``informed``: a cluster exists that it has not been
    let into, so no newcomer it meets may found one of its own)."""

    KIND: ClassVar = FrameType.BASE
    members: tuple[str, ...]
    holds: bool
    informed: bool = False
    # The sender's joint base, the last it had confirmed (empty: none).
    joint: tuple[str, ...] = ()
    # The sender left the cluster on purpose in its last run and no base has let it in
    # since: a base that still names it drops it, as its leave, lost, would have.
    left: bool = False

    def __post_init__(self) -> None:
        _check_ids(self.members)
        _check_ids(self.joint)

    def to_wire(self) -> dict[str, object]:
        wire: dict[str, object] = {
            "members": list(self.members),
            "holds": self.holds,
            "informed": self.informed,
        }
        if self.joint:
            wire["joint"] = list(self.joint)
        if self.left:  # only then: a peer of an earlier version reads no such key
            wire["left"] = True
        return wire

    @classmethod
    def from_wire(cls, obj: object) -> BaseAnswer:
        payload = _map(obj, "a base")
        holds, informed = payload.get("holds"), payload.get("informed", False)
        left = payload.get("left", False)
        if type(holds) is not bool or type(informed) is not bool or type(left) is not bool:
            raise WireError("a base's holds, informed and left must be bools")
        members = _strings(payload.get("members"), "a base's members", MAX_BASE)
        joint = _strings(payload.get("joint", []), "a base's joint members", MAX_BASE)
        return cls(members, holds, informed, joint, left)
