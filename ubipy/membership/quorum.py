"""Who may fetch while the network is split: a majority lease, as a pure class (no
I/O, no clock of its own; the driver passes ``now`` in).

SWIM cannot tell a dead peer from one cut off: during a partition each side
declares the other dead and, left alone, would take the other side's hosts over
while their owners, cut off from the peers but not from the web, go on fetching
them. So a peer fetches only while it holds a *lease*: within the last ``lease``
seconds it has heard directly (any authentic frame) from a strict majority of the
*base*, the last membership agreed while a majority was in sight, itself included.
An exact half holds the lease only if it includes the smallest id of the base (a
deterministic tie-break: of a 2|2 split one side goes on, and of a two-peer
cluster the peer with the smaller id).

The base changes only while the lease is held: a member that joins is added, one
declared dead or gone is removed. A side without a majority can therefore never
shrink the base to a majority of its own; the other side can, so a crashed
minority is still taken over and the cluster goes on shrinking one death at a
time.

Counting only members that membership holds alive or suspect (``live``) keeps a
side that declared the others dead from counting them again when their frames get
through before membership has taken them back: until then its ring still gives it
their hosts.

A peer new to a cluster (started with ``--join``, nothing stored) has no base.
Starting from itself alone, it would make a base of two with the first member it met,
and one that joined the cut-off side of a partition would crawl beside the majority.
So it is *pending*: it holds no lease until a member that holds one answers with a
base naming it (:meth:`Quorum.answered`); a holder adds every live member missing
from its base that has answered its ping (:meth:`Quorum.admit_live`), the newcomer
that asks included.
Newcomers that meet only newcomers that have heard of no base (a cluster whose peers
all started naming each other) *found* one: the smallest id of them, with all of them
in it (:meth:`Quorum.found`); the others take it from its answers. A peer whose own
base does not let it hold (the cluster changed while it was away or cut off) asks
and takes a holder's base in the same way.

A peer back from a kill (or a crash) has the base its last run kept, which proves
nothing by itself: while it was away the others may have dropped it from theirs and
grown another, and a stale base of three of which it sees one other member is a
majority the cluster's real one knows nothing of. So it is *restoring*
(``restored``): it holds no lease on that base until a majority of it answers its
pings and *still counts it* (each answered its ask with a base that names it and a
majority of which, and of its joint base, they are too: no more than those members
would hold on by themselves), or until a member that holds takes it in, as a
newcomer is (:meth:`Quorum.restore`, :meth:`Quorum.answered`). When a whole cluster
is killed and started again, nobody holds, and the kept bases, alike, let a majority
restore; a peer that was alone holds again at once. (A peer that *left* kept no base
at all: it is new to the cluster when it comes back, see ``ubipy.peer.lease``.)

A member added to the base (and a base taken from a holder) is not trusted at once:
a peer adds members while it holds, and it may hold for up to a lease after it was
cut off. A newcomer that joined it then would make a base in which the cut-off pair
is the tie-breaking half, the majority's own base lacking the newcomer. So, as in
Raft's joint consensus, the base before the additions stays *joint* with the new
one: the lease needs a majority of both, until a majority of the old base has
answered pings sent after the last addition, which a cut-off peer never gets.

The other half of the rule is on the majority's side: it takes a lost member's
hosts over only ``fence(lease)`` after declaring it dead, by then any peer
that lost sight of the majority has stopped (with margin for clock rates, which
only time intervals depend on, never clock values).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from dataclasses import dataclass

# How much faster one machine's clock may run than another's, as a rate.
CLOCK_RATE_MARGIN = 0.1
# On top: a frame in flight, a scheduler's late wake-up.
FENCE_SLACK = 1.0
# Base members kept in sight beyond a bare majority (Quorum.to_keep): one may go quiet
# without the lease depending on the next one's first answer.
KEEP_MARGIN = 1


def fence(lease: float) -> float:
    """How long after losing a member the majority waits before fetching its hosts:
    by then the member, if it is alive but cut off, has stopped fetching."""
    return lease * (1 + CLOCK_RATE_MARGIN) + FENCE_SLACK


@dataclass(frozen=True, slots=True)
class Sight:
    """What a peer sees of its base now."""

    heard: int  # base members heard from within the lease, self included
    size: int  # members of the base
    holds: bool  # whether that is a majority (or the tie-breaking half)
    pending: bool = False  # new, and not yet in a base that a holder gave it
    # Of the base before additions not yet confirmed: (heard, size).
    joint: tuple[int, int] | None = None
    # Back with the base its last run kept, not yet counted again (``heard``: those of
    # it in sight that still count this peer, itself included).
    restoring: bool = False
    # Pending, with only new peers in sight, and a base heard of: nobody founds one.
    among_new: bool = False

    def __str__(self) -> str:
        if self.pending and self.among_new:
            return (
                "not yet counted by a member that holds the majority lease, and every peer "
                "in sight is new too (docs/partitions.md: every peer new)"
            )
        if self.pending:
            return "not yet counted by a member that holds the majority lease"
        if self.restoring:
            return (
                "not yet counted by a member that holds the majority lease, nor by a "
                f"majority of the base it kept ({self.heard} of {self.size} peers)"
            )
        text = f"hears from {self.heard} of {self.size} peers"
        if self.joint is not None:
            text += f" ({self.joint[0]} of the {self.joint[1]} before the last joined)"
        return text


class Quorum:
    def __init__(
        self,
        self_id: str,
        base: Iterable[str],
        *,
        lease: float,
        newcomer: bool = False,
        joint: Iterable[str] = (),
        restored: bool = False,
        returned: bool = False,
        left_base: Iterable[str] = (),
    ) -> None:
        """``base`` (and ``joint``, if unconfirmed) to start from: ``restored``, as the
        last run kept them (the peer restores them, see the module's docstring); a
        ``newcomer`` (one that joins others) with none is pending, any other peer
        with none founds a base of itself; ``returned``: the last run left (see
        :attr:`returned`), from ``left_base``."""
        if lease <= 0:
            raise ValueError("the lease must be positive")
        self.self_id = self_id
        self.lease = lease
        self._base = set(base)
        self._pending = newcomer and not self._base
        if not self._pending:
            self._base.add(self_id)
        self._heard: dict[str, float] = {}
        self._live: frozenset[str] = frozenset({self_id})
        # While pending: whether a base exists somewhere (an answer named one, or a
        # newcomer said it had heard of one), and what each newcomer answered.
        self._informed = False
        self._newcomers: dict[str, bool] = {}
        # Pending, and none of its join addresses has answered yet: it was told where a
        # cluster is, which may be up there, so it founds none with the new peers that
        # reach it meanwhile, and answers no ask (its word would let them found one).
        # Peers whose first named a bootstrap not up yet, and the next the first, made
        # a cluster of their own, then a second with the bootstrap (QA). The driver
        # clears it when an address answers (:meth:`answered_at_join`).
        self.expecting = self._pending
        self._answered_by: str | None = None
        # The base before additions not yet confirmed, and when the last was made (a
        # joint stored by the last run: any answer from now on confirms it).
        self._joint: set[str] | None = (set(joint) & self._base) or None
        self._joint_since = -math.inf
        # Back with a kept base: not trusted until restored. What each member that
        # still counts this peer answered: its base and its joint base.
        self._restoring = restored and bool(self._base - {self_id})
        self._counting: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
        # Back after a leave (its last run kept no base), and pending: see returned.
        # The base it left, and the newcomers whose latest answer says they left too:
        # until each other member of it is one of those, in sight, that base may still
        # be a cluster, out of sight (see informed).
        self._returned = returned
        self._left_base = set(left_base) - {self_id}
        self._said_left: set[str] = set()

    @property
    def pending(self) -> bool:
        return self._pending

    @property
    def left_last_run(self) -> bool:
        """Its last run left the cluster (kept no base), counted again since or not."""
        return self._returned

    @property
    def returned(self) -> bool:
        """Pending after it left on purpose in its last run: a member whose base still
        names it (its leave was lost: a cut) may drop it, as that leave would have
        made it (see :meth:`gone`)."""
        return self._pending and self._returned

    @property
    def restoring(self) -> bool:
        """Back with the base its last run kept, and not yet counted again."""
        return self._restoring

    @property
    def informed(self) -> bool:
        """Pending, but a base has been heard of: this peer may not found one. So is a
        peer back after a leave, of the base it left, until every other member of it
        is in sight and says it left too (a whole cluster stopped and started again):
        back new, uninformed, one founded a base with a newcomer beside the cluster it
        had left, out of sight, and both crawled the same hosts (a review's fuzzer)."""
        unsettled = self.returned and not self._left_base <= self._said_left & self._live
        return self._informed or unsettled

    @property
    def base(self) -> frozenset[str]:
        return frozenset(self._base)

    @property
    def joint(self) -> frozenset[str] | None:
        """The base before additions a majority of it has not yet confirmed."""
        return None if self._joint is None else frozenset(self._joint)

    def heard(self, member_id: str, now: float) -> None:
        """``member_id`` answered a ping sent at ``now``."""
        if now > self._heard.get(member_id, -math.inf):
            self._heard[member_id] = now
        if self._joint is not None and member_id in self._joint:
            self._confirm()

    def set_live(self, live: Iterable[str]) -> None:
        """The members membership holds alive or suspect now."""
        self._live = frozenset(live) | {self.self_id}

    def sight(self, now: float) -> Sight:
        counted, joint = self._counted(now), self._joint
        if self._restoring:
            counted = self._still_counting(counted)
        of_joint = None if joint is None else (len(counted & joint), len(joint))
        others = self._live - {self.self_id}
        among_new = self._pending and bool(others) and others <= self._newcomers.keys()
        return Sight(
            len(counted),
            len(self._base),
            self._holds(counted),
            self._pending,
            of_joint,
            self._restoring,
            among_new and (self.informed or any(self._newcomers.values())),
        )

    def holds(self, now: float) -> bool:
        return self._holds(self._counted(now))

    def expires(self, now: float) -> float | None:
        """When the lease lapses if nothing more is heard; None if it is not held
        (or held with nobody else in the base: forever)."""
        counted = self._counted(now)
        if not self._holds(counted):
            return None
        ends = sorted((self._until(m), m) for m in counted if m != self.self_id)
        for end, member in ends:
            counted.discard(member)
            if not self._holds(counted):
                return end
        return None

    def needed(self, now: float) -> frozenset[str]:
        """The other members of the base, if they may hold no lease without this peer:
        of a base of two, the smaller id; or while a base grown lately may still be
        joint, for them, with one that needs it (its own joint confirmed, theirs need
        not be: a review). They drop it from the base only on its word that it
        leaves, never on its death. Empty otherwise."""
        others = self._base - {self.self_id}
        if self._pending:
            return frozenset()
        if not others:
            # Alone, the others dropped as dead: one cut off, not dead, may count this
            # peer still; not waited for (a stop after a partner's death waited a
            # minute), it learns this peer left when this peer is back (see returned).
            return frozenset()
        joint = self._joint
        lately = now - self._joint_since < 2 * self.lease
        if (
            self._majority(others, self._base)
            and not lately
            and (joint is None or self._majority(others, joint))
        ):
            return frozenset()
        return frozenset(others)

    def outside(self) -> list[str]:
        """The live members not in the base, to ping (:meth:`joined` waits for an
        answer), sorted."""
        return sorted(self._live - self._base)

    def last_heard(self) -> dict[str, float]:
        """The live base members but this one, and when each was last heard from (-inf:
        never)."""
        return {
            m: self._heard.get(m, -math.inf)
            for m in sorted(self._base & self._live)
            if m != self.self_id
        }

    def to_keep(
        self,
        now: float,
        silent: Collection[str] = (),
        heard: dict[str, float] | None = None,
    ) -> dict[str, float]:
        """Of :meth:`last_heard`, those to ask for a sign of life before the lease
        depends on them. While it holds: those heard from last first (so the same ones,
        answering, stay kept), until enough that are not ``silent`` (asked, and not
        answering yet) make a majority of the base, and of the joint base, with
        ``KEEP_MARGIN`` to spare. A silent one stays while it ranks (it is asked again:
        under loss an answer is often just lost) and the next is kept beside it, so a
        member cut off is made up for as soon as its ask is seen unanswered. While the
        lease does not hold, every one. Asking them all, each peer sent N - 2
        pings a second, the cluster N^2: most of an idle peer's CPU at N = 8.
        ``heard``: :meth:`last_heard`, when the caller has it already."""
        heard = self.last_heard() if heard is None else heard
        if self._restoring or not self.holds(now):
            return heard
        me, quiet = self.self_id, frozenset(silent)
        # Of those heard from at the same moment (pings go out together, and answers
        # are dated when they left), the next ones after this peer in id order: each
        # member is then asked by as many peers as it asks.
        ring = sorted(self._base)
        mine = ring.index(me)
        after = {m: (i - mine) % len(ring) for i, m in enumerate(ring)}
        ranked = sorted(heard, key=lambda m: (-heard[m], after[m]))
        kept: set[str] = set()
        for group in (self._base, self._joint or set()):
            # Strictly over half of the group, this peer counted if in it, and a spare.
            wanted = len(group) // 2 + 1 - (me in group) + KEEP_MARGIN
            for member_id in ranked:
                if wanted <= 0:
                    break
                if member_id in group:
                    kept.add(member_id)
                    wanted -= member_id not in quiet
        return {m: at for m, at in heard.items() if m in kept}

    def joined(self, member_id: str, now: float) -> bool:
        """A member joined; added to the base while the lease holds, once it has
        answered a ping within the lease (so the base and the members in sight grow
        together). Counted at once, a member whose answers never arrive (one that
        gave the others an address not its own) was a base member nobody heard: a
        lone peer that took it in held half of a base of two, and, its id the greater,
        never held again, nor could drop it. True if the base changed."""
        if member_id in self._base or self._until(member_id) <= now or not self.holds(now):
            return False
        self._grow(self._base | {member_id}, now)
        return True

    def gone(self, member_id: str, now: float, *, left: bool = False) -> bool:
        """A member died, or ``left`` on purpose; removed from the base while the lease
        holds, and always if it left: a peer that said it leaves fetches nothing more
        (when a whole cluster stops, the last ones would otherwise lose their lease
        as the others go, and abandon what they have in flight). True if the base
        changed."""
        if member_id == self.self_id or member_id not in self._base:
            return False
        if not left and not self.holds(now):
            return False
        self._base.discard(member_id)
        self._counting.pop(member_id, None)
        if self._joint is not None:
            self._joint.discard(member_id)
            if self._joint:
                self._confirm()
            else:  # all of it left or died: nobody's word to wait for
                self._joint = None
        return True

    def admit_live(self, now: float) -> bool:
        """While the lease holds, the live members missing from the base join it, as
        :meth:`joined` adds them: those that joined (or came back) while it did not
        hold here, such as a newcomer on this side of a partition, or every member a
        newcomer saw before a holder counted it. True if the base changed."""
        changed = False
        for member_id in self.outside():
            changed |= self.joined(member_id, now)
        return changed

    def answered(
        self,
        member_id: str,
        base: Collection[str],
        now: float,
        *,
        holds: bool,
        informed: bool,
        joint: Collection[str] = (),
        left: bool = False,
    ) -> bool:
        """``member_id`` answered our ask with its ``base`` (empty: it is pending too),
        whether it ``holds`` the lease on it, its ``joint`` base if it has one, and if
        pending whether it is ``informed``, and whether it ``left`` in its last run (its
        word of the base it left is its own to settle: not taken as this peer's). A
        pending peer takes the base of a holder
        that names it, and so does one whose own base (kept from before a kill, say:
        the cluster may have changed meanwhile) does not let it hold; True if it did.
        A restoring peer notes who still counts it (:meth:`restore`)."""
        if self._pending:
            if not base:
                self._newcomers[member_id] = informed
                (self._said_left.add if left else self._said_left.discard)(member_id)
                self._informed |= informed and not left
                return False
            self._informed = True
            self._newcomers.pop(member_id, None)
        elif self._restoring and not (holds and self.self_id in base):
            if base and self.self_id in base:
                self._counting[member_id] = (frozenset(base), frozenset(joint))
            else:  # its latest word: it has dropped this peer, or has no base
                self._counting.pop(member_id, None)
            return False
        elif self.holds(now):
            return False
        if not base or not holds or self.self_id not in base:
            return False
        self._settle(base)
        # Taken on the holder's word, joint until a majority of what the holder had
        # confirmed answers (the holder may be cut off): its own joint base, which
        # may be older than other newcomers it added, else its base without this peer.
        self._joint = (set(joint) & self._base) or self._base - {self.self_id}
        self._joint_since = now
        return True

    def restore(self, now: float) -> bool:
        """A restoring peer holds on the base it kept once those of it in sight that
        still count it are a majority of it and of its joint base, and of each of
        their own bases and joint bases: the lease that any of them would hold with
        the same answers. Then it is a holder like any other. True if it did."""
        if not self._restoring:
            return False
        counting = self._still_counting(self._counted(now))
        groups = [self._base, *([self._joint] if self._joint else [])]
        for member_id in counting - {self.self_id}:
            base, joint = self._counting[member_id]
            groups += [set(base), *([set(joint)] if joint else [])]
        if not all(self._majority(counting, group) for group in groups):
            return False
        self._restoring = False
        self._counting.clear()
        return True

    def found(self) -> bool:
        """A pending peer whose live members are all pending and have heard of no
        base, as it has not, founds one with them all if it has the smallest id of
        them and is not ``expecting``. True if it did."""
        others = self._live - {self.self_id}
        if not self._pending or self.informed or self.expecting:
            return False
        if self._answered_by is not None and self._answered_by not in self._live:
            return False  # what it says of a base, once a member, is to be heard first
        if not others or self.self_id > min(others):
            return False
        if any(self._newcomers.get(m, True) for m in others):  # unanswered, or informed
            return False
        self._settle(others | {self.self_id})
        return True

    def answered_at_join(self, member_id: str) -> None:
        """``member_id`` answered at a join address: no longer ``expecting``, though it
        founds nothing until that member is live here and has answered its ask (a
        review: between the two, a peer founded a base beside the one it had reached)."""
        self.expecting = False
        self._answered_by = member_id

    def alone(self) -> bool:
        """A pending peer whose try to join reached nobody but itself (every join
        address a name for it) founds a base of itself, as a peer started without any
        does. True if it did."""
        if not self._pending:
            return False
        self._settle({self.self_id})
        return True

    def _grow(self, base: set[str], now: float) -> None:
        """The base becomes ``base``, joint with the old one until confirmed."""
        if self._joint is None:
            self._joint = set(self._base)
        self._joint_since = now
        self._base = base
        self._confirm()  # a base of this peer alone needs nobody's word

    def _confirm(self) -> None:
        """Drop the joint base once a majority of it answered after the last addition."""
        joint, since = self._joint, self._joint_since
        if joint is not None:
            confirmed = {m for m in joint if self._heard.get(m, -math.inf) > since}
            if self._majority(confirmed | ({self.self_id} & joint), joint):
                self._joint = None

    def _settle(self, base: Iterable[str]) -> None:
        self._base = set(base) | {self.self_id}
        self._pending = self._restoring = False
        self._newcomers.clear()
        self._counting.clear()

    def _still_counting(self, counted: set[str]) -> set[str]:
        """Of ``counted``, this peer and those whose base names it (restoring)."""
        return {m for m in counted if m == self.self_id or m in self._counting}

    def _counted(self, now: float) -> set[str]:
        counted = {m for m in self._base & self._live if m != self.self_id and self._until(m) > now}
        counted.add(self.self_id)
        return counted

    def _until(self, member_id: str) -> float:
        # The one expression for "in sight until": counting and expires() must agree
        # to the last bit, or a lease would expire "now" and never.
        return self._heard.get(member_id, -math.inf) + self.lease

    def _holds(self, counted: set[str]) -> bool:
        if self._pending or self._restoring:  # until restore() or a holder's answer
            return False
        joint = self._joint
        return self._majority(counted, self._base) and (
            joint is None or self._majority(counted, joint)
        )

    @staticmethod
    def _majority(counted: set[str], group: set[str]) -> bool:
        """Whether ``counted`` holds a strict majority of ``group``, or exactly half
        with its smallest id."""
        if not group:
            return False
        twice, size = 2 * len(counted & group), len(group)
        return twice > size or (twice == size and min(group) in counted)
