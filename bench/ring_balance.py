"""Balance, movement and cost of the ring against the seed thesis's placements.

    python bench/ring_balance.py [--hosts 100000]

Prints Markdown tables (pasted into docs/ring.md): the V sweep at N=8 that picks
DEFAULT_VNODES, then every scheme at N = 2, 4, 8, 64, 1000, then lookup, build and
memory at N=1000. Everything is seeded, so two runs print the same figures except
the timings.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from ubipy.ring import (
    CIRCLE,
    DEFAULT_VNODES,
    ModuloPlacement,
    Placement,
    Ring,
    TwoLevelPlacement,
    diff,
)

SEED = 20240611
SIZES = (2, 4, 8, 64, 1000)
SWEEP = (16, 32, 64, 128, 256, 512)
SWEEP_ID_SETS = 200
ZIPF_EXPONENT = 1.1
TOP_HOST_PAGES = 1_000_000

Factory = Callable[[Sequence[str], Sequence[str]], Placement]


def make_hosts(count: int, rng: random.Random) -> list[str]:
    """Host keys shaped like the crawler's: mostly synthetic names, some real-looking
    ones, a few with ports, so the hash sees sequential and irregular keys alike."""
    words = ("news", "shop", "blog", "wiki", "mail", "docs", "maps", "cdn", "api")
    tlds = ("com", "org", "net", "io", "de", "cn", "test")
    hosts = []
    for i in range(count):
        kind = i % 10
        if kind < 7:
            hosts.append(f"h{i:06d}.synth.test")
        elif kind < 9:
            hosts.append(f"{rng.choice(words)}{i}.{rng.choice(words)}.{rng.choice(tlds)}")
        else:
            hosts.append(f"example{i}.com:{rng.choice((8080, 8443, 3000))}")
    return hosts


def zipf_pages(count: int, rng: random.Random) -> list[int]:
    """Pages per host: Zipf over a random ranking, so the largest hosts are spread
    over the name space rather than being the first names."""
    ranks = list(range(1, count + 1))
    rng.shuffle(ranks)
    return [max(1, round(TOP_HOST_PAGES / r**ZIPF_EXPONENT)) for r in ranks]


def member_ids(count: int, rng: random.Random) -> list[str]:
    # Peer ids are random and persistent; hex of 64 random bits stands in for them.
    return [f"{rng.getrandbits(64):016x}" for _ in range(count)]


def ratio(loads: Sequence[int], members: int) -> float:
    """max/mean over all members, counting a member that owns nothing as 0."""
    return max(loads) / (sum(loads) / members)


@dataclass(frozen=True, slots=True)
class Row:
    hosts_ratio: float
    pages_ratio: float
    join_moved: float
    join_stray: float
    leave_moved: float
    leave_stray: float


def measure(
    factory: Factory, ids: list[str], joiner: str, hosts: list[str], pages: list[int]
) -> Row:
    base_ids, leaver = ids, ids[0]
    plan = [*ids, joiner]
    base = factory(base_ids, plan)
    before = [base.owner(h) for h in hosts]
    by_member = Counter(before)
    page_load: Counter[str] = Counter()
    for owner, size in zip(before, pages, strict=True):
        page_load[owner] += size
    n = len(ids)
    join = factory([*ids, joiner], plan)
    leave = factory(ids[1:], plan)
    after_join = [join.owner(h) for h in hosts]
    after_leave = [leave.owner(h) for h in hosts]
    moved = [(a, b) for a, b in zip(before, after_join, strict=True) if a != b]
    gone = [(a, b) for a, b in zip(before, after_leave, strict=True) if a != b]
    total = len(hosts)
    return Row(
        hosts_ratio=ratio(list(by_member.values()), n),
        pages_ratio=ratio(list(page_load.values()), n),
        join_moved=len(moved) / total,
        join_stray=sum(b != joiner for _, b in moved) / total,
        leave_moved=len(gone) / total,
        leave_stray=sum(a != leaver for a, _ in gone) / total,
    )


def arc_shares(ring: Ring) -> Counter[str]:
    """Each member's exact share of the circle, with no host sampling noise."""
    points = ring.points
    shares: Counter[str] = Counter()
    previous = points[-1] - CIRCLE
    for point in points:
        shares[ring.owner_at(previous)] += point - previous
        previous = point
    return shares


def lookup_us(placement: Placement, hosts: list[str]) -> float:
    owner = placement.owner
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for host in hosts:
            owner(host)
        best = min(best, time.perf_counter() - start)
    return best / len(hosts) * 1e6


def build_cost(make: Callable[[], Placement]) -> tuple[float, float]:
    """(build ms, retained MiB). Memory is what tracemalloc still sees allocated after
    construction (lists, int objects, dicts), measured in a second, untimed build."""
    gc.collect()
    start = time.perf_counter()
    make()
    build_ms = (time.perf_counter() - start) * 1e3
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    kept = make()
    retained = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del kept
    return build_ms, retained / 2**20


