"""The membership state machine driven by hand, over a zero-latency fake link."""

from __future__ import annotations

import contextlib
import math
import random
from collections import deque
from typing import Any

import cbor2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from ubipy.errors import WireError
from ubipy.membership import (
    MAX_UPDATES,
    Ack,
    ChangeKind,
    Gossip,
    Leave,
    Member,
    Membership,
    MembershipConfig,
    MemberState,
    Message,
    Outgoing,
    Ping,
    PingReq,
    PushPull,
    Update,
    message_from_wire,
)
from ubipy.membership.transitions import STALE_PROBES, Suspicion

CONFIG = MembershipConfig()


def addr(name: str) -> str:
    return f"{name}.test:7070"


class Link:
    """Instances joined by an instant, lossless link, driven one deadline at a time.

    Every message goes through to_wire, CBOR and message_from_wire. A ``silent``
    member neither ticks nor receives, as if it had crashed; what one of a ``cut``
    pair of addresses sends the other is lost.
    """

    def __init__(self, config: MembershipConfig = CONFIG) -> None:
        self.config = config
        self.nodes: dict[str, Membership] = {}
        self.now = 0.0
        self.silent: set[str] = set()
        self.cut: set[frozenset[str]] = set()
        self.log: list[tuple[float, str, str, Message]] = []  # (at, from, to, message)

    def add(self, name: str, incarnation: int = 0) -> Membership:
        m = Membership(
            name,
            addr(name),
            self.config,
            random.Random(name),
            now=self.now,
            incarnation=incarnation,
        )
        self.nodes[m.self_address] = m
        return m

    def deliver(self, src: Membership, out: list[Outgoing]) -> None:
        queue = deque((src.self_address, o) for o in out)
        while queue:
            sender, o = queue.popleft()
            message = message_from_wire(cbor2.loads(cbor2.dumps(o.message.to_wire())))
            assert message == o.message
            self.log.append((self.now, sender, o.address, message))
            dst = self.nodes.get(o.address)
            if dst is None or dst.self_id in self.silent:
                continue
            if frozenset((sender, o.address)) in self.cut:
                continue
            queue.extend((dst.self_address, r) for r in dst.receive(self.now, sender, message))

    def join(self, m: Membership, seed: Membership) -> None:
        self.deliver(m, m.join(self.now, [seed.self_address]))

    def run_until(self, end: float) -> None:
        while True:
            due = [
                (d, m)
                for m in self.nodes.values()
                if m.self_id not in self.silent and (d := m.next_deadline()) is not None
            ]
            if not due:
                break
            deadline, m = min(due, key=lambda dm: dm[0])
            if deadline > end:
                break
            self.now = max(self.now, deadline)
            self.deliver(m, m.tick(self.now))
        self.now = end

    def sent(self, kind: type, since: float = 0.0) -> list[tuple[float, str, str, Message]]:
        return [e for e in self.log if isinstance(e[3], kind) and e[0] >= since]


def cluster(*names: str, config: MembershipConfig = CONFIG) -> tuple[Link, list[Membership]]:
    link = Link(config)
    members = [link.add(n) for n in names]
    for m in members[1:]:
        link.join(m, members[0])
        link.run_until(link.now + 0.5)
    link.run_until(link.now + 2.0)
    everyone = frozenset(names)
    assert all(m.alive_ids() == everyone for m in members)
    for m in members:
        m.drain_events()
    return link, members


def kinds(m: Membership, member_id: str) -> list[ChangeKind]:
    return [e.kind for e in m.drain_events() if e.member.id == member_id]


# -- joining, probing ----------------------------------------------------------


def test_join_by_push_pull() -> None:
    link = Link()
    a, b = link.add("a"), link.add("b")
    out = b.join(0.0, [a.self_address, b.self_address])
    assert [(o.address, o.stream) for o in out] == [(a.self_address, True)]  # not itself
    request = out[0].message
    assert isinstance(request, PushPull) and not request.is_reply
    reply = a.receive(0.0, b.self_address, request)
    assert len(reply) == 1 and reply[0].stream and reply[0].address == b.self_address
    assert isinstance(reply[0].message, PushPull) and reply[0].message.is_reply
    assert b.receive(0.0, a.self_address, reply[0].message) == []
    assert a.alive_ids() == b.alive_ids() == {"a", "b"}
    assert [e.kind for e in a.drain_events()] == [ChangeKind.JOINED]
    assert [e.kind for e in b.drain_events()] == [ChangeKind.JOINED]


