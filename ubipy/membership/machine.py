"""SWIM-style membership as a pure state machine (h11 style).

``Membership`` owns no socket, no clock and no randomness of its own: the driver
feeds it events (``receive`` a message, ``tick`` at ``next_deadline()``, ``join``,
``leave``), passes ``now`` in, and sends the ``Outgoing`` messages it returns. The
same object runs unchanged under trio and in the deterministic simulator of
bench/simnet.py.

The protocol is HashiCorp memberlist's (SWIM + Lifeguard suspicion):

* every probe interval, ping the next member of a shuffled round-robin list; with
  no Ack after the probe time-out, ask ``indirect_checks`` others to ping it
  (PingReq); with no Ack by the end of the interval, suspect it;
* a suspicion becomes a death after ``suspicion_mult * max(1, log10 N) * probe
  interval`` at the earliest, up to ``suspicion_max_timeout_mult`` times that when
  nobody else confirms it (Lifeguard: independent accusers shorten the wait);
* a member that hears itself suspected or declared dead refutes by gossiping a
  higher incarnation; rumours are ordered by incarnation;
* updates are piggybacked on pings and acks and also gossiped to a few members
  every gossip interval while any are pending, each ``retransmit_mult *
  ceil(log10(N + 1))`` times;
* a full push-pull of the member table over a stream every push-pull interval,
  which is also how a peer joins (``join``) and how a restarted peer learns the
  incarnation it must beat;
* a graceful ``leave`` tells every member directly; they drop it at once;
* Serf's reconnect: every reconnect interval a few members declared dead, and the
  join addresses, get a push-pull, for up to the reconnect time-out; a partition
  of any length heals at the next one after the network does.

Two additions to memberlist, both because its few retransmits (4 at N = 8) let
an epidemic miss a member now and then, which the simulator showed: a peer that
learns of live members from a push-pull (a joiner from its seed's reply, either
side of a healed partition) announces itself to each of them directly; and a
member that hears a stale accusation (an incarnation it has already refuted)
gossips its refutation again, which with Lifeguard's buddy
system (a suspect's prober tells it so) lands on the Ack to the very peer that
still suspects it.

The driver rebuilds the ring from ``alive_ids()`` whenever ``drain_events()``
returns an event whose ``changes_ring`` is true.

Stream messages (``Outgoing.stream``): the driver sends a PushPull request as a
stream request; ``receive`` of that request returns exactly one stream Outgoing,
the reply, addressed to the ``sender_address`` it was given, which the driver
writes back on the same connection. Everything else is one datagram each, and
may be lost, duplicated or reordered.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from dataclasses import replace

from ubipy.membership import transitions
from ubipy.membership.answers import Answers
from ubipy.membership.broadcasts import Broadcasts
from ubipy.membership.clash import IdClash
from ubipy.membership.events import ChangeKind, MemberEvent, MembershipConfig, Outgoing
from ubipy.membership.messages import (
    LIVE_STATES,
    MAX_INCARNATION,
    MAX_SEQ,
    Ack,
    Gossip,
    Leave,
    Member,
    Message,
    Ping,
    PingReq,
    PushPull,
    Update,
)
from ubipy.membership.pacing import PushPullPacing
from ubipy.membership.probeorder import Forward, Probe, ProbeOrder, pick
from ubipy.membership.pushpull import merged, table
from ubipy.membership.transitions import ALIVE, DEAD, LEFT, SUSPECT, TRANSITIONS, Suspicion


class Membership:
    """One peer's view of the membership. See the module docstring."""

    def __init__(
        self,
        self_id: str,
        self_address: str,
        config: MembershipConfig,
        rng: random.Random,
        *,
        now: float = 0.0,
        incarnation: int = 0,
    ) -> None:
        self.self_id = self_id
        self.self_address = self_address
        self.config = config
        self._rng = rng
        self._members: dict[str, Member] = {
            self_id: Member(self_id, self_address, ALIVE, incarnation)
        }
        self._since: dict[str, float] = {self_id: now}
        self._live = 1  # members in LIVE_STATES, self included
        self._ids: list[str] | None = None  # the member ids, while none come or go
        self._tombstones: set[str] = set()  # DEAD and LEFT members other than self
        self._left = False
        # Members declared dead, kept for reconnecting well after their tombstones
        # are reaped: id -> (address, when declared dead).
        self._lost: dict[str, tuple[str, float]] = {}
        # When members of those came back (transitions.stale_death): id -> when.
        self._revived: dict[str, float] = {}
        self._seeds: tuple[str, ...] = ()
        self._heard = Answers()
        self.refutations = 0  # how often we outbid a rumour about ourselves
        self._clash = IdClash()
        self._suspicions: dict[str, Suspicion] = {}
        self._broadcasts = Broadcasts()
        self._events: list[MemberEvent] = []
        self._seq = rng.randrange(MAX_SEQ)
        self._probe: Probe | None = None
        self._forwards: dict[int, Forward] = {}
        self._order = ProbeOrder(rng)
        # Random phases, so peers started together do not probe in lockstep.
        self._next_probe = now + rng.random() * config.probe_interval
        self._next_gossip = now
        self._next_push_pull = now + rng.random() * config.push_pull_interval
        self._next_reconnect = now + rng.random() * config.reconnect_interval
        self._pacing = PushPullPacing(config.push_pull_interval)

    # -- queries ---------------------------------------------------------------

    @property
    def incarnation(self) -> int:
        return self._members[self.self_id].incarnation

    @property
    def has_left(self) -> bool:
        return self._left

    @property
    def clash(self) -> str | None:
        """The address of another live process under our id (a copied data
        directory), once its outbids have shown it (:mod:`ubipy.membership.clash`)."""
        return self._clash.with_address

    def members(self) -> list[Member]:
        """Every member known, self and tombstones included, by id."""
        return sorted(self._members.values(), key=lambda m: m.id)

    def member(self, member_id: str) -> Member | None:
        return self._members.get(member_id)

    def alive_ids(self) -> frozenset[str]:
        """The ids that own a share of the ring: ALIVE and SUSPECT, self included."""
        return frozenset(m.id for m in self._members.values() if m.state in LIVE_STATES)

    @property
    def alone(self) -> bool:
        """Whether no other member is alive or suspect in this view."""
        return self._live <= 1

    def drain_answers(self) -> list[tuple[str, float]]:
        """``(member id, when our ping was sent)`` for every ping of ours (a probe or
        :meth:`ping`) that the member answered itself since the last call: proof that
        what we sent reached it, which a frame that merely came from it is not."""
        return self._heard.drain()

    def drain_unreached(self) -> list[str]:
        """The addresses of the members that a probe since the last call reached only
        by way of others (PingReq): alive, but what we send them directly may be lost
        on the way (a link cut between us alone, a connection a firewall forgot)."""
        return self._heard.drain_unreached()

    def drain_events(self) -> list[MemberEvent]:
        """The changes since the last call, oldest first."""
        events, self._events = self._events, []
        return events

    def next_deadline(self) -> float | None:
        """When ``tick`` must next be called (earlier is harmless); None once we
        have left and nothing is pending."""
        deadlines = [s.deadline for s in self._suspicions.values()]
        if self._broadcasts:
            deadlines.append(self._next_gossip)
        if not self._left:
            deadlines.append(self._next_probe)
            deadlines.append(self._next_push_pull)
            if self._lost or self._seeds:
                deadlines.append(self._next_reconnect)
            probe = self._probe
            if probe is not None and not probe.acked and not probe.indirect_sent:
                deadlines.append(probe.started + self.config.probe_timeout)
        return min(deadlines, default=None)

    # -- events from the driver ------------------------------------------------

    def join(self, now: float, seed_addresses: Iterable[str]) -> list[Outgoing]:
        """Push-pull with each seed; any one live seed is enough. The driver may
        call this again if no reply came; the seeds are also dialled when reconnecting."""
        # Announce ourselves too, as soon as we know someone to tell: the seed
        # alone would spend its few retransmits before it knows the whole cluster.
        me = self._members[self.self_id]
        if self.self_id not in self._broadcasts:
            self._enqueue(Update(me.id, me.address, ALIVE, me.incarnation, me.id))
        self._seeds = tuple(dict.fromkeys(seed_addresses))
        state = table(self._members, is_reply=False)
        return [Outgoing(a, state, True) for a in self._seeds if a != self.self_address]

    def leave(self, now: float) -> list[Outgoing]:
        """Tell every member we are leaving. Afterwards we still answer pings and
        gossip what is pending, but neither probe nor refute."""
        if self._left:
            return []
        self._left = True
        me = self._members[self.self_id]
        self._set(replace(me, state=LEFT), now)
        self._events.append(MemberEvent(ChangeKind.LEFT, self._members[me.id], now))
        update = Update(me.id, me.address, LEFT, me.incarnation, me.id)
        self._enqueue(update)
        self._probe = None
        message = Leave(me.id, me.address, me.incarnation)
        # Those that left are told too: when a whole cluster stops at once they are
        # leaving as well, and wait for this leave before they give up handing off.
        return [
            Outgoing(m.address, message)
            for m in self._members.values()
            if m.state is not DEAD and m.id != self.self_id
        ]

    def tick(self, now: float) -> list[Outgoing]:
        """Run every timer that is due at ``now``."""
        out: list[Outgoing] = []
        self._expire_suspicions(now)
        if not self._left:
            self._run_probe(now, out)
            if now >= self._next_push_pull:
                later = self._pacing.next_request(now, self._live)
                if later is not None:
                    self._next_push_pull = later
                else:
                    self._next_push_pull = now + self._pacing.period(self._live)
                    target = self._pick(1, lambda m: m.state is ALIVE)
                    if target:
                        state = table(self._members, is_reply=False)
                        out.append(Outgoing(target[0].address, state, True))
            if now >= self._next_reconnect:
                self._next_reconnect = now + self.config.reconnect_interval
                self._reconnect(now, out)
        if now >= self._next_gossip:
            self._next_gossip = now + self.config.gossip_interval
            if self._broadcasts:
                self._gossip(now, out)
        return out

    def receive(self, now: float, sender_address: str, message: Message) -> list[Outgoing]:
        """Handle one message from ``sender_address`` (for a stream request, where
        the reply goes back)."""
        out: list[Outgoing] = []
        if isinstance(message, Ping):
            if message.target_id != self.self_id:
                return out  # meant for whoever had this address before us
            self._apply_all(message.updates, now)
            out.append(Outgoing(sender_address, Ack(message.seq, self._piggyback())))
        elif isinstance(message, Ack):
            self._apply_all(message.updates, now)
            probe = self._probe
            if probe is not None and probe.seq == message.seq:
                probe.acked = True
                if self._address_of(probe.target_id) == sender_address:
                    probe.direct = True
                    self._heard.answered(probe.target_id, probe.started)
            self._heard.acked(message.seq, sender_address, self._address_of)
            forward = self._forwards.pop(message.seq, None)
            if forward is not None and now <= forward.expires:
                ack = Ack(forward.seq, self._piggyback())
                out.append(Outgoing(forward.requester_address, ack))
        elif isinstance(message, PingReq):
            self._apply_all(message.updates, now)
            seq = self._next_seq()
            self._forwards[seq] = Forward(
                sender_address, message.seq, now + self.config.probe_interval
            )
            ping = Ping(seq, message.target_id, self._piggyback())
            out.append(Outgoing(message.target_address, ping))
        elif isinstance(message, Gossip):
            self._apply_all(message.updates, now)
        elif isinstance(message, PushPull):
            before = {m.id for m in self._members.values() if m.state in LIVE_STATES}
            routine = not message.is_reply and self._routine(sender_address, before)
            for update in merged(message.members, self._members, self.self_id):
                self._apply(update, now)
            answer = not routine or self._pacing.may_answer_routine(now, self._live)
            if not message.is_reply and answer:
                reply = table(self._members, is_reply=True)
                out.append(Outgoing(sender_address, reply, True))
            self._announce(before, sender_address, out)
        elif isinstance(message, Leave):
            self._apply(
                Update(
                    message.member_id, message.address, LEFT, message.incarnation, message.member_id
                ),
                now,
            )
        return out + self._clash.drain()

    def ping(self, now: float, member_id: str) -> Outgoing | None:
        """A ping outside the probe cycle, for a driver that wants a sign of life from
        ``member_id`` (the majority lease): its answer shows in ``drain_answers``, and
        carries gossip. None if the member is unknown."""
        member = self._members.get(member_id)
        if member is None or self._left:
            return None
        seq = self._next_seq()
        self._heard.sent(seq, member.id, now)
        return Outgoing(member.address, Ping(seq, member.id, self._piggyback()))

    def _address_of(self, member_id: str) -> str | None:
        member = self._members.get(member_id)
        return None if member is None else member.address

    def _announce(self, before: set[str], sender_address: str, out: list[Outgoing]) -> None:
        """Tell every member a push-pull just showed us alive about ourselves,
        directly (a joiner: the whole cluster; after a partition heals: the other
        side, which may still hold us dead). With the few retransmits gossip allows at
        small N (4 at N = 8), an epidemic misses some member in several percent of
        joins, which would then not know us until a push-pull; one datagram per
        member once per join is cheap insurance."""
        new = [
            m
            for m in self._members.values()
            if m.state in LIVE_STATES
            and m.id not in before
            and m.id != self.self_id
            and m.address != sender_address
        ]
        if not new:
            return
        me = self._members[self.self_id]
        news = Gossip((Update(me.id, me.address, ALIVE, me.incarnation, me.id),))
        out.extend(Outgoing(m.address, news) for m in new)

    def _reconnect(self, now: float, out: list[Outgoing]) -> None:
        """Push-pull with a few members declared dead and with the join addresses
        (unless alone: the driver retries those itself, faster)."""
        cfg = self.config
        expired = [i for i, (_, since) in self._lost.items() if now - since > cfg.reconnect_timeout]
        for member_id in expired:
            del self._lost[member_id]
        addresses = [address for address, _ in self._lost.values()]
        if len(addresses) > cfg.reconnect_fanout:
            addresses = self._rng.sample(addresses, cfg.reconnect_fanout)
        if not self.alone:
            live = {m.address for m in self._members.values() if m.state in LIVE_STATES}
            addresses += [a for a in self._seeds if a not in live]
        state = table(self._members, is_reply=False)
        out.extend(Outgoing(a, state, True) for a in dict.fromkeys(addresses))

    # -- probing ---------------------------------------------------------------

    def _run_probe(self, now: float, out: list[Outgoing]) -> None:
        probe = self._probe
        cfg = self.config
        if (
            probe is not None
            and not probe.acked
            and not probe.indirect_sent
            and now >= probe.started + cfg.probe_timeout
        ):
            probe.indirect_sent = True
            target = self._members.get(probe.target_id)
            if target is not None and target.state in LIVE_STATES:
                helpers = self._pick(
                    cfg.indirect_checks,
                    lambda m: m.state is ALIVE and m.id != probe.target_id,
                )
                req = PingReq(probe.seq, target.id, target.address, self._piggyback())
                out.extend(Outgoing(h.address, req) for h in helpers)
        if now < self._next_probe:
            return
        # A probe lasts one interval: unanswered by now, its target is suspect.
        if probe is not None and probe.acked and not probe.direct:
            if (address := self._address_of(probe.target_id)) is not None:
                self._heard.reached_indirectly(address)
        elif probe is not None and not probe.acked:
            target = self._members.get(probe.target_id)
            if target is not None and target.state in LIVE_STATES:
                self._apply(
                    Update(target.id, target.address, SUSPECT, target.incarnation, self.self_id),
                    now,
                )
        self._probe = None
        self._next_probe += cfg.probe_interval
        if self._next_probe <= now:  # the driver was late; do not fire a burst
            self._next_probe = now + cfg.probe_interval
        self._reap(now)
        target = self._order.next(self._members, self.self_id)
        if target is None:
            return
        seq = self._next_seq()
        if target.state is SUSPECT:
            # Lifeguard's buddy system: tell a suspect directly, so it can refute
            # even if the gossip about it missed it.
            buddy = Update(target.id, target.address, SUSPECT, target.incarnation, self.self_id)
            updates = (buddy, *self._piggyback(cfg.max_piggyback - 1))
        else:
            updates = self._piggyback()
        self._probe = Probe(seq, target.id, now)
        out.append(Outgoing(target.address, Ping(seq, target.id, updates)))

    def _next_seq(self) -> int:
        self._seq = (self._seq + 1) % (MAX_SEQ + 1)
        return self._seq

    def _pick(self, k: int, accept: Callable[[Member], bool]) -> list[Member]:
        """Up to ``k`` random other members that ``accept`` takes."""
        return pick(self._members, self._id_list, self.self_id, k, accept, self._rng)

    def _id_list(self) -> list[str]:
        if self._ids is None:
            self._ids = list(self._members)
        return self._ids

    # -- state changes ---------------------------------------------------------

    def _apply_all(self, updates: tuple[Update, ...], now: float) -> None:
        for update in updates:
            self._apply(update, now)

    def _apply(self, update: Update, now: float) -> None:
        """Apply one rumour by the transition table; re-gossip it if it changed
        anything."""
        if update.member_id == self.self_id:
            self._about_self(update, now)
            return
        current = self._members.get(update.member_id)
        source = update.source
        if source != self.self_id and transitions.stale_death(
            update, current, self._members.get(source), self._revived.get(source), now, self.config
        ):
            update = replace(update, state=SUSPECT)
        if current is not None and current.state is SUSPECT and update.state is SUSPECT:
            if update.incarnation < current.incarnation:
                return
            if update.incarnation > current.incarnation:
                self._set(replace(current, incarnation=update.incarnation), now)
            suspicion = self._suspicions.get(current.id)
            if suspicion is not None and suspicion.confirm(update.source):
                self._enqueue(update)
            return
        old_state = None if current is None else current.state
        rule = TRANSITIONS.get((old_state, update.state))
        if rule is None:
            return
        strictly_newer, kind = rule
        if current is not None and (
            update.incarnation < current.incarnation
            or (strictly_newer and update.incarnation == current.incarnation)
        ):
            return
        # An ALIVE rumour comes from the member itself, so its address is the one
        # to use; an accuser's copy of the address is no better than ours.
        address = update.address if current is None or update.state is ALIVE else current.address
        member = Member(update.member_id, address, update.state, update.incarnation)
        self._set(member, now)
        if update.state is SUSPECT:
            self._start_suspicion(member.id, update.source, now)
        else:
            self._suspicions.pop(member.id, None)
        if update.state is ALIVE and old_state is not ALIVE and old_state is not SUSPECT:
            self._order.add(member.id)
        if kind is not None:
            self._events.append(MemberEvent(kind, member, now))
        if current is not None or update.state is ALIVE:
            self._enqueue(update)  # quiet tombstones of strangers are not news

    def _about_self(self, update: Update, now: float) -> None:
        """Refute any accusation at our incarnation or above, any ALIVE above it, and
        an ALIVE at it from another address (a previous life of this id: we must
        outbid it to be believed)."""
        me = self._members[self.self_id]
        if self._left:
            return
        elsewhere = update.address != me.address
        if update.state is ALIVE and (
            update.incarnation < me.incarnation
            or (update.incarnation == me.incarnation and not elsewhere)
        ):
            if elsewhere and self.self_id not in self._broadcasts:
                # Someone still holds our previous life's address, at an older
                # incarnation that our ALIVE beats: it missed our announcement.
                self._enqueue(Update(me.id, me.address, ALIVE, me.incarnation, me.id))
            return
        if update.incarnation < me.incarnation:
            # A stale accusation: its sender missed our refutation, whose
            # retransmits may be spent. Gossip it again; with the buddy system this
            # puts it on the Ack to the very peer that still suspects us.
            if self.self_id not in self._broadcasts:
                self._enqueue(Update(me.id, me.address, ALIVE, me.incarnation, me.id))
            return
        # Here: an accusation at our incarnation or above, or an ALIVE above it, or an
        # ALIVE at it from another address. The last is a previous life of ours,
        # restarted on a new address (a new pod IP, a DHCP lease): the incarnation is
        # not kept across restarts, so both lives start at 0, and the others, who
        # take an ALIVE only at a strictly newer incarnation, would keep the old
        # address, probe it, and declare us dead a suspicion later.
        if update.incarnation >= MAX_INCARNATION:
            return  # cannot outbid; only a forged rumour gets here
        me = replace(me, incarnation=update.incarnation + 1)
        self._set(me, now)
        self.refutations += 1
        alive = Update(me.id, me.address, ALIVE, me.incarnation, me.id)
        if update.state is ALIVE and elsewhere:
            self._clash.outbid(update.address, now, alive)
        self._enqueue(alive)

    def _start_suspicion(self, member_id: str, accuser: str, now: float) -> None:
        self._suspicions[member_id] = Suspicion.begin(now, accuser, self._live, self.config)

    def _expire_suspicions(self, now: float) -> None:
        due = [mid for mid, s in self._suspicions.items() if now >= s.deadline]
        for member_id in due:
            member = self._members.get(member_id)
            if member is None or member.state is not SUSPECT:
                self._suspicions.pop(member_id, None)
                continue
            self._apply(
                Update(member.id, member.address, DEAD, member.incarnation, self.self_id), now
            )

    def _set(self, member: Member, now: float) -> None:
        old = self._members.get(member.id)
        was_live = old is not None and old.state in LIVE_STATES
        self._live += (member.state in LIVE_STATES) - was_live
        if old is None:
            self._ids = None
        self._members[member.id] = member
        if member.state in LIVE_STATES or member.id == self.self_id:
            self._tombstones.discard(member.id)
        else:
            self._tombstones.add(member.id)
        if member.state is DEAD:
            if old is None or old.state is not DEAD:
                self._lost[member.id] = (member.address, now)
        elif self._lost.pop(member.id, None) is not None or (
            old is not None and old.state is SUSPECT and member.state is ALIVE
        ):
            self._revived[member.id] = now
        if old is None or old.state is not member.state:
            self._since[member.id] = now

    def _reap(self, now: float) -> None:
        cfg = self.config
        gone = [i for i in self._tombstones if now - self._since[i] >= cfg.tombstone_timeout]
        for member_id in sorted(gone):
            del self._members[member_id]
            del self._since[member_id]
            self._tombstones.discard(member_id)
            self._ids = None
        horizon = transitions.STALE_PROBES * cfg.probe_interval
        self._revived = {i: t for i, t in self._revived.items() if now - t < horizon}
        expired = [seq for seq, f in self._forwards.items() if now > f.expires]
        for seq in expired:
            del self._forwards[seq]
        self._heard.expire(now, cfg.probe_interval)

    # -- dissemination ---------------------------------------------------------

    def _enqueue(self, update: Update) -> None:
        self._broadcasts.enqueue(update)

    def _piggyback(self, limit: int | None = None) -> tuple[Update, ...]:
        """The updates to put on the next message (see :mod:`.broadcasts`)."""
        if not self._broadcasts:
            return ()
        cfg = self.config
        retransmits = cfg.retransmit_mult * math.ceil(math.log10(self._live + 1))
        count = cfg.max_piggyback if limit is None else limit
        return self._broadcasts.take(count, retransmits, cfg.piggyback_bytes)

    def _gossip(self, now: float, out: list[Outgoing]) -> None:
        horizon = self.config.gossip_to_the_dead

        def reachable(m: Member) -> bool:
            return m.state in LIVE_STATES or (m.state is DEAD and now - self._since[m.id] < horizon)

        for target in self._pick(self.config.gossip_nodes, reachable):
            updates = self._piggyback()
            if not updates:
                break
            out.append(Outgoing(target.address, Gossip(updates)))

    def _routine(self, address: str, live: set[str]) -> bool:
        """Whether a push-pull from ``address`` is a live member's periodic one (not a
        join, nor a reconnect across a healed partition)."""
        return (
            any(m.address == address for m in self._members.values() if m.id in live)
            and address != self.self_address
        )