def percentile(values: Sequence[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def sweep(hosts: list[str], rng: random.Random) -> None:
    print("### The V sweep at N=8\n")
    print(
        f"*hosts*: {len(hosts):,} hosts on one id set. *share*: each member's exact arc "
        f"of the circle (what host counts converge to) over {SWEEP_ID_SETS} random id "
        "sets: median, 99th percentile, worst, and how many sets exceed 1.2. Join/leave: "
        "the share the joiner takes or the leaver gives up, lowest–highest over the "
        "same sets (ideal 11.1% and 12.5%). owner() at N=8; build and memory at N=1000.\n"
    )
    print(
        "| V | max/mean hosts | share median | p99 | worst | sets > 1.2 | join moves "
        "| leave moves | owner() µs | build ms, N=1000 | MiB, N=1000 |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    id_sets = [member_ids(9, rng) for _ in range(SWEEP_ID_SETS)]
    big = member_ids(1000, rng)
    for v in SWEEP:
        ring = Ring(id_sets[0][:8], vnodes=v)
        hosts_ratio = ratio(list(Counter(ring.owner(h) for h in hosts).values()), 8)
        ratios, joins, leaves = [], [], []
        for ids in id_sets:
            shares = arc_shares(Ring(ids[:8], vnodes=v))
            ratios.append(max(shares.values()) * 8 / CIRCLE)
            joins.append(arc_shares(Ring(ids, vnodes=v))[ids[8]] / CIRCLE)
            leaves.append(shares[ids[0]] / CIRCLE)
        us = lookup_us(ring, hosts[:20_000])
        build_ms, mib = build_cost(partial(Ring, big, vnodes=v))
        print(
            f"| {v}{' (default)' if v == DEFAULT_VNODES else ''} | {hosts_ratio:.3f} "
            f"| {statistics.median(ratios):.3f} | {percentile(ratios, 0.99):.3f} "
            f"| {max(ratios):.3f} | {sum(r > 1.2 for r in ratios)} "
            f"| {min(joins):.1%}–{max(joins):.1%} | {min(leaves):.1%}–{max(leaves):.1%} "
            f"| {us:.2f} | {build_ms:.0f} | {mib:.1f} |"
        )
    print()


def schemes(n: int) -> list[tuple[str, Factory]]:
    return [
        (f"ring V={DEFAULT_VNODES}", lambda live, plan: Ring(live)),
        ("one-level mod N", lambda live, plan: ModuloPlacement(live)),
        # The thesis's table planned for exactly the initial members: a joiner has no
        # slot. Logical node i is the i-th initial member.
        (
            "two-level L=N",
            lambda live, plan: TwoLevelPlacement(live, roster=plan[:n], logic_num=n),
        ),
        # A table planned for twice the members: the joiner is the next planned node
        # and the other half of the slots are orphans hashed onto the live nodes.
        (
            "two-level L=2N",
            lambda live, plan: TwoLevelPlacement(live, roster=plan, logic_num=2 * n),
        ),
    ]


def comparison(hosts: list[str], pages: list[int], rng: random.Random) -> None:
    total_pages = sum(pages)
    print("### All schemes\n")
    print(
        f"{len(hosts):,} hosts; {total_pages:,} pages, Zipf s={ZIPF_EXPONENT}, the "
        f"largest host {max(pages) / total_pages:.1%} of all pages. *stray*: hosts "
        "that moved between two members that both stayed. Join adds one member, leave "
        "removes one.\n"
    )
    print(
        "| N | scheme | max/mean hosts | max/mean pages | best possible pages "
        "| join moves | join stray | leave moves | leave stray |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for n in SIZES:
        ids = member_ids(n + 1, rng)
        floor = max(1.0, max(pages) / (total_pages / n))
        for name, factory in schemes(n):
            row = measure(factory, ids[:n], ids[n], hosts, pages)
            print(
                f"| {n} | {name} | {row.hosts_ratio:.3f} | {row.pages_ratio:.2f} "
                f"| {floor:.2f} | {row.join_moved:.1%} | {row.join_stray:.1%} "
                f"| {row.leave_moved:.1%} | {row.leave_stray:.1%} |"
            )
    print()


def costs(hosts: list[str], rng: random.Random) -> None:
    n = 1000
    ids = member_ids(n + 1, rng)
    print("### Cost at N=1000\n")
    print(
        "owner(): best of 3 passes over 20,000 hosts, loop included. Memory: bytes "
        "tracemalloc still sees allocated after construction (lists, int objects).\n"
    )
    print("| scheme | owner() µs | build ms | memory MiB |")
    print("|---|---:|---:|---:|")
    for name, factory in schemes(n):
        placement = factory(ids[:n], ids)
        build_ms, mib = build_cost(partial(factory, ids[:n], ids))
        us = lookup_us(placement, hosts[:20_000])
        print(f"| {name} | {us:.2f} | {build_ms:.1f} | {mib:.2f} |")
    old, new = Ring(ids[:n]), Ring(ids)
    start = time.perf_counter()
    arcs = diff(old, new)
    diff_ms = (time.perf_counter() - start) * 1e3
    print(
        f"\n`diff()` of a join at N=1000: {diff_ms:.0f} ms, {len(arcs)} arcs "
        f"covering {sum(a.end - a.start for a in arcs) / CIRCLE:.2%} of the circle.\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hosts", type=int, default=100_000)
    args = parser.parse_args()
    rng = random.Random(SEED)
    hosts = make_hosts(args.hosts, rng)
    pages = zipf_pages(args.hosts, rng)
    started = time.perf_counter()
    sweep(hosts, random.Random(SEED + 1))
    comparison(hosts, pages, random.Random(SEED + 2))
    costs(hosts, random.Random(SEED + 3))
    print(f"({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