def test_a_joiner_announces_itself_to_everyone_it_learns_of() -> None:
    link, (a, b) = cluster("a", "b")
    c = link.add("c")
    link.join(c, b)
    # b learnt c from the push-pull; a from c's own announcement, sent once the
    # reply told c that a exists.
    announcements = [e for e in link.sent(Gossip) if e[1] == c.self_address]
    assert [e[2] for e in announcements] == [a.self_address]
    assert a.alive_ids() == b.alive_ids() == c.alive_ids() == {"a", "b", "c"}


def test_news_spreads_by_gossip() -> None:
    link, (a, b, c) = cluster("a", "b", "c")
    news = Update("d", addr("d"), MemberState.ALIVE, 0, "d")
    b.receive(link.now, addr("d"), Gossip((news,)))
    assert "d" not in a.alive_ids()
    link.run_until(link.now + CONFIG.gossip_interval)
    assert "d" in a.alive_ids() and "d" in c.alive_ids()


def test_ping_ack_keeps_members_alive() -> None:
    link, (a, b) = cluster("a", "b")
    link.run_until(60.0)
    pings = link.sent(Ping)
    acks = link.sent(Ack)
    assert len(pings) >= 2 * 57  # each probes the other every second
    assert len(acks) == len(pings)
    assert not link.sent(PingReq)
    assert a.drain_events() == b.drain_events() == []
    assert all(m.state is MemberState.ALIVE for m in a.members() + b.members())


def test_ping_for_someone_else_is_not_answered() -> None:
    a = Membership("a", addr("a"), CONFIG, random.Random(1))
    assert a.receive(0.0, addr("x"), Ping(7, "not-a")) == []
    assert a.receive(0.0, addr("x"), Ping(7, "a")) == [Outgoing(addr("x"), Ack(7))]


def test_only_pings_answered_by_their_target_are_answers() -> None:
    """The lease counts round trips: a probe or a ping answered by the member itself,
    dated when ours left; an indirect ack (a helper's) or an unsolicited one is none."""
    link, (a, _, c) = cluster("a", "b", "c")
    a.drain_answers()
    link.run_until(link.now + 10.0)
    answers = a.drain_answers()
    assert {m for m, _ in answers} == {"b", "c"}
    assert all(sent <= link.now for _, sent in answers)
    out = a.ping(link.now, "b")
    assert out is not None and isinstance(out.message, Ping)
    sent_at = link.now
    link.now += 0.3
    link.deliver(a, [out])
    assert a.drain_answers() == [("b", sent_at)]
    # The same Ack again, or from another address: nothing.
    ack = Ack(out.message.seq, ())
    assert a.receive(link.now, c.self_address, ack) == [] and a.drain_answers() == []
    assert a.ping(link.now, "nobody") is None
    link.silent.add("b")
    out = a.ping(link.now, "b")
    assert out is not None
    link.deliver(a, [out])
    assert a.drain_answers() == []


def test_a_member_answering_only_through_others_is_reported_unreached() -> None:
    """A link cut between a and c alone: each still sees the other alive through b's
    indirect probes, and reports it as reached only that way (the driver then stops
    trusting its connection to it); once the link works, nobody is reported."""
    link, (a, b, c) = cluster("a", "b", "c")
    link.run_until(link.now + 10.0)
    assert a.drain_unreached() == b.drain_unreached() == c.drain_unreached() == []
    link.cut.add(frozenset((a.self_address, c.self_address)))
    link.run_until(link.now + 10.0)
    assert set(a.drain_unreached()) == {addr("c")} and set(c.drain_unreached()) == {addr("a")}
    assert b.drain_unreached() == []
    assert a.member("c").state is c.member("a").state is MemberState.ALIVE  # type: ignore[union-attr]
    link.cut.clear()
    link.run_until(link.now + 1.0)  # a probe under way at the heal
    a.drain_unreached()
    c.drain_unreached()
    link.run_until(link.now + 10.0)
    assert a.drain_unreached() == c.drain_unreached() == []


