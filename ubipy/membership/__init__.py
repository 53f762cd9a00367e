"""Who is in the cluster: SWIM with Lifeguard as a pure state machine (h11 style).

Feed it messages and ticks with the time, send the ``Outgoing`` it returns, and
rebuild the ring when ``drain_events()`` reports a change. No I/O, no clock, no
randomness of its own. Beside it, :class:`Quorum`: the majority lease that decides
whether a peer may fetch while the network is split.
"""

from ubipy.membership.events import ChangeKind, MemberEvent, MembershipConfig, Outgoing
from ubipy.membership.machine import Membership
from ubipy.membership.messages import (
    LIVE_STATES,
    MAX_UPDATES,
    Ack,
    Gossip,
    Leave,
    Member,
    MemberState,
    Message,
    Ping,
    PingReq,
    PushPull,
    Update,
    message_from_wire,
)
from ubipy.membership.quorum import Quorum, Sight, fence

__all__ = [
    "LIVE_STATES",
    "MAX_UPDATES",
    "Ack",
    "ChangeKind",
    "Gossip",
    "Leave",
    "Member",
    "MemberEvent",
    "MemberState",
    "Membership",
    "MembershipConfig",
    "Message",
    "Outgoing",
    "Ping",
    "PingReq",
    "PushPull",
    "Quorum",
    "Sight",
    "Update",
    "fence",
    "message_from_wire",
]
