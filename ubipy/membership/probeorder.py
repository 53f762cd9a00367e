"""The probe cycle's bookkeeping: the probe under way, the PingReqs served for others,
and memberlist's probe order: a shuffled round robin over the live members, shuffled
afresh every pass, so a member's place in it (and so how long its death goes
unnoticed) is fresh luck each time. No I/O, as in :mod:`ubipy.membership.machine`."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from ubipy.membership.messages import LIVE_STATES, Member


@dataclass(slots=True)
class Probe:
    seq: int
    target_id: str
    started: float
    acked: bool = False
    indirect_sent: bool = False


@dataclass(slots=True)
class Forward:
    """A PingReq we are serving: our ping's Ack goes back under the requester's seq."""

    requester_address: str
    seq: int
    expires: float


class ProbeOrder:
    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._order: list[str] = []
        self._pos = 0

    def next(self, members: Mapping[str, Member], self_id: str) -> Member | None:
        """The next live member to probe, starting a new pass when this one is over."""
        for attempt in range(2):
            while self._pos < len(self._order):
                member = members.get(self._order[self._pos])
                self._pos += 1
                if member is not None and member.state in LIVE_STATES:
                    return member
            if attempt == 0:
                self._order = [
                    m.id for m in members.values() if m.state in LIVE_STATES and m.id != self_id
                ]
                self._rng.shuffle(self._order)
                self._pos = 0
        return None

    def add(self, member_id: str) -> None:
        """A newcomer goes somewhere in the rest of this pass: probed soon, at a place
        nobody can predict."""
        if member_id in self._order[self._pos :]:
            return
        self._order.insert(self._rng.randint(self._pos, len(self._order)), member_id)
