"""The membership acceptance figures, measured in the deterministic simulator.

Each test prints what it measured (shown even without ``-s``). Every run is seeded;
the simulator is bench/simnet.py (a plain event-queue with virtual time).
"""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from bench.simnet import FRAME_OVERHEAD, Observed, SimNet, SimNode
from ubipy.membership import ChangeKind, MembershipConfig, MemberState

N = 8
RUNS = 200


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def report(capsys: pytest.CaptureFixture[str], line: str) -> None:
    with capsys.disabled():
        print(f"\n[membership sim] {line}")


def crash_detection_time(seed: int, config: MembershipConfig | None = None) -> float:
    """Seconds from a crash until every other member has declared it dead."""
    net = SimNet(seed, config or MembershipConfig())
    nodes = net.cluster(N)
    rng = random.Random(seed)
    net.run_for(rng.uniform(0.0, 5.0))  # crash at a random phase of everyone's probing
    victim = rng.choice(nodes)
    others = {x.id for x in nodes if x is not victim}
    declared: dict[str, float] = {}
    wrong: list[Observed] = []

    def on_event(o: Observed) -> bool:
        if o.event.kind is ChangeKind.DEAD:
            if o.event.member.id == victim.id:
                declared.setdefault(o.observer, o.at)
            else:
                wrong.append(o)
        return declared.keys() >= others

    net.on_event = on_event
    crashed_at = net.now
    net.crash(victim)
    net.run_until(crashed_at + 120.0)
    assert not wrong, f"seed {seed}: false deaths {wrong}"
    assert declared.keys() == others, f"seed {seed}: never declared dead by all"
    return max(declared.values()) - crashed_at


def test_crashed_member_is_declared_dead_by_all(capsys: pytest.CaptureFixture[str]) -> None:
    times = [crash_detection_time(seed) for seed in range(RUNS)]
    p50, p99 = nearest_rank(times, 0.50), nearest_rank(times, 0.99)
    report(
        capsys,
        f"crash detection, N={N}, {RUNS} runs: p50 {p50:.2f} s, p99 {p99:.2f} s, "
        f"min {min(times):.2f} s, max {max(times):.2f} s",
    )
    assert p50 <= 7.0
    assert p99 <= 10.0


def join_time(seed: int, loss: float = 0.0) -> float:
    """Seconds from a join request until every member has the newcomer as ALIVE."""
    net = SimNet(seed, loss=loss)
    nodes = net.cluster(N - 1)
    rng = random.Random(seed)
    net.run_for(rng.uniform(0.0, 5.0))
    newcomer = net.add_node()
    others = {x.id for x in nodes}
    known: dict[str, float] = {}

    def on_event(o: Observed) -> bool:
        if o.event.kind is ChangeKind.JOINED and o.event.member.id == newcomer.id:
            known.setdefault(o.observer, o.at)
        return known.keys() >= others

    net.on_event = on_event
    joined_at = net.now
    net.join(newcomer, [rng.choice(nodes)])
    net.run_until(joined_at + 60.0)
    assert known.keys() == others, f"seed {seed}: newcomer never known to all"
    # And the newcomer knows everyone, from the push-pull reply (still in flight if
    # the seed's gossip was quicker).
    net.on_event = None
    net.run_for(0.01)
    assert newcomer.membership.alive_ids() == others | {newcomer.id}
    return max(known.values()) - joined_at


@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_joining_member_is_known_to_all_quickly(
    loss: float, capsys: pytest.CaptureFixture[str]
) -> None:
    times = [join_time(seed, loss) for seed in range(RUNS)]
    p50, p99 = nearest_rank(times, 0.50), nearest_rank(times, 0.99)
    report(
        capsys,
        f"join known to all, N={N}, {loss:.0%} loss, {RUNS} runs: p50 {p50:.3f} s, "
        f"p99 {p99:.3f} s, max {max(times):.3f} s",
    )
    assert p99 <= 3.0


def lossy_half_hour(
    seed: int, loss: float, latency: tuple[float, float] = (0.001, 0.005)
) -> tuple[Counter[ChangeKind], list[SimNode], float]:
    """Thirty simulated minutes of a stable cluster: member events, nodes, seconds."""
    net = SimNet(seed, loss=loss, latency=latency, count_bytes=True, wire=True)
    nodes = net.cluster(N)
    events: Counter[ChangeKind] = Counter()

    def on_event(o: Observed) -> bool:
        events[o.event.kind] += 1
        return False

    net.on_event = on_event
    for x in nodes:
        x.bytes_sent = x.datagrams_sent = x.stream_bytes_sent = 0
    start = net.now
    net.run_for(30 * 60.0)
    return events, nodes, net.now - start


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_false_deaths_with_packet_loss(seed: int, capsys: pytest.CaptureFixture[str]) -> None:
    events, nodes, _ = lossy_half_hour(seed, loss=0.05, latency=(0.045, 0.055))
    report(
        capsys,
        f"30 min, N={N}, 5% loss, 50 ms latency, seed {seed}: "
        f"{events[ChangeKind.DEAD]} false deaths, "
        f"{events[ChangeKind.SUSPECT]} suspect events (refuted: {events[ChangeKind.REFUTED]}), "
        f"{sum(x.membership.refutations for x in nodes)} refutations",
    )
    assert events[ChangeKind.DEAD] == 0
    assert events[ChangeKind.SUSPECT] == events[ChangeKind.REFUTED]
    assert all(m.state is MemberState.ALIVE for x in nodes for m in x.membership.members())