def test_probe_order_is_round_robin() -> None:
    names = [f"n{i}" for i in range(6)]
    link, members = cluster(*names)
    start = link.now
    link.run_until(start + 50.0)
    targets = [
        m.target_id  # type: ignore[union-attr]
        for _, src, _, m in link.sent(Ping, since=start)
        if src == members[0].self_address
    ]
    assert len(targets) >= 49

    def passes(offset: int) -> list[list[str]]:
        return [targets[i : i + 5] for i in range(offset, len(targets) - 4, 5)]

    # The passes started before ``start``: for one alignment, every pass of five
    # probes visits each other member exactly once, in a fresh order.
    aligned = [o for o in range(5) if all(sorted(p) == names[1:] for p in passes(o))]
    assert len(aligned) == 1
    assert len({tuple(p) for p in passes(aligned[0])}) > 1


# -- failure detection ---------------------------------------------------------


def test_silent_member_goes_suspect_then_dead() -> None:
    link, (a, b, c) = cluster("a", "b", "c")
    link.silent.add("c")
    silent_at = link.now
    # a probes c within two intervals; at the probe time-out it asks b to try.
    link.run_until(silent_at + 2.6)
    probe = next(e for e in link.sent(Ping, since=silent_at) if e[2] == c.self_address)
    req = [e for e in link.sent(PingReq, since=silent_at) if e[3].target_id == "c"]  # type: ignore[union-attr]
    assert req and req[0][0] == pytest.approx(probe[0] + CONFIG.probe_timeout)
    assert a.member("c").state is MemberState.SUSPECT  # type: ignore[union-attr]
    events = [e for e in a.drain_events() + b.drain_events() if e.member.id == "c"]
    assert events and all(e.kind is ChangeKind.SUSPECT for e in events)
    first = min(e.at for e in events)
    # Suspect one full probe interval after the unanswered ping.
    assert any(first == pytest.approx(e[0] + CONFIG.probe_interval) for e in link.sent(Ping))
    # N = 3: too few others to confirm (k = 0), so the minimum time-out applies:
    # suspicion_mult * max(1, log10 3) * probe_interval = 4 s.
    link.run_until(first + 3.9)
    assert a.member("c").state is MemberState.SUSPECT  # type: ignore[union-attr]
    link.run_until(first + 4.1)
    assert a.member("c").state is b.member("c").state is MemberState.DEAD  # type: ignore[union-attr]
    assert a.alive_ids() == b.alive_ids() == {"a", "b"}
    dead = [e for e in a.drain_events() + b.drain_events() if e.kind is ChangeKind.DEAD]
    assert {e.member.id for e in dead} == {"c"} and all(e.changes_ring for e in dead)


