"""Membership at scale, in the simulator (bench/simnet.py): N members (1000 by default)
on a network with 1% loss and 25-75 ms one-way latency. After a warm-up, what each
member sends per second over the measured window (each message as on the wire: its
frame and the IP and TCP headers, `simnet.on_wire`; push-pull streams apart), the
busiest member and what it sends, false
deaths, and then the time until every member has declared a crashed one dead.

    python -m bench.membership_scale                        # N=1000: 1 min, then 10 min
    python -m bench.membership_scale --n 200 --measure 60   # a quick one
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections import Counter
from collections.abc import Callable

from bench.simnet import Observed, SimNet, SimNode
from ubipy.membership import ChangeKind


def build(net: SimNet, n: int, rng: random.Random, spacing: float) -> list[SimNode]:
    """``n`` members, each joining a random earlier one ``spacing`` seconds after the last."""
    nodes = [net.add_node()]
    for _ in range(n - 1):
        net.run_for(spacing)
        node = net.add_node()
        net.join(node, [rng.choice(nodes)])
        nodes.append(node)
    return nodes


def _declared_by(deaths: Counter[str], member_id: str, others: int) -> Callable[[], bool]:
    return lambda: deaths[member_id] >= others


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q * len(ordered)) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--loss", type=float, default=0.01)
    parser.add_argument("--warmup", type=float, default=60.0, help="simulated seconds")
    parser.add_argument("--measure", type=float, default=600.0, help="simulated seconds")
    parser.add_argument("--crashes", type=int, default=10, help="members crashed afterwards")
    parser.add_argument("--spacing", type=float, default=0.05, help="seconds between joins")
    args = parser.parse_args()

    started = time.process_time()
    net = SimNet(args.seed, loss=args.loss, latency=(0.025, 0.075), count_bytes=True)
    nodes = build(net, args.n, random.Random(args.seed), args.spacing)
    net.run_for(args.warmup)
    deaths: Counter[str] = Counter()

    def on_event(o: Observed) -> bool:
        if o.event.kind is ChangeKind.DEAD:
            deaths[o.event.member.id] += 1
        return False

    net.on_event = on_event
    for x in nodes:
        x.bytes_sent = x.datagrams_sent = x.stream_bytes_sent = 0
        x.bytes_by_kind = {}
    net.run_for(args.measure)
    seconds = args.measure
    gossip = [x.bytes_sent / seconds for x in nodes]
    stream = [x.stream_bytes_sent / seconds for x in nodes]
    total = [g + s for g, s in zip(gossip, stream, strict=True)]
    busiest = max(nodes, key=lambda x: x.bytes_sent + x.stream_bytes_sent)
    print(
        f"N={args.n}, {args.loss:.0%} loss, 25-75 ms, {args.warmup:.0f} s warm-up, "
        f"{seconds:.0f} s measured"
    )
    print(
        f"  sent per member: median {statistics.median(total):.0f} B/s, p99 "
        f"{nearest_rank(total, 0.99):.0f}, max {max(total):.0f} (probes and gossip: median "
        f"{statistics.median(gossip):.0f}, max {max(gossip):.0f}; push-pull: median "
        f"{statistics.median(stream):.0f}, max {max(stream):.0f})"
    )
    kinds = ", ".join(
        f"{k} {v / seconds:.0f}"
        for k, v in sorted(busiest.bytes_by_kind.items(), key=lambda kv: -kv[1])
    )
    print(f"  the busiest ({busiest.id}, member {nodes.index(busiest)}) sends B/s: {kinds}")
    print(f"  false deaths while measuring: {sum(deaths.values())}")

    # Bytes are the window's measure only: the crashes need no message encoded.
    net.count_bytes = False
    rng = random.Random(args.seed + 1)
    detect: list[float] = []
    for victim in rng.sample(nodes[1:], args.crashes):
        deaths.clear()
        others = sum(1 for x in nodes if x.up and x is not victim)
        crashed_at = net.now
        net.crash(victim)
        net.run_until(net.now + 120.0, _declared_by(deaths, victim.id, others), step=0.1)
        detect.append(net.now - crashed_at)
        net.run_for(30.0)
    if detect:
        print(
            f"  crash declared dead by all: p50 {statistics.median(detect):.1f} s, "
            f"p99 {nearest_rank(detect, 0.99):.1f} s over {len(detect)} crashes"
        )
    print(f"  {time.process_time() - started:.0f} s of CPU")


if __name__ == "__main__":
    main()