@pytest.mark.parametrize("loss", [0.0, 0.05])
def test_gossip_traffic_per_member(loss: float, capsys: pytest.CaptureFixture[str]) -> None:
    _, nodes, seconds = lossy_half_hour(7, loss=loss)
    rates = [x.bytes_sent / seconds for x in nodes]
    datagrams = [x.datagrams_sent / seconds for x in nodes]
    push_pull = [x.stream_bytes_sent / seconds for x in nodes]
    report(
        capsys,
        f"traffic sent per member, N={N}, {loss:.0%} loss, 30 min: mean {sum(rates) / N:.0f} B/s, "
        f"max {max(rates):.0f} B/s ({max(datagrams):.2f} datagrams/s, CBOR body + "
        f"{FRAME_OVERHEAD} B each); push-pull besides: max {max(push_pull):.0f} B/s",
    )
    assert max(rates) < 1000.0


def test_traffic_while_members_come_and_go(capsys: pytest.CaptureFixture[str]) -> None:
    """The busiest case for gossip: a member joining or failing every few seconds."""
    net = SimNet(11, count_bytes=True, wire=True)
    nodes = net.cluster(N)
    rng = random.Random(11)
    for x in nodes:
        x.bytes_sent = 0
    start = net.now
    for _ in range(20):
        victim = rng.choice([x for x in nodes if x.up])
        net.crash(victim)
        net.run_for(10.0)
        newcomer = net.add_node()
        net.join(newcomer, [rng.choice([x for x in nodes if x.up])])
        nodes.append(newcomer)
        net.run_for(5.0)
    seconds = net.now - start
    rates = [x.bytes_sent / seconds for x in nodes]
    report(capsys, f"traffic with a crash and a join every 15 s: max {max(rates):.0f} B/s")
    assert max(rates) < 1000.0


# -- behaviours beyond the four figures ------------------------------------------


def test_graceful_leave_is_seen_at_once_without_suspicion() -> None:
    net = SimNet(5)
    nodes = net.cluster(N)
    seen: list[Observed] = []

    def on_event(o: Observed) -> bool:
        seen.append(o)
        return False

    net.on_event = on_event
    leaver = nodes[3]
    left_at = net.now
    net.leave(leaver)
    net.run_for(0.1)
    rest = [x for x in nodes if x is not leaver]
    assert all(leaver.id not in x.membership.alive_ids() for x in rest)
    net.run_for(60.0)
    about = [o.event.kind for o in seen if o.event.member.id == leaver.id]
    assert about.count(ChangeKind.LEFT) == N  # the N - 1 others and the leaver itself
    assert set(about) == {ChangeKind.LEFT}
    assert all(o.at - left_at < 0.1 for o in seen if o.event.member.id == leaver.id)


def test_restart_with_the_same_id_rejoins() -> None:
    net = SimNet(9)
    nodes = net.cluster(N)
    victim = nodes[2]
    net.crash(victim)
    net.run_for(30.0)
    assert all(
        x.membership.member(victim.id).state is MemberState.DEAD  # type: ignore[union-attr]
        for x in nodes
        if x is not victim
    )
    net.restart(victim)
    net.join(victim, [nodes[0]])
    net.run_for(2.0)
    everyone = frozenset(x.id for x in nodes)
    assert all(x.membership.alive_ids() == everyone for x in nodes)
    assert victim.membership.incarnation >= 1


def test_restart_before_anyone_noticed_rejoins() -> None:
    net = SimNet(10)
    nodes = net.cluster(N)
    victim = nodes[4]
    net.crash(victim)
    net.run_for(0.2)
    net.restart(victim)
    net.join(victim, [nodes[0]])
    net.run_for(60.0)
    everyone = frozenset(x.id for x in nodes)
    assert all(x.membership.alive_ids() == everyone for x in nodes)


def test_a_run_is_a_function_of_its_seed() -> None:
    def trace(seed: int) -> list[tuple[float, str, str, str]]:
        net = SimNet(seed, loss=0.05)
        log: list[tuple[float, str, str, str]] = []

        def on_event(o: Observed) -> bool:
            log.append((o.at, o.observer, o.event.kind.value, o.event.member.id))
            return False

        net.on_event = on_event
        nodes = net.cluster(N)
        net.crash(nodes[1])
        net.run_for(120.0)
        return log

    assert trace(3) == trace(3)
    assert trace(3) != trace(4)


@pytest.mark.parametrize("length", [10.0, 60.0, 600.0])
def test_a_partition_of_any_length_heals(length: float, capsys: pytest.CaptureFixture[str]) -> None:
    """Cut 8 members into 4 | 2 | 2 for ``length`` seconds: each side declares the
    others dead (and, past the tombstone time-out, forgets them); once healed, every
    member sees every other alive within one reconnect interval and a few seconds."""
    waits = sorted(_heal_time(seed, length) for seed in range(200, 210))
    p50, worst = waits[len(waits) // 2], waits[-1]
    with capsys.disabled():
        print(
            f"\n[membership sim] {length:.0f} s partition 4|2|2, heal to one view: "
            f"p50 {p50:.1f} s, max {worst:.1f} s"
        )
    assert worst <= 35.0


def _heal_time(seed: int, length: float) -> float:
    net = SimNet(seed)
    nodes = net.cluster(8)
    everyone = frozenset(x.id for x in nodes)
    sides = [nodes[:4], nodes[4:6], nodes[6:]]
    net.partition(*sides)
    net.run_for(length)
    for side in sides if length >= 60 else ():  # at 10 s suspicions may still run
        assert net.agree(side, frozenset(x.id for x in side)), (seed, length)
    net.heal()
    healed = net.now
    assert net.run_until(healed + 120.0, lambda: net.agree(nodes, everyone), step=0.1)
    return net.now - healed
