"""Crawl order, measured by the importance it captures (issue #17, seed 001's strategies).

For each order, on 1 peer and on 4, a crawl of the ranked synthetic web (Zipf host
sizes, in-degrees of exponent ~2.1: ``WebSpec(ranked=True)``, docs/synthweb.md) is judged
from the server's request log: the share of the whole web's PageRank held by the pages
fetched after 5, 10, 20 and 50% of them (Cho, Garcia-Molina and Page 1998; Baeza-Yates
et al. 2005), beside two bounds: breadth-first, and an omniscient order that fetches by
true PageRank under the same politeness. Also: duplicates, overlaps and short gaps (all
0 expected), and CPU per page against breadth-first.

The peers run as the cluster tests run them (tests/cluster/harness.py): in one process,
on an in-memory network, on trio's autojump clock, so a crawl at the CLI's politeness
(1 s between two requests to a host, 64 in flight) takes CPU, not hours. CPU per page
is the process's (peers, membership, the in-process web server) over the pages
fetched: the same work under every order but the order's own.

    python -m bench.order                                  # 250 hosts x 200 pages
    python -m bench.order --hosts 50 --pages 40 --peers 1  # a quick one
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import trio
import trio.testing

from tests.cluster.harness import SimPeer, cluster
from ubipy.config import BoundsConfig, CrawlConfig, CrawlOrder, Scope
from ubipy.fetch import Entry, Scheduler
from ubipy.peer import Ordering
from ubipy.store import NewURL, Shard
from ubipy.synthweb import Referee, RequestLog, SyntheticWeb, WebSpec, normalize_url

RESULTS = Path(__file__).parent / "results"
MARKS = (0.05, 0.10, 0.20, 0.50)
ORDERS = ("bfs", "opic", "pagerank", "big-site-first", "omniscient")


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    order: str
    peers: int
    pages: int
    captured: tuple[float, ...]  # PageRank share held at each of MARKS
    curve: tuple[float, ...]  # ... at every 1% of the pages
    cpu_per_page_ms: float
    duplicates: int
    overlaps: int
    short_gaps: int
    pagerank_runs: int
    pagerank_cpu_s: float


@contextmanager
def omniscient(truth: dict[str, float]) -> Iterator[None]:
    """The upper bound: OPIC's machinery with each URL scored by its true PageRank
    (a link found again adds nothing)."""
    scale = len(truth)

    def scored(self: Ordering, entry: Entry, found: Sequence[NewURL]) -> Sequence[NewURL]:
        return [u._replace(score=truth.get(u.url, 0.0) * scale) for u in found]

    patches: list[tuple[Any, str, Callable[..., Any]]] = [
        (Ordering, "scored", scored),
        (Shard, "credit", lambda self, items: None),
        (Scheduler, "credit", lambda self, host, fp, amount: None),
    ]
    saved = [(cls, name, getattr(cls, name)) for cls, name, _ in patches]
    for cls, name, fn in patches:
        setattr(cls, name, fn)
    try:
        yield
    finally:
        for cls, name, fn in saved:
            setattr(cls, name, fn)


def captured(log: RequestLog, truth: dict[str, float], total: int) -> list[float]:
    """PageRank held after each page fetched, in the order the server saw them."""
    held, out, seen = 0.0, [], set()
    for r in sorted(log, key=lambda r: r.start):
        url = normalize_url(f"http://{r.host}{r.target_path}")
        if url in truth and url not in seen and r.status == 200:
            seen.add(url)
            held += truth[url]
            out.append(held)
    return out + [held] * (total - len(out))


async def crawl(
    web: SyntheticWeb, order: str, peers: int, tmp: Path, args: argparse.Namespace
) -> tuple[RequestLog, list[SimPeer]]:
    crawl_order = CrawlOrder.OPIC if order == "omniscient" else CrawlOrder(order)
    bounds = BoundsConfig(scope=Scope.ANY, order=crawl_order, sitemaps=False)

    def tune(config: CrawlConfig) -> CrawlConfig:
        politeness = dataclasses.replace(config.politeness, concurrency=args.concurrency)
        return dataclasses.replace(config, politeness=politeness)

    async with cluster(tmp, web, seed=args.seed) as c:
        sims = await c.start_joined(peers, delay=args.delay, bounds=bounds, tune=tune)
        sims[0].peer.seed_urls([web.seed_url()])
        assert web.ranked is not None
        target = web.ranked.page_count + len(web.host_names())  # robots.txt too
        with trio.fail_after(10**7):
            await c.server.log.wait_for(lambda log: len(log) >= target)
            for s in sims:
                await s.peer.crawler.wait_idle()
        await c.stop_all()
    return c.server.log, sims


def measure(web: SyntheticWeb, order: str, peers: int, args: argparse.Namespace) -> Run:
    assert web.ranked is not None
    truth = web.ranked.pagerank()
    total = web.ranked.page_count
    with tempfile.TemporaryDirectory(prefix="ubipy-order-") as tmp:
        started = time.process_time()
        with omniscient(truth) if order == "omniscient" else nullcontext():
            log, sims = trio.run(
                crawl,
                web,
                order,
                peers,
                Path(tmp),
                args,
                clock=trio.testing.MockClock(autojump_threshold=0),
            )
        cpu = time.process_time() - started
    held = captured(log, truth, total)
    referee = Referee(list(log), web)
    pages = sum(1 for r in log if r.status == 200 and not r.target_path.endswith(".txt"))
    return Run(
        order,
        peers,
        pages,
        tuple(held[max(0, round(m * total) - 1)] for m in MARKS),
        tuple(held[max(0, round(p / 100 * total) - 1)] for p in range(1, 101)),
        1000 * cpu / max(1, pages),
        len(referee.duplicates()),
        len(referee.overlaps()),
        len(referee.short_gaps(args.delay)),
        sum(s.peer.crawler.order.rank_runs for s in sims),
        sum(s.peer.crawler.order.rank_seconds for s in sims),
    )


def table(runs: list[Run]) -> str:
    bfs = {r.peers: r for r in runs if r.order == "bfs"}
    best = {r.peers: r for r in runs if r.order == "omniscient"}
    head = " | ".join(f"{m:.0%}" for m in MARKS)
    lines = [
        f"| order | peers | {head} | gap closed at 10% | CPU/page vs bfs | dup | overlaps | "
        "short gaps |",
        "|---|---|" + "---|" * len(MARKS) + "---|---|---|---|---|",
    ]
    for r in runs:
        low, high = bfs.get(r.peers), best.get(r.peers)
        closed = "-"
        if low is not None and high is not None and high.captured[1] > low.captured[1]:
            gap = high.captured[1] - low.captured[1]
            closed = f"{(r.captured[1] - low.captured[1]) / gap:+.0%}"
        ratio = f"{r.cpu_per_page_ms / low.cpu_per_page_ms:.2f}x" if low else "-"
        if r.pagerank_runs:
            ratio += f" ({r.pagerank_runs} PageRanks, {r.pagerank_cpu_s:.0f} s)"
        shares = " | ".join(f"{c:.1%}" for c in r.captured)
        lines.append(
            f"| {r.order} | {r.peers} | {shares} | {closed} | {ratio} | {r.duplicates} | "
            f"{r.overlaps} | {r.short_gaps} |"
        )
    return "\n".join(lines)


def chart(runs: list[Run], where: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    peers = sorted({r.peers for r in runs})
    fig, axes = plt.subplots(1, len(peers), figsize=(6 * len(peers), 4.5), squeeze=False)
    for ax, n in zip(axes[0], peers, strict=True):
        for r in runs:
            if r.peers == n:
                ax.plot(range(1, 101), [100 * c for c in r.curve], label=r.order)
        ax.set_title(f"{n} peer{'s' if n > 1 else ''}")
        ax.set_xlabel("pages fetched (% of the web)")
        ax.set_ylabel("PageRank held (%)")
        ax.set_xlim(0, 100)
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(where, dpi=90)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=250)
    parser.add_argument("--pages", type=int, default=200, help="pages per host on average")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--peers", default="1,4")
    parser.add_argument("--orders", default=",".join(ORDERS))
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds the server takes per answer"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "order")
    args = parser.parse_args(argv)
    spec = WebSpec(
        seed=args.seed,
        hosts=args.hosts,
        pages_per_host=args.pages,
        ranked=True,
        latency=args.latency,
        jitter=args.latency,
    )
    web = SyntheticWeb(spec)
    runs = []
    for n in (int(p) for p in args.peers.split(",")):
        for order in args.orders.split(","):
            run = measure(web, order, n, args)
            print(json.dumps(dataclasses.asdict(run) | {"curve": None}), flush=True)
            runs.append(run)
    text = table(runs)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"`python -m bench.order --hosts {args.hosts} --pages {args.pages} --seed {args.seed} "
        f"--delay {args.delay} --concurrency {args.concurrency} --latency {args.latency}`: "
        "share of the web's PageRank "
        "held after each fraction of the pages fetched.\n\n"
    )
    args.out.with_suffix(".md").write_text(header + text + "\n", encoding="utf-8")
    args.out.with_suffix(".json").write_text(
        json.dumps([dataclasses.asdict(r) for r in runs], indent=1) + "\n", encoding="utf-8"
    )
    chart(runs, args.out.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
