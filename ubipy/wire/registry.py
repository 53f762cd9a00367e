"""Which message each frame kind carries, and the decoding of an admitted frame's
payload into it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, TypeAlias

from ubipy.errors import WireError
from ubipy.wire.frames import FrameType
from ubipy.wire.leases import IpGrant, IpLease, IpRelease
from ubipy.wire.majority import BaseAnswer, BaseAsk
from ubipy.wire.payloads import (
    Control,
    Figures,
    Gossip,
    Hello,
    Seed,
    SeedAck,
    Status,
    StatusRequest,
    Stop,
)
from ubipy.wire.relay import Relay
from ubipy.wire.scopes import Scope, ScopeAck
from ubipy.wire.urlframes import (
    Handoff,
    HandoffAck,
    HandoffDone,
    Replica,
    ReplicaAck,
    UrlAck,
    UrlBatch,
)

Message: TypeAlias = (
    Gossip
    | UrlBatch
    | UrlAck
    | Seed
    | SeedAck
    | StatusRequest
    | Status
    | Handoff
    | HandoffAck
    | Scope
    | ScopeAck
    | HandoffDone
    | Replica
    | ReplicaAck
    | Control
    | Figures
    | Stop
    | Hello
    | IpLease
    | IpGrant
    | IpRelease
    | BaseAsk
    | BaseAnswer
    | Relay
)

MESSAGE_TYPES: Final[Mapping[FrameType, type[Message]]] = {
    t.KIND: t
    for t in (
        Gossip,
        UrlBatch,
        UrlAck,
        Seed,
        SeedAck,
        StatusRequest,
        Status,
        Handoff,
        HandoffAck,
        Scope,
        ScopeAck,
        HandoffDone,
        Replica,
        ReplicaAck,
        Control,
        Figures,
        Stop,
        Hello,
        IpLease,
        IpGrant,
        IpRelease,
        BaseAsk,
        BaseAnswer,
        Relay,
    )
}


def decode(kind: FrameType, payload: Any) -> Message:
    """The typed message a frame of ``kind`` carries; WireError if it is malformed
    or of a kind no peer sends (ERROR is reserved)."""
    cls = MESSAGE_TYPES.get(kind)
    if cls is None:
        raise WireError(f"no peer sends {kind.name} frames")
    return cls.from_wire(payload)