def test_lifeguard_timeout_shrinks_with_confirmations() -> None:
    names = [f"n{i}" for i in range(8)]
    link, members = cluster(*names)
    a = members[0]
    t = link.now
    accuse = Update("n7", addr("n7"), MemberState.SUSPECT, 0, "n1")
    a.receive(t, addr("n1"), Gossip((accuse,)))
    # N = 8: k = suspicion_mult - 2 = 2; min 4 s (the log10 scale floors at 1), max 24 s.
    assert a.next_deadline() == pytest.approx(t + 0.0, abs=24.0)
    assert a._suspicions["n7"].deadline == pytest.approx(t + 24.0)
    a.receive(t, addr("n2"), Gossip((Update("n7", addr("n7"), MemberState.SUSPECT, 0, "n2"),)))
    frac = math.log(2) / math.log(3)
    assert a._suspicions["n7"].deadline == pytest.approx(t + 24.0 - frac * 20.0)
    a.receive(t, addr("n3"), Gossip((Update("n7", addr("n7"), MemberState.SUSPECT, 0, "n3"),)))
    assert a._suspicions["n7"].deadline == pytest.approx(t + 4.0)
    a.tick(t + 4.0)
    assert a.member("n7").state is MemberState.DEAD  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("live", "seconds"), [(1, 4.0), (8, 4.0), (10, 4.0), (50, 6.8), (100, 8.0), (1000, 8.0)]
)
def test_suspicion_minimum_grows_with_log10_n_up_to_100_members(live: int, seconds: float) -> None:
    # memberlist's 4 x log10 N probe intervals up to 100 members; at 1000, 8 s and not
    # 12, so that a crash is declared dead by all within 15 s (issue #14).
    suspicion = Suspicion.begin(0.0, "n1", live, CONFIG)
    assert suspicion.min_timeout == pytest.approx(seconds, abs=0.01)
    assert suspicion.max_timeout == pytest.approx(
        seconds * CONFIG.suspicion_max_timeout_mult, abs=0.1
    )


def test_suspected_member_refutes_with_higher_incarnation() -> None:
    link, (a, b, c) = cluster("a", "b", "c")
    now = link.now
    accusation = Update("b", addr("b"), MemberState.SUSPECT, 0, "c")
    a.receive(now, addr("c"), Gossip((accusation,)))
    assert a.member("b").state is MemberState.SUSPECT  # type: ignore[union-attr]
    assert kinds(a, "b") == [ChangeKind.SUSPECT]
    assert "b" in a.alive_ids()  # a suspect keeps its place on the ring
    b.receive(now, addr("a"), Gossip((accusation,)))
    assert b.incarnation == 1 and b.refutations == 1
    link.run_until(now + 0.5)
    assert a.member("b") == Member("b", addr("b"), MemberState.ALIVE, 1)
    assert c.member("b") == Member("b", addr("b"), MemberState.ALIVE, 1)
    assert kinds(a, "b") == [ChangeKind.REFUTED]
    # An accusation at the old incarnation no longer sticks.
    a.receive(link.now, addr("c"), Gossip((accusation,)))
    assert a.member("b").state is MemberState.ALIVE  # type: ignore[union-attr]


def acked(member: Membership, update: Update) -> tuple[Update, ...]:
    """What ``member`` puts on its Ack to a ping from a that carries ``update``."""
    out = member.receive(0.0, addr("a"), Ping(9, member.self_id, (update,)))
    ack = out[0].message
    assert isinstance(ack, Ack)
    return ack.updates


def test_stale_accusation_makes_the_member_repeat_its_refutation() -> None:
    b = Membership("b", addr("b"), CONFIG, random.Random(2), incarnation=3)
    stale = Update("b", addr("b"), MemberState.SUSPECT, 1, "a")
    assert acked(b, stale) == (Update("b", addr("b"), MemberState.ALIVE, 3, "b"),)
    assert b.incarnation == 3


def _alive(member: str, incarnation: int = 1) -> Update:
    return Update(member, addr(member), MemberState.ALIVE, incarnation, member)


def _dead(member: str, by: str, incarnation: int = 1) -> Update:
    return Update(member, addr(member), MemberState.DEAD, incarnation, by)


def _state(m: Membership, member_id: str) -> MemberState:
    member = m.member(member_id)
    assert member is not None
    return member.state


