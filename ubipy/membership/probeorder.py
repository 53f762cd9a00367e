"""The probe cycle's bookkeeping: the probe under way, the PingReqs served for others,
and memberlist's probe order: a shuffled round robin over the live members, shuffled
afresh every pass, so a member's place in it (and so how long its death goes
unnoticed) is fresh luck each time; and the random picks of members that gossip,
push-pulls and indirect probes make. No I/O, as in :mod:`ubipy.membership.machine`."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ubipy.membership.messages import LIVE_STATES, Member


@dataclass(slots=True)
class Probe:
    seq: int
    target_id: str
    started: float
    acked: bool = False
    indirect_sent: bool = False
    direct: bool = False  # the target's own Ack came (not only one through others)


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


def pick(
    members: Mapping[str, Member],
    ids: Callable[[], list[str]],
    self_id: str,
    k: int,
    accept: Callable[[Member], bool],
    rng: random.Random,
) -> list[Member]:
    """Up to ``k`` random members other than ``self_id`` that ``accept`` takes;
    ``ids``: the ids of ``members``, as a list (made once while none come or go)."""
    if k <= 0:
        return []
    if len(members) > 4 * k + 16:
        # A large table (gossip picks 3 of 1000 five times a second): draw at
        # random and keep what is accepted; a thin set falls back to the scan.
        listed = ids()
        chosen: dict[str, Member] = {}
        for _ in range(8 * k):
            m = members[listed[rng.randrange(len(listed))]]
            if m.id != self_id and accept(m):
                chosen[m.id] = m
                if len(chosen) == k:
                    return list(chosen.values())
    # The dict keeps insertion order, so this is as repeatable as the rng.
    candidates = [m for m in members.values() if m.id != self_id and accept(m)]
    if len(candidates) <= k:
        rng.shuffle(candidates)
        return candidates
    return rng.sample(candidates, k)
