"""What a peer keeps of the members it knows beside membership's own view: who is at
each address, which every frame sent there names (the wire's recipient, so that a
frame captured on its way to one peer is refused by the others), and, in its shard,
every peer it has known, for its next start."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from ubipy.errors import StorageError
from ubipy.membership import LIVE_STATES, Member
from ubipy.store import Shard

log = logging.getLogger(__name__)

_MEMBERS_META = "last_members"
_LEAVES_META = "leaves_swept"
_HANDED_META = "handed_on_leave"


class MemberBook:
    def __init__(self, shard: Shard) -> None:
        self._shard = shard
        known = shard.get_meta(_MEMBERS_META)
        self._remembered = known
        # Every peer known at the last start's end, for hand-off's holds.
        self.last_members: tuple[str, ...] = tuple(known.split(",")) if known else ()
        self._ids: dict[str, str] = {}
        # The peers that left and handed every host on (HoldsMixin.leaves), by the
        # ring of their leave's sweep: not waited for at the next start.
        self.leaves: dict[str, str] = _leaves(shard.get_meta(_LEAVES_META))
        # Whether a leave handed hosts on that may not be back here yet
        # (HoldsMixin.remember_handed).
        self.handed_on = shard.get_meta(_HANDED_META) == "1"

    def recipient(self, address: str) -> str:
        """The id of the peer at ``address``; "" (any peer) while no member is known
        there, as when joining through it."""
        return self._ids.get(address, "")

    def changed(self, members: Sequence[Member]) -> None:
        """Membership changed: the member at each address, where one is sure. Of those
        that had one address, the one live if only one is; where none is live or
        several are (a new peer on a dead one's address, before the others see the old
        one dead), none is named and any peer there takes the frame: membership's own
        messages name their member, so the new one still refuses what was meant for the
        old."""
        claims: dict[str, list[Member]] = {}
        for member in members:
            claims.setdefault(member.address, []).append(member)
        ids: dict[str, str] = {}
        for address, claimants in claims.items():
            live = [m for m in claimants if m.state in LIVE_STATES]
            if len(claimants) == 1 or len(live) == 1:
                ids[address] = (live or claimants)[0].id
        self._ids = ids

    def remember(self, members: Sequence[Member]) -> None:
        """Remember every peer known now, so that, back from a stop, this peer holds
        the hosts they may hold until they are back and have swept. Those that left
        or died are kept: a whole cluster stopping hands hosts to peers that are
        leaving too, and a dead peer's shard still holds its hosts' history."""
        known = ",".join(sorted(m.id for m in members))
        if known != self._remembered and self._kept(_MEMBERS_META, known, "the members"):
            self._remembered = known

    def remember_leaves(self, leaves: dict[str, str]) -> None:
        if self._kept(_LEAVES_META, json.dumps(leaves), "the peers that left"):
            self.leaves = leaves

    def remember_handed(self, handed: bool) -> None:
        if self._kept(_HANDED_META, "1" if handed else "", "the hosts handed on"):
            self.handed_on = handed

    def _kept(self, key: str, value: str, what: str) -> bool:
        """``value`` kept in the shard as ``key``; False, said, if the disk refused."""
        try:
            with self._shard.transaction():
                self._shard.set_meta(key, value)
        except StorageError as exc:
            log.warning("cannot remember %s: %s", what, exc)
            return False
        return True


def _leaves(text: str | None) -> dict[str, str]:
    """The leaves kept; none if the value is not what this version writes (a shard
    edited by hand, or a later version's): then the hosts wait, as before."""
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {p: k for p, k in value.items() if isinstance(k, str)}