def test_a_death_told_by_a_member_back_from_the_dead_is_only_a_suspicion() -> None:
    """Once a cut heals, rumours made on the other side declare this side's live
    members dead. Told by a member held dead, or back from the dead (or from a
    suspicion) for under STALE_PROBES probe intervals, a death is taken as a
    suspicion, which the member refutes without leaving the ring. Told by a member
    in good standing, it is a death at once, as before."""
    a = Membership("a", addr("a"), CONFIG, random.Random(1))
    a.receive(0.0, addr("x"), Gossip((_alive("b"), _alive("c"), _alive("d"), _alive("e"))))
    a.receive(0.0, addr("x"), Gossip((_dead("c", by="d"),)))  # d in good standing
    assert _state(a, "c") is MemberState.DEAD
    a.drain_events()
    a.receive(1.0, addr("x"), Gossip((_dead("b", by="c"),)))  # c held dead
    assert _state(a, "b") is MemberState.SUSPECT
    assert kinds(a, "b") == [ChangeKind.SUSPECT]
    a.receive(1.5, addr("x"), Gossip((_alive("b", 2),)))
    assert kinds(a, "b") == [ChangeKind.REFUTED]
    # c comes back; what it said while cut off is still arriving.
    a.receive(2.0, addr("x"), Gossip((_alive("c", 2),)))
    a.receive(3.0, addr("x"), Gossip((_dead("e", by="c"),)))
    assert _state(a, "e") is MemberState.SUSPECT
    # So is what b said while it was suspected.
    a.receive(3.0, addr("x"), Gossip((_dead("d", by="b"),)))
    assert _state(a, "d") is MemberState.SUSPECT
    # Past STALE_PROBES probe intervals, c's word is a death again.
    later = 2.0 + STALE_PROBES * CONFIG.probe_interval
    a.receive(later, addr("x"), Gossip((_dead("b", by="c", incarnation=2),)))
    assert _state(a, "b") is MemberState.DEAD


def test_dead_is_a_tombstone_until_a_newer_incarnation() -> None:
    a = Membership("a", addr("a"), CONFIG, random.Random(1))
    alive = Update("b", addr("b"), MemberState.ALIVE, 2, "b")
    a.receive(0.0, addr("x"), Gossip((alive,)))
    a.receive(0.0, addr("x"), Gossip((Update("b", addr("b"), MemberState.DEAD, 2, "c"),)))
    assert kinds(a, "b") == [ChangeKind.JOINED, ChangeKind.DEAD]
    a.receive(0.0, addr("x"), Gossip((alive,)))  # a stale rumour
    assert a.member("b").state is MemberState.DEAD  # type: ignore[union-attr]
    a.receive(0.0, addr("x"), Gossip((Update("b", addr("b2"), MemberState.ALIVE, 3, "b"),)))
    assert a.member("b") == Member("b", addr("b2"), MemberState.ALIVE, 3)
    assert kinds(a, "b") == [ChangeKind.JOINED]


def test_a_member_held_dead_that_says_it_left_has_left() -> None:
    """Its leave, sent again across a cut that healed (peer/leaving.py): the majority
    lease drops a member on its leave, and waited for good for a tie-breaking peer that
    had left, held dead (a review's fuzzer). Its older word is not taken."""
    a = Membership("a", addr("a"), CONFIG, random.Random(1))
    a.receive(0.0, addr("x"), Gossip((_alive("b", 2), _dead("b", by="c", incarnation=2))))
    assert kinds(a, "b") == [ChangeKind.JOINED, ChangeKind.DEAD]
    a.receive(1.0, addr("b"), Leave("b", addr("b"), 1))  # an earlier life's
    assert (_state(a, "b"), kinds(a, "b")) == (MemberState.DEAD, [])
    a.receive(1.0, addr("b"), Leave("b", addr("b"), 2))
    assert (_state(a, "b"), kinds(a, "b")) == (MemberState.LEFT, [ChangeKind.LEFT])


def test_tombstones_are_reaped_after_their_timeout() -> None:
    config = MembershipConfig(tombstone_timeout=10.0)
    a = Membership("a", addr("a"), config, random.Random(1))
    a.receive(0.0, addr("x"), Gossip((Update("b", addr("b"), MemberState.DEAD, 0, "c"),)))
    assert a.member("b") is not None and a.drain_events() == []  # quiet: not news
    a.tick(5.0)
    assert a.member("b") is not None
    for t in range(6, 13):
        a.tick(float(t))
    assert a.member("b") is None


