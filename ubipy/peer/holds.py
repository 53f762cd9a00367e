"""The new owner's side of a hand-off: the hosts it gained, held until every peer that
might hold them has said it swept (its HANDOFF_DONE), died (then for the fence, and
with replicas until the holders of the dead peer's copies have swept), or the limit
passed; and the holds made when a peer dies, comes back from a stop or sees a
majority again after a pause.

A mixin of :class:`~ubipy.peer.handoff.Handoff`, whose state it reads and changes.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import trio

from ubipy.net import Send
from ubipy.peer.crawler import Crawler
from ubipy.peer.replica import Replicator
from ubipy.peer.wakeup import Wakeup
from ubipy.ring import Owned, Ring
from ubipy.wire import MAX_LEAVES_TOLD, HandoffDone
from ubipy.wording import counted

log = logging.getLogger("ubipy.peer.handoff")  # the hand-off's log

__all__ = ["NO_RING", "SWEEP_AGAIN", "Hold", "HoldsMixin"]

# How soon a sweep that left hosts here is tried again (and a peer asked to sweep is
# asked again): the first wait, the longest.
SWEEP_AGAIN = (2.0, 30.0)

# Peers that die within this many seconds of each other died of one cut (see
# peer_gone): a host whose every copy was on them has none on this side.
_TOGETHER = 60.0

# How long a hold lasts before status and the progress line say why hosts wait.
_HOLDING_SAID = 5.0

# The ring key of a hold made under no ring change of this peer's own (back from
# a stop, or a peer died): only a sweep under this peer's current ring releases it.
NO_RING = ""


@dataclass(slots=True)
class Hold:
    """Hosts gained in one ring change, held until every peer that might have held
    them has swept under that ring (its HANDOFF_DONE), died, or the limit passed."""

    # What this peer owned under the ring before (kept without that ring: QA).
    mine: Owned
    ring_key: str
    waiting: set[str]
    until: float
    # Non-zero: only a DONE answering this request, under the current ring, counts.
    token: int = 0
    # Not empty: the hold is on the hosts every copy of which was on these peers (all
    # dead) under ``ring``, not on those this peer did not own.
    orphans_of: frozenset[str] = frozenset()
    ring: Ring | None = None
    # Set: the hold is on the hosts a dead peer owned (held for its return), not on
    # those this peer did not own.
    theirs: Owned | None = None
    # Made on a death, to wait for the sweeps that hand the dead peer's copies here
    # (_wait_for_copies): a later death neither fences nor copies it again.
    for_copies: bool = False
    # When it was made (trio's clock).
    since: float = -math.inf
    # Made for a dead peer's hosts with no copy of them (one replica): expired, the
    # peer did not come back, and its hosts' URLs are lost (HoldsMixin.on_hosts_lost).
    lost_if_expired: bool = False
    # Made at a start after a leave that handed hosts on (see Handoff): once none is
    # left, the shard forgets that leave's hand-offs.
    after_leave: bool = False


class HoldsMixin:
    """The holds on gained hosts (see the module's docstring)."""

    self_id: str
    _crawler: Crawler
    _send: Send
    _address_of: Callable[[str], str | None]
    _ring: Ring
    _alive: frozenset[str]
    _grace: float
    _fence: float
    _copies: int
    _orphan_grace: float
    _hold_limit: float
    _dead: dict[str, float]
    # Told when a dead peer's hosts were lost with it: the grace for its return passed,
    # and no copy of them is kept (refreshing's relink: links are all that find them).
    on_hosts_lost: Callable[[], None]
    _gone_ids: set[str]
    _left_now: frozenset[str]
    _known_dead: set[str]
    _copies_here: Replicator | None
    _holds: list[Hold]
    _swept: dict[str, str]
    _leaves_kept: dict[str, str]
    # Told the leaves whose sweeps are done, whenever they change (ubipy.peer.members).
    remember_leaves: Callable[[dict[str, str]], None]
    _handed_on: bool
    remember_handed: Callable[[bool], None]
    _kick: Wakeup
    _holds_changed: Wakeup
    _tokens: random.Random
    _asked: dict[str, int]
    _asking: set[tuple[str, int]]
    _nursery: trio.Nursery | None

    def ring_changed(
        self,
        ring: Ring,
        alive: frozenset[str],
        handing: frozenset[str],
        *,
        sweep: bool = True,
        dead: frozenset[str] = frozenset(),
    ) -> None:
        """The ring is now ``ring``; ``handing`` are the peers that will hand off
        what they held (the live ones and those that left gracefully, not the dead);
        ``dead`` those membership knows dead. Without ``sweep`` the caller sweeps
        itself (a peer leaving)."""
        old, self._ring, self._alive = self._ring, ring, alive
        for peer in sorted(self._known_dead & alive):
            # Its death was said without -v; its return only showed as "peers 4/4" (QA).
            log.warning("member %s is back", peer)
        self._gone_ids.difference_update(alive)
        self._gone_ids.update(handing - alive)  # those that left
        # Membership's word on who left (its latest incarnation's state) and who died:
        # a leave another peer tells of is taken only for a peer that left (a review:
        # one that came back since and died was released from its grace and fence).
        self._left_now = handing - alive
        self._known_dead.difference_update(alive)
        self._known_dead.update(dead)
        for peer in alive & self._dead.keys():
            del self._dead[peer]
        # One back after leaving holds hosts again: its leave's sweep says nothing now.
        for peer in [p for p in alive if self._left_swept(p)]:
            del self._swept[peer]
        self._release_leaves()
        if list(old.members) == [self.self_id] and len(alive) > 1:
            # A peer that was alone (just started, or back after a crash) knows
            # nothing of who held what meanwhile: whatever it owns, it gains.
            old = ring.for_members(alive - {self.self_id})
            # Nor of the deaths before: a member dead a moment ago may be back within
            # its grace, and a newcomer fetched its hosts at once, pages it had fetched
            # (QA: 12 twice). Its grace is waited out again from now.
            # What it owned then is what it owned in the ring before this peer came.
            for peer in sorted(dead - self._gone_ids - {self.self_id}):
                self._gone_ids.add(peer)
                self._known_dead.add(peer)
                # A peer of the last run found dead since: waited for until its fence,
                # as a death seen here is, not to the limit (QA: 158-175 s).
                self._fenced(peer)
                self._grace_hold(peer, lost=False, among=old)
        # Any other peer may hold a gained host (views of the ring differ for a
        # moment while membership settles), so all of them are waited for.
        key = ring.key
        # A peer may have finished its sweep under this very ring before this
        # peer saw the ring change: its DONE has already come. One that left and has
        # done its leave's sweep (under a ring without it) holds nothing more: it is
        # not waited for under a later ring, for which it can send no DONE (a second
        # leave held every host gained for the hold's whole limit).
        waiting = {
            p
            for p in handing - {self.self_id}
            if self._swept.get(p) != key and (p in alive or not self._left_swept(p))
        }
        if waiting:
            self._add_hold(old, key, waiting, self._hold_limit)
        for peer, swept in list(self._swept.items()):
            if swept == key:
                self.release_from(peer, key)
                if self._copies_here is not None and self._nursery is not None:
                    # Its DONE came before this ring here: its stale copies go now.
                    self._nursery.start_soon(self._copies_here.swept, peer, key)
        # A DONE answering our request must be under the ring we have now: ask again.
        self._ask_again()
        if sweep:
            self._kick.set()

    def _left_swept(self, peer_id: str) -> bool:
        """Whether ``peer_id``'s last sweep was under a ring without it: its leave's."""
        key = self._swept.get(peer_id)
        return key is not None and peer_id not in key.split(",")

    def leaves(self) -> dict[str, str]:
        """The peers that left whose leave's sweep is done, and are neither back nor
        known dead since: they hold nothing, under any ring. The latest ones, as many as
        a DONE tells, each with "" for a ring (one without it: see _left_swept)."""
        done = [
            p
            for p in self._swept
            if p not in self._alive and p not in self._known_dead and self._left_swept(p)
        ]
        # No ring: a leave's is a list of every member, and only its lack of the
        # peer counts (64 of them at N = 300 made a DONE of 330 KB: a review).
        return dict.fromkeys(done[-MAX_LEAVES_TOLD:], "")

    def heard_of_leaves(self, leaves: Iterable[tuple[str, str]]) -> None:
        """Another peer saw these leaves' sweeps done. Told on, so that a peer started
        after a leave (or since restarted) does not hold the hosts it gains for the
        whole limit, waiting for a DONE the one that left sent before it was here (QA:
        three minutes at each ring change). Taken only of a peer that membership here
        says left: not of one alive, nor of one dead (back since, it may hold hosts)."""
        for peer, key in leaves:
            left = peer in self._left_now and peer not in self._alive
            if left and peer not in key.split(",") and not self._left_swept(peer):
                self._swept[peer] = ""  # a ring without it: all that counts of the key
        self._release_leaves()

    def _release_leaves(self) -> None:
        """No hold waits for a peer gone whose leave's sweep is done; the shard keeps
        who they are, for this peer's next start."""
        leaves = self.leaves()
        if leaves != self._leaves_kept:
            self._leaves_kept = leaves
            self.remember_leaves(leaves)
        changed = False
        for hold in self._holds:
            if not hold.waiting.isdisjoint(leaves):
                hold.waiting.difference_update(leaves)
                changed = True
        if changed:
            self._holds = [h for h in self._holds if h.waiting]
            self._released()

    def peer_gone(self, peer_id: str) -> None:
        """A dead peer hands nothing over: hold what it owned for the grace period, in
        case it comes back with its history, and at least for the fence: cut off
        rather than dead, it stops fetching within its lease, and its hosts must see
        nobody new before then. For the same reason a hold that waited for it waits
        until the fence at most, not until now: what it may hold under an older view
        (a host it was given while this peer was cut off, one it owned before a join)
        is not fetched here before it has stopped."""
        self._gone_ids.add(peer_id)
        self._known_dead.add(peer_id)
        fenced = self._fenced(peer_id)
        if self._copies > 1 and fenced and peer_id not in self._ring.members:
            self._wait_for_copies(peer_id, fenced)
        if self._grace_hold(peer_id, lost=self._copies < 2):
            # Said without -v: the operator saw only "peers 2/3" (QA).
            hold = max(self._grace, self._fence)
            log.warning("member %s is dead: its hosts held %.1f s for its return", peer_id, hold)
        if self._copies > 1 and self._orphan_grace > 0 and peer_id not in self._ring.members:
            # Deaths within a minute of each other are one cut: hours apart, the first
            # one's hosts were copied again in between, and a host whose two copies
            # were on them has a copy here (held a day for nothing, it was).
            now = trio.current_time()
            self._dead[peer_id] = now
            self._dead = {p: t for p, t in self._dead.items() if t > now - _TOGETHER}
            if len(self._dead) >= self._copies:  # fewer cannot hold every copy
                dead = frozenset(self._dead)
                # Holds on every host's path to a job: the newest covers the older ones
                # of the same cut (their dead are its dead still, and more).
                self._holds = [
                    h for h in self._holds if not (h.orphans_of and h.orphans_of <= dead)
                ]
                with_them = self._ring.for_members([*self._ring.members, *dead])
                self._add_hold(with_them, NO_RING, set(dead), self._orphan_grace, orphans_of=dead)

    def _fenced(self, peer_id: str) -> list[Hold]:
        """The holds that waited for the dead ``peer_id`` wait for it until its fence
        at most (returned: those of them that may be fenced)."""
        fenced = [
            h for h in self._holds if peer_id in h.waiting and not h.orphans_of and not h.for_copies
        ]
        self.release_from(peer_id, None)
        if self._fence > 0 and fenced:
            until = trio.current_time() + self._fence
            for h in fenced:
                self._holds.append(replace(h, waiting={peer_id}, until=min(h.until, until)))
            self._holds_changed.set()
        return fenced

    def _grace_hold(self, peer_id: str, *, lost: bool, among: Ring | None = None) -> bool:
        """Hold the hosts the dead ``peer_id`` owned (among the members of this ring, or
        of ``among``), for its grace or the fence; whether there was one to make. Its
        own hosts alone: a hold on all that was not this peer's held those of a peer
        that left during the grace, never the dead one's, to its end (QA: 86 s)."""
        hold = max(self._grace, self._fence)
        if hold <= 0 or peer_id in self._ring.members:
            return False
        ring = among or self._ring
        with_it = ring.for_members([*ring.members, peer_id])
        self._add_hold(with_it, NO_RING, {peer_id}, hold, lost=lost, theirs=peer_id)
        return True

    def _wait_for_copies(self, peer_id: str, fenced: list[Hold]) -> None:
        """``peer_id`` died before it said it had handed over the hosts the holds
        ``fenced`` waited for: those it had not are known only to the peers holding
        its copies, whose sweep under the ring without it hands them here
        (Replicator.strays). Until every live peer has swept under this ring, those
        hosts stay held (else a page it fetched was fetched again here)."""
        key = self._ring.key
        waiting = {p for p in self._alive - {self.self_id, peer_id} if self._swept.get(p) != key}
        if not waiting:
            return
        until = trio.current_time() + self._hold_limit
        for h in fenced:
            self._holds.append(
                replace(
                    h, ring_key=NO_RING, waiting=set(waiting), until=until, token=0, for_copies=True
                )
            )
        self._holds_changed.set()
        log.info(
            "hosts %s had not handed over wait for %s to sweep", peer_id, ", ".join(sorted(waiting))
        )

    def resumed(self, others: frozenset[str]) -> None:
        """This peer has a majority in sight again after a pause: while it was cut off,
        any of ``others`` may have been given its hosts. Every host it owns waits
        until each of them, asked now, has swept under the ring it has then (or died,
        or the limit passed). Asked, because a DONE it said before may arrive only now,
        held up by the partition, and the ring may read the same again."""
        waiting = set(others - {self.self_id})
        if not waiting:
            return
        token = self._tokens.randrange(1, 2**62)
        self._add_hold(Ring(waiting), NO_RING, waiting, self._hold_limit, token)
        log.info("every host held until %s have swept", ", ".join(sorted(waiting)))
        self._ask_again()

    def _ask_again(self) -> None:
        """Ask every peer a request-bound hold waits for to sweep and say so, now and
        again until it has (an ask lost on a connection that broke, right after a
        heal, would leave the hold to its limit)."""
        for hold in self._holds:
            for peer in hold.waiting if hold.token else ():
                if self._nursery is None:
                    return
                self._nursery.start_soon(self._ask, peer, hold.token)
                if (peer, hold.token) not in self._asking:
                    self._asking.add((peer, hold.token))
                    self._nursery.start_soon(self._keep_asking, peer, hold.token)

    async def _ask(self, peer: str, token: int) -> None:
        address = self._address_of(peer)
        if address is not None:
            await self._send(address, HandoffDone("", token, ask=True))

    async def _keep_asking(self, peer: str, token: int) -> None:
        wait = SWEEP_AGAIN[0]
        try:
            while True:
                await trio.sleep(wait)
                if not any(h.token == token and peer in h.waiting for h in self._holds):
                    return
                await self._ask(peer, token)
                wait = min(2 * wait, SWEEP_AGAIN[1])
        finally:
            self._asking.discard((peer, token))

    def asked(self, peer_id: str, token: int) -> None:
        """``peer_id`` asks for a sweep, and DONEs that say they came after it."""
        self._asked[peer_id] = token
        self._kick.set()

    def release_from(self, peer_id: str, key: str | None, token: int = 0) -> None:
        """``peer_id`` finished its sweep under the ring ``key`` (None: it is dead),
        answering our request ``token`` if not 0."""
        if key is not None:
            self._swept.pop(peer_id, None)  # the latest last: leaves() tells the latest
            self._swept[peer_id] = key
            if peer_id not in key.split(","):
                self._release_leaves()  # its leave's: it holds nothing now
        # A sweep under the ring this peer has now covers every host the sender
        # holds, whatever ring the hold was made under.
        current = key is None or key == self._ring.key
        changed = False
        for hold in self._holds:
            if hold.token:
                counts = key is None or (current and token == hold.token)
            else:
                counts = current or bool(key and hold.ring_key == key)
            if peer_id in hold.waiting and counts:
                hold.waiting.discard(peer_id)
                changed = True
        if changed:
            self._holds = [h for h in self._holds if h.waiting]
            self._released()

    def _released(self) -> None:
        """Holds were let go: the crawler looks at their hosts again; once no hold is
        left that a leave's hand-offs made, every host they handed is back or given up."""
        self._crawler.release_held()
        if self._handed_on and not any(h.after_leave for h in self._holds):
            self._handed_on = False
            self.remember_handed(False)

    def _held(self, host: str) -> bool:
        # A host that is no longer ours gets nothing more from here: its state is
        # on its way to the new owner, and must not change under the hand-off.
        if self._ring.owner(host) != self.self_id:
            return True
        for h in self._holds:
            if h.ring is not None:
                if h.orphans_of.issuperset(h.ring.successors(host, self._copies)):
                    return True
            elif h.theirs is not None:
                if h.theirs.owns(host):
                    return True
            elif not h.mine.owns(host):
                return True
        return False

    def _add_hold(
        self,
        old_ring: Ring,
        key: str,
        waiting: set[str],
        limit: float,
        token: int = 0,
        orphans_of: frozenset[str] = frozenset(),
        *,
        lost: bool = False,
        theirs: str | None = None,
        after_leave: bool = False,
    ) -> None:
        now = trio.current_time()
        hold = Hold(
            old_ring.owned_by(self.self_id),
            key,
            waiting,
            now + limit,
            token,
            orphans_of,
            old_ring if orphans_of else None,
            None if theirs is None else old_ring.owned_by(theirs),
            since=now,
            lost_if_expired=lost,
            after_leave=after_leave,
        )
        self._holds.append(hold)
        self._holds_changed.set()

    def holding(self, now: float) -> str | None:
        """Why hosts wait here for other peers, once they have for a while (the holds of
        a healthy ring change last a moment): a peer back from a stop waited up to two
        minutes for the peers of its last ring in silence (QA)."""
        long = [h for h in self._holds if now - h.since >= _HOLDING_SAID]
        if not long:
            return None
        waiting = sorted(set().union(*(h.waiting for h in long)))
        named = ", ".join(waiting[:3]) + (", ..." if len(waiting) > 3 else "")
        left = max(h.until for h in long) - now
        if self._known_dead.issuperset(waiting):
            # Not "until it is found dead" of a peer the table above shows dead (QA).
            dead = counted(len(waiting), "dead peer")
            return f"hosts held for {dead} ({named}) to come back, {left:.0f} s at most"
        if self._alive.isdisjoint(waiting) and self._gone_ids.isdisjoint(waiting):
            # Of the last run, not in sight since this start: no table names them, and
            # they cannot be "found dead" (QA, after a whole cluster's restart).
            them = "it, or its" if len(waiting) == 1 else "them, or their"
            return (
                f"hosts held for {counted(len(waiting), 'peer')} of the last run ({named}), "
                f"not seen since this start: start {them} hosts are crawled afresh in "
                f"{left:.0f} s"
            )
        return (
            f"hosts held until {counted(len(waiting), 'peer')} ({named}) "
            + ("hands them over or is" if len(waiting) == 1 else "hand them over or are")
            + f" found dead, {left:.0f} s at most"
        )

    async def _expire_holds(self) -> None:
        """Let go of holds whose time is up, when it is up (a parked host is looked at
        again only when something releases it)."""
        while True:
            await self._holds_changed.wait(min((h.until for h in self._holds), default=None))
            now = trio.current_time()
            expired = [h for h in self._holds if h.until <= now]
            if expired:
                self._holds = [h for h in self._holds if h.until > now]
                for hold in expired:
                    log.info("hold on hosts awaiting %s expired", ", ".join(sorted(hold.waiting)))
                if any(h.lost_if_expired for h in expired):
                    self.on_hosts_lost()
                self._released()
