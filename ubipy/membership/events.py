"""What the membership state machine takes and gives besides messages: its settings
(:class:`MembershipConfig`), the messages it asks its driver to send
(:class:`Outgoing`) and the changes it reports (:class:`MemberEvent`).

No I/O and no clock here, as in :mod:`ubipy.membership.machine`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ubipy.membership.messages import Member, Message


@dataclass(frozen=True, slots=True)
class MembershipConfig:
    """Timings and limits; the defaults are memberlist's LAN profile."""

    probe_interval: float = 1.0
    probe_timeout: float = 0.5
    indirect_checks: int = 3
    suspicion_mult: int = 4
    # Lifeguard: an unconfirmed suspicion waits up to this many times the minimum.
    # 1 turns the confirmation-based shortening off.
    suspicion_max_timeout_mult: int = 6
    retransmit_mult: int = 4
    gossip_interval: float = 0.2
    gossip_nodes: int = 3
    # Dead members are still gossiped to for a while, so that one declared dead
    # wrongly (a partition) hears it and refutes.
    gossip_to_the_dead: float = 30.0
    push_pull_interval: float = 30.0
    # How long DEAD and LEFT members are kept, so a stale ALIVE rumour with an old
    # incarnation cannot bring them back. Several push-pull rounds, so every table
    # that still holds the old ALIVE has been overwritten by then.
    tombstone_timeout: float = 120.0
    # Updates per message, bounded by count and by size: as memberlist fills its
    # UDP buffer, a message takes as many rumours as fit in ``piggyback_bytes``
    # (under a 1400-byte MTU with the frame's overhead). By size, not a count of 8:
    # while a thousand members join, every member has ~16 sends of each of them
    # to make, and 8 a message took two minutes to drain at N = 1000.
    max_piggyback: int = 32
    piggyback_bytes: int = 1100
    # Serf's reconnect: members declared dead (and the join addresses) are dialled
    # again every interval, a few at a time, for this long, so that the two sides of
    # a partition find each other once the network lets them, however long it lasted.
    reconnect_interval: float = 30.0
    reconnect_timeout: float = 24 * 3600.0
    reconnect_fanout: int = 3

    def __post_init__(self) -> None:
        if not 0 < self.probe_timeout < self.probe_interval:
            raise ValueError("need 0 < probe_timeout < probe_interval")
        if min(self.gossip_interval, self.push_pull_interval, self.reconnect_interval) <= 0:
            raise ValueError("intervals must be positive")
        if min(self.suspicion_mult, self.suspicion_max_timeout_mult, self.retransmit_mult) < 1:
            raise ValueError("multipliers must be at least 1")
        if min(self.indirect_checks, self.gossip_nodes, self.max_piggyback) < 0:
            raise ValueError("counts must not be negative")
        if self.piggyback_bytes < 0:
            raise ValueError("counts must not be negative")
        if self.reconnect_timeout < 0 or self.reconnect_fanout < 0:
            raise ValueError("counts must not be negative")


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A message for the driver to send to ``address``; ``stream`` marks push-pull;
    ``to``: the member the frame names ("": whoever the driver knows there)."""

    address: str
    message: Message
    stream: bool = False
    to: str = ""


class ChangeKind(enum.Enum):
    JOINED = "joined"  # new, or back from DEAD/LEFT with a newer incarnation
    SUSPECT = "suspect"
    REFUTED = "refuted"  # SUSPECT -> ALIVE
    DEAD = "dead"
    LEFT = "left"


@dataclass(frozen=True, slots=True)
class MemberEvent:
    kind: ChangeKind
    member: Member
    at: float

    @property
    def changes_ring(self) -> bool:
        """Whether the alive set (and so the ring) changed; SUSPECT/REFUTED do not."""
        return self.kind in (ChangeKind.JOINED, ChangeKind.DEAD, ChangeKind.LEFT)