def test_restarted_member_outbids_its_tombstone() -> None:
    link, (a, b, _) = cluster("a", "b", "c")
    link.silent.add("c")
    link.run_until(link.now + 30.0)
    assert a.member("c").state is MemberState.DEAD  # type: ignore[union-attr]
    old = a.member("c").incarnation  # type: ignore[union-attr]
    # Same id, same address, fresh state (the driver persists nothing but the id).
    link.silent.discard("c")
    c2 = link.add("c")
    a.drain_events()
    link.join(c2, a)
    assert c2.incarnation > old  # learnt from the push-pull reply
    link.run_until(link.now + 1.0)
    assert a.alive_ids() == b.alive_ids() == c2.alive_ids() == {"a", "b", "c"}
    assert kinds(a, "c") == [ChangeKind.JOINED]


def test_member_restarted_on_a_new_address_outbids_its_previous_life() -> None:
    """A peer killed and restarted at once, before anyone notices, on a new address (a
    new pod IP). Both lives start at incarnation 0, so its ALIVE is no news to the
    others; the push-pull reply shows it the old address at its own incarnation, which
    it must outbid, or the others probe the old address and declare it dead."""
    link, (a, _b) = cluster("a", "b")
    del link.nodes[addr("b")]  # killed: nothing answers at the old address now
    b2 = Membership("b", addr("b2"), CONFIG, random.Random("b2"), now=link.now)
    link.nodes[b2.self_address] = b2
    assert b2.incarnation == a.member("b").incarnation == 0  # type: ignore[union-attr]
    link.join(b2, a)
    assert b2.incarnation == 1 and b2.refutations == 1
    link.run_until(link.now + 30.0)
    assert a.member("b") == Member("b", addr("b2"), MemberState.ALIVE, 1)
    assert kinds(a, "b") == []  # never suspected, never declared dead
    assert b2.incarnation == 1  # and nothing to refute since
    assert b2.clash is None  # its previous life is no other process


def test_two_live_processes_under_one_id_find_each_other_out() -> None:
    """A data directory copied from a live peer's: the copy starts under its id on
    another address, and each outbids the other's ALIVE without end (they also own the
    same share of the ring). Each tells the other its outbids straight, so both learn
    the other's address at once, not a few push-pull rounds later (30-80 s)."""
    link, (a, b, _c) = cluster("a", "b", "c")
    copy = Membership("b", addr("b-copy"), CONFIG, random.Random("copy"), now=link.now)
    link.nodes[copy.self_address] = copy
    link.join(copy, a)
    started = link.now
    while (b.clash is None or copy.clash is None) and link.now < started + 300.0:
        link.run_until(link.now + 0.5)
    assert (b.clash, copy.clash) == (addr("b-copy"), addr("b"))
    assert link.now <= started + 1.0
    assert b.refutations >= 3 and copy.refutations >= 3
    # Once found out, no more is told straight: the outbids do not go on at the
    # network's speed.
    told = b.refutations + copy.refutations
    link.run_until(link.now + 1.0)
    assert b.refutations + copy.refutations <= told + 2


def test_alive_from_an_older_life_elsewhere_is_answered_with_our_address() -> None:
    # The sender holds our previous address at an older incarnation: our ALIVE
    # beats it, so it only needs to hear it again, not a new incarnation.
    b = Membership("b", addr("b2"), CONFIG, random.Random(2), incarnation=3)
    old = Update("b", addr("b"), MemberState.ALIVE, 2, "b")
    assert acked(b, old) == (Update("b", addr("b2"), MemberState.ALIVE, 3, "b"),)
    assert b.incarnation == 3 and b.refutations == 0
    # Our own ALIVE coming back to us is no news at all.
    b2 = Membership("b", addr("b"), CONFIG, random.Random(2), incarnation=3)
    assert b2.receive(0.0, addr("a"), Ping(9, "b", (old,)))[0].message == Ack(9, ())


