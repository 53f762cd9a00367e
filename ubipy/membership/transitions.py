"""The legal transitions of another member's state, and Lifeguard's suspicion timer:
everything that decides how a rumour changes what this peer believes lives here."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Final

from ubipy.membership.events import ChangeKind, MembershipConfig
from ubipy.membership.messages import LIVE_STATES, Member, MemberState, Update

ALIVE: Final = MemberState.ALIVE
SUSPECT: Final = MemberState.SUSPECT
DEAD: Final = MemberState.DEAD
LEFT: Final = MemberState.LEFT


# The legal transitions of another member's state, all in one place:
# (state we hold or None if unknown, state rumoured) -> (the rumour's incarnation
# must be strictly newer than ours rather than at least as new, event to report).
# Anything not listed is ignored. ALIVE needs a strictly newer incarnation (that
# is what refuting means); accusations win ties. SUSPECT -> SUSPECT is not a
# transition but a Lifeguard confirmation, handled apart. Tombstones for unknown
# members are kept quietly so a late ALIVE of the same incarnation cannot undo them.
TRANSITIONS: Final[dict[tuple[MemberState | None, MemberState], tuple[bool, ChangeKind | None]]] = {
    (None, ALIVE): (False, ChangeKind.JOINED),
    (None, DEAD): (False, None),
    (None, LEFT): (False, None),
    (ALIVE, ALIVE): (True, None),
    (ALIVE, SUSPECT): (False, ChangeKind.SUSPECT),
    (ALIVE, DEAD): (False, ChangeKind.DEAD),
    (ALIVE, LEFT): (False, ChangeKind.LEFT),
    (SUSPECT, ALIVE): (True, ChangeKind.REFUTED),
    (SUSPECT, DEAD): (False, ChangeKind.DEAD),
    (SUSPECT, LEFT): (False, ChangeKind.LEFT),
    (DEAD, ALIVE): (True, ChangeKind.JOINED),
    # Its own word, from across a cut that healed: held dead, it stopped on purpose.
    # (Ignored, the majority lease, which drops a member on its leave, kept waiting
    # for a tie-breaking peer that had left: a review's fuzzer.)
    (DEAD, LEFT): (False, ChangeKind.LEFT),
    (LEFT, ALIVE): (True, ChangeKind.JOINED),
}


# For how many probe intervals after a member held dead comes back its accusations
# are only suspicions: those it made while cut off still arrive.
STALE_PROBES: Final = 10


def stale_death(
    update: Update,
    held: Member | None,
    accuser: Member | None,
    revived: float | None,
    now: float,
    cfg: MembershipConfig,
) -> bool:
    """Whether ``update`` declares dead a member held live on the word of another
    member held dead or gone, or back from the dead for under ``STALE_PROBES`` probe
    intervals (``revived``: when it came back, if it did). That is a rumour from
    across a cut that has healed: taken as a death, it would take a live member out
    of the ring until the member refutes it, and move its hosts twice. It is taken
    as a suspicion instead, which the member refutes without leaving the ring, as a
    death learnt in bulk is (the caller's own deaths are never in doubt)."""
    if update.state is not DEAD or held is None or held.state not in LIVE_STATES:
        return False
    if accuser is None:
        return False  # a member unknown here: its word is taken as before
    if accuser.state not in LIVE_STATES:
        return True
    return revived is not None and now - revived < STALE_PROBES * cfg.probe_interval


# Up to this many members the suspicion time-out grows with log10 N, as memberlist's;
# past it, no more.
_SCALE_KNEE: Final = 100


def suspicion_scale(live: int) -> float:
    """How many times ``suspicion_mult`` probe intervals a suspicion lasts at least,
    among ``live`` members.

    memberlist's node scale is log10 N, at least 1 (so small clusters, N < 10, get
    ``suspicion_mult`` probe intervals, not less), and it stops growing here at 100
    members (8 s). The time-out must outlast two spreads of a rumour (the suspicion
    to the suspect, its refutation back), and gossip to 3 members every 0.2 s reaches
    N members in about log3 N rounds: under 3 s for both at N = 1000, under 4 s at
    10,000. Growing on, 12 s at N = 1000 left crash detection by all at 13.6 to
    15.6 s; half as fast (10 s), at up to 16.1 s, past the 15 s a thousand-member
    cluster is asked for (bench/membership_scale.py).
    """
    return min(max(1.0, math.log10(max(1, live))), math.log10(_SCALE_KNEE))


@dataclass(slots=True)
class Suspicion:
    """Lifeguard's suspicion timer: starts at ``max`` and falls towards ``min`` as
    distinct accusers confirm, log-scaled, reaching ``min`` at ``k`` confirmations."""

    start: float
    k: int
    min_timeout: float
    max_timeout: float
    accusers: set[str]
    confirmations: int = 0
    deadline: float = field(init=False)

    @classmethod
    def begin(cls, now: float, accuser: str, live: int, cfg: MembershipConfig) -> Suspicion:
        """A suspicion raised by ``accuser`` at ``now`` among ``live`` members."""
        # Lifeguard expects k independent confirmations; two fewer than the
        # multiplier, so the nominal time-out is met a couple of probes early,
        # and none where there are too few others to confirm.
        k = cfg.suspicion_mult - 2
        if live - 2 < k:
            k = 0
        min_timeout = cfg.suspicion_mult * suspicion_scale(live) * cfg.probe_interval
        max_timeout = cfg.suspicion_max_timeout_mult * min_timeout
        return cls(now, k, min_timeout, max_timeout, {accuser})

    def __post_init__(self) -> None:
        self.deadline = self.start + (self.max_timeout if self.k >= 1 else self.min_timeout)

    def confirm(self, accuser: str) -> bool:
        """Count a new accuser; True if it was new (and so worth re-gossiping)."""
        if self.confirmations >= self.k or accuser in self.accusers:
            return False
        self.accusers.add(accuser)
        self.confirmations += 1
        frac = math.log(self.confirmations + 1) / math.log(self.k + 1)
        timeout = self.max_timeout - frac * (self.max_timeout - self.min_timeout)
        self.deadline = self.start + max(self.min_timeout, timeout)
        return True