def test_graceful_leave_drops_at_once() -> None:
    link, (a, b, c) = cluster("a", "b", "c")
    out = c.leave(link.now)
    assert {o.address for o in out} == {a.self_address, b.self_address}
    assert all(isinstance(o.message, Leave) for o in out)
    link.deliver(c, out)
    assert a.alive_ids() == b.alive_ids() == {"a", "b"}
    assert kinds(a, "c") == [ChangeKind.LEFT]
    assert c.has_left and c.leave(link.now) == []
    # b leaves after c: it tells c too (c may be leaving with everyone else).
    assert {o.address for o in b.leave(link.now)} == {a.self_address, c.self_address}
    # A left member neither probes nor refutes; the others never suspect it.
    accusation = Update("c", addr("c"), MemberState.DEAD, 0, "a")
    c.receive(link.now, addr("a"), Gossip((accusation,)))
    assert c.incarnation == 0
    b.drain_events()
    link.run_until(link.now + 30.0)
    assert not [e for e in link.sent(Ping, since=link.now - 29.0) if e[1] == c.self_address]
    assert kinds(a, "c") == kinds(b, "c") == []


def test_leave_rumour_from_a_previous_life_is_refuted() -> None:
    a = Membership("a", addr("a"), CONFIG, random.Random(1))
    reply = PushPull((Member("a", addr("a"), MemberState.LEFT, 5),), is_reply=True)
    a.receive(0.0, addr("b"), reply)
    assert a.incarnation == 6 and not a.has_left


# -- dissemination -------------------------------------------------------------


def test_each_update_is_sent_a_bounded_number_of_times() -> None:
    names = [f"n{i}" for i in range(8)]
    link, members = cluster(*names)
    a = members[0]
    start = link.now
    news = Update("zz", addr("zz"), MemberState.ALIVE, 0, "zz")
    link.deliver(a, a.receive(start, addr("n1"), Gossip((news,))))
    link.silent.update(names[1:])  # count a's transmissions only, not re-gossip
    link.run_until(start + 5.0)
    carried = [
        m
        for _, src, _, m in link.log
        if src == a.self_address and news in getattr(m, "updates", ())
    ]
    # N = 9 now: retransmit_mult * ceil(log10(10)) = 4.
    assert len(carried) == CONFIG.retransmit_mult * math.ceil(math.log10(9 + 1))


def test_piggyback_is_capped_and_newest_first() -> None:
    config = MembershipConfig(max_piggyback=3)
    a = Membership("a", addr("a"), config, random.Random(1))
    news = tuple(Update(f"m{i}", addr(f"m{i}"), MemberState.ALIVE, 0, f"m{i}") for i in range(5))
    a.receive(0.0, addr("x"), Gossip(news))
    (out,) = a.receive(0.0, addr("x"), Ping(1, "a"))
    assert isinstance(out.message, Ack)
    assert [u.member_id for u in out.message.updates] == ["m4", "m3", "m2"]
    (out,) = a.receive(0.0, addr("x"), Ping(2, "a"))
    assert isinstance(out.message, Ack)
    assert [u.member_id for u in out.message.updates] == ["m1", "m0", "m4"]


def test_config_is_checked() -> None:
    with pytest.raises(ValueError):
        MembershipConfig(probe_timeout=1.0)
    with pytest.raises(ValueError):
        MembershipConfig(suspicion_mult=0)


def test_defaults_are_memberlists_lan_profile() -> None:
    c = MembershipConfig()
    assert (c.probe_interval, c.probe_timeout, c.indirect_checks) == (1.0, 0.5, 3)
    assert (c.suspicion_mult, c.push_pull_interval, c.retransmit_mult) == (4, 30.0, 4)
    assert (c.gossip_interval, c.gossip_nodes, c.suspicion_max_timeout_mult) == (0.2, 3, 6)


# -- the wire ------------------------------------------------------------------

ids = st.text(min_size=1, max_size=64).filter(str.isprintable)
addresses = st.builds(
    lambda host, port: f"{host}:{port}",
    st.from_regex(r"[a-z0-9.\-]{1,40}", fullmatch=True),
    st.integers(1, 65535),
)
states = st.sampled_from(MemberState)
incarnations = st.integers(0, 2**63 - 1)
seqs = st.integers(0, 2**32 - 1)
updates = st.lists(st.builds(Update, ids, addresses, states, incarnations, ids), max_size=8).map(
    tuple
)
members_ = st.lists(st.builds(Member, ids, addresses, states, incarnations), max_size=8).map(
    lambda ms: tuple({m.id: m for m in ms}.values())
)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Ping, seqs, ids, updates),
    st.builds(Ack, seqs, updates),
    st.builds(PingReq, seqs, ids, addresses, updates),
    st.builds(Gossip, updates),
    st.builds(PushPull, members_, st.booleans()),
    st.builds(Leave, ids, addresses, incarnations),
)


@given(messages)
def test_messages_round_trip(message: Message) -> None:
    wire = message.to_wire()
    assert message_from_wire(wire) == message
    assert message_from_wire(cbor2.loads(cbor2.dumps(wire))) == message


cbor_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**64), 2**64),
    st.floats(allow_nan=True),
    st.text(max_size=80),
    st.binary(max_size=20),
)
cbor_values = st.recursive(
    cbor_leaves,
    lambda inner: (
        st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=30,
)


@given(cbor_values)
def test_random_structures_are_rejected_cleanly(obj: Any) -> None:
    with contextlib.suppress(WireError):
        message_from_wire(obj)


@given(cbor_values.map(lambda v: [1, *v] if isinstance(v, list) else [2, v]))
def test_random_structures_with_a_type_code_are_rejected_cleanly(obj: Any) -> None:
    with contextlib.suppress(WireError):
        message_from_wire(obj)


def _paths(obj: Any, prefix: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    out = [prefix]
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            out.extend(_paths(item, (*prefix, i)))
    return out


def _replace(obj: Any, path: tuple[int, ...], value: Any) -> Any:
    if not path:
        return value
    copy = list(obj)
    copy[path[0]] = _replace(copy[path[0]], path[1:], value)
    return copy


@given(messages, st.data())
def test_mutated_messages_parse_or_are_rejected_cleanly(message: Message, data: Any) -> None:
    wire = message.to_wire()
    path = data.draw(st.sampled_from(_paths(wire)))
    mutated = _replace(wire, path, data.draw(cbor_values))
    try:
        parsed = message_from_wire(mutated)
    except WireError:
        return
    # Whatever got through must itself survive the wire unchanged.
    assert message_from_wire(parsed.to_wire()) == parsed


@pytest.mark.parametrize(
    "obj",
    [
        None,
        [],
        (1, 2, "a", []),  # a tuple is not what CBOR gives
        [99],
        [1, True, "a", []],  # bool is not a seq
        [1, -1, "a", []],
        [1, 2**32, "a", []],
        [1, 1, "", []],
        [1, 1, "x" * 65, []],
        [1, 1, "a\n", []],
        [1, 1, "a", [], "extra"],
        [1, 1, "a", [["b", "b.test:70", 0, 0, "b"]] * (MAX_UPDATES + 1)],
        [1, 1, "a", [["b", "b.test:70", 4, 0, "b"]]],  # no such state
        [1, 1, "a", [["b", "b.test", 0, 0, "b"]]],  # no port
        [1, 1, "a", [["b", "b.test:0", 0, 0, "b"]]],
        [1, 1, "a", [["b", "b.test:65536", 0, 0, "b"]]],
        [1, 1, "a", [["b", "b.test:٣", 0, 0, "b"]]],  # a non-ASCII digit
        [1, 1, "a", [["b", "h:1" + "x" * 300, 0, 0, "b"]]],
        [1, 1, "a", [["b", "b.test:70", 0, 2**63, "b"]]],
        [3, 1, "a", "nowhere", []],
        [5, [["a", "a.test:1", 0, 0], ["a", "a.test:1", 0, 1]], False],  # a twice
        [5, [], 0],
        [6, "a", "a.test:1", -1],
    ],
)
def test_malformed_wire_objects_are_rejected(obj: object) -> None:
    with pytest.raises(WireError):
        message_from_wire(obj)


def test_push_pull_member_cap() -> None:
    many = [[f"m{i}", "m.test:1", 0, 0] for i in range(10_001)]
    with pytest.raises(WireError):
        message_from_wire([5, many, False])
    assert isinstance(message_from_wire([5, many[:10_000], False]), PushPull)
