"""Keeping a crawl fresh, measured by freshness (issue #18, seed 001's update policies).

For each refresh policy, at one fixed budget of refreshes a second, a continuous crawl
(``--recrawl``) of the changing synthetic web (``WebSpec(ranked=True, changing=True)``:
pages changing as Poisson processes at rates from a minute to weeks, correlated within
hosts; docs/synthweb.md) is judged from the server's request log against the web's
truth: average freshness and age over the measured window (after a warm-up), requests
that found the page unchanged, 304s, and politeness (overlaps, short gaps). Beside them
two bounds: ``uniform``, and an ``oracle`` that knows every page's true rate and
allocates by Cho and Garcia-Molina's optimum; and ``proportional`` (to the rate), to
show the effect the papers describe. Also the freshness of the pages seen fewer than 3
times, where cluster sampling (the host's rate) should beat each page's own history.

Sitemap lastmod hints: on the changing web a share of the hosts list their pages in
/sitemap.xml with a lastmod that is accurate, "now" (a liar) or frozen (lastmods.py).
``history+sitemaps`` reads the sitemaps (and re-reads them) with the hints off,
``history+lastmod`` takes them as hints where the visits bore them out; the other
policies read no sitemap. Each hinted run reports the hints used and ignored, and the
hosts trusted, per kind of host, and the freshness of the accurate hosts' pages.

The peers run as the cluster tests run them (tests/cluster/harness.py): in one process,
on an in-memory network, on trio's autojump clock, so a day of crawling costs CPU, not
a day.

    python -m bench.freshness                                # 1 peer, 1,000 pages, a day
    python -m bench.freshness --peers 1,4 --hours 48
    python -m bench.freshness --policies history+sitemaps,history+lastmod
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

import trio
import trio.testing

from tests.cluster.harness import cluster
from ubipy.config import BoundsConfig, CrawlConfig, RecrawlConfig, RefreshPolicy, Scope
from ubipy.peer import Refresher, refreshplans
from ubipy.synthweb import (
    LastmodKind,
    Referee,
    RequestLog,
    SyntheticWeb,
    WebSpec,
    fetches,
    measure_freshness,
    normalize_url,
    page_freshness,
)

RESULTS = Path(__file__).parent / "results"
POLICIES = ("uniform", "history", "importance", "cluster", "proportional", "oracle")
# history, reading sitemaps: their lastmods not used, or used as hints.
SITEMAPS, LASTMOD = "history+sitemaps", "history+lastmod"


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    policy: str
    peers: int
    refreshes: int
    freshness: float
    age_s: float
    unchanged: int
    not_modified: int
    # Over each page's time before its third visit.
    early_pages: int
    early_freshness: float
    overlaps: int
    short_gaps: int
    cpu_s: float
    # With sitemaps read: freshness of the pages of hosts whose lastmod is accurate, and
    # per kind of host (accurate, now, frozen, absent): hints used, ignored, hosts
    # trusted of the hosts with checks.
    accurate_freshness: float | None = None
    hints: dict[str, list[int]] | None = None


@contextmanager
def oracle(web: SyntheticWeb) -> Iterator[None]:
    """The bound: every page's true rate instead of its estimate."""
    assert web.changes is not None
    changes = web.changes
    # The plans' arithmetic calls refreshplans' change_rates by name, in the module.
    real = getattr(refreshplans, "change_rates")  # noqa: B009

    def true_rates(pages: Sequence[Any], *, by_group: bool) -> list[float]:  # Samples
        return [changes.rate(p.url) for p in pages]

    setattr(refreshplans, "change_rates", true_rates)  # noqa: B010
    try:
        yield
    finally:
        setattr(refreshplans, "change_rates", real)  # noqa: B010


async def crawl(
    web: SyntheticWeb, policy: str, peers: int, tmp: Path, args: argparse.Namespace
) -> tuple[RequestLog, float, float, dict[str, list[int]] | None]:
    """The crawl; returns its log, the measured window and the hints by kind of host."""
    sitemaps = policy in (SITEMAPS, LASTMOD)
    bounds = BoundsConfig(scope=Scope.ANY, sitemaps=sitemaps)
    rate = args.budget / peers  # the same budget for the cluster as for one peer
    chosen = RefreshPolicy.HISTORY if policy in ("oracle", SITEMAPS, LASTMOD) else policy

    def tune(config: CrawlConfig) -> CrawlConfig:
        recrawl = RecrawlConfig(
            recrawl=True,
            policy=RefreshPolicy(chosen),
            rate=rate,
            min_interval=args.min_interval,
            replan=300,
            lastmod_hints=policy == LASTMOD,
        )
        return dataclasses.replace(config, recrawl=recrawl)

    async with cluster(tmp, web, seed=args.seed) as c:
        sims = await c.start_joined(peers, delay=args.delay, bounds=bounds, tune=tune)
        sims[0].peer.seed_urls([web.seed_url()])
        start = trio.current_time() + args.warmup * 3600
        end = start + args.hours * 3600
        await trio.sleep_until(end)
        hints = by_kind(web, [s.peer.crawler.refresher for s in sims]) if sitemaps else None
        await c.stop_all()
    return c.server.log, start, end, hints


def by_kind(web: SyntheticWeb, refreshers: Sequence[Refresher | None]) -> dict[str, list[int]]:
    """Per kind of host: [hints used, hints ignored, hosts trusted, hosts with checks]."""
    assert web.sitemaps.changing is not None
    kinds = web.sitemaps.changing
    out: dict[str, list[int]] = {k.value: [0, 0, 0, 0] for k in LastmodKind}
    for refresher in refreshers:
        assert refresher is not None
        hints = refresher.hints
        for host in web.host_names():
            kind = kinds.lastmod_kind(host)
            if kind is None:
                continue
            row = out[kind.value]
            row[0] += hints.used[host]
            row[1] += hints.ignored[host]
            row[2] += hints.trusted(host)
            row[3] += host in hints.hosts
    return out


def measure(web: SyntheticWeb, policy: str, peers: int, args: argparse.Namespace) -> Run:
    assert web.changes is not None
    with tempfile.TemporaryDirectory(prefix="ubipy-fresh-") as tmp:
        started = time.process_time()
        with oracle(web) if policy == "oracle" else nullcontext():
            log, start, end, hints = trio.run(
                crawl,
                web,
                policy,
                peers,
                Path(tmp),
                args,
                clock=trio.testing.MockClock(autojump_threshold=0),
            )
        cpu = time.process_time() - started
    copies = fetches(log)
    result = measure_freshness(web.changes, copies, start, end)
    young, young_pages = early_freshness(web, copies, end)
    referee = Referee(list(log), web)
    window = [r for r in log if start <= r.start <= end]
    accurate = None
    if hints is not None:
        assert web.sitemaps.changing is not None
        kinds = web.sitemaps.changing
        changes = web.changes
        honest = LastmodKind.ACCURATE
        mine = [u for u in changes.urls() if kinds.lastmod_kind(changes.group(u)) is honest]
        accurate = measure_freshness(web.changes, copies, start, end, pages=mine).freshness
    return Run(
        policy,
        peers,
        result.fetches,
        result.freshness,
        result.age,
        result.unchanged,
        sum(1 for r in window if r.status == 304),
        young_pages,
        young,
        len(referee.overlaps()),
        len(referee.short_gaps(args.delay)),
        cpu,
        accurate,
        hints,
    )


def early_freshness(
    web: SyntheticWeb, copies: list[tuple[str, float]], end: float
) -> tuple[float, int]:
    """Freshness over each page's time before its third visit (from its first): while
    its own history is one interval or none, where its group's rate should say more.
    Returns it, and how many pages had such time."""
    assert web.changes is not None
    times: dict[str, list[float]] = defaultdict(list)
    for url, when in copies:
        times[normalize_url(url)].append(when)
    fresh = total = 0.0
    pages = 0
    for url, seen in times.items():
        page = web.changes.page(url)
        if page is None:
            continue
        seen.sort()
        stop = seen[2] if len(seen) > 2 else end
        if stop <= seen[0]:
            continue
        timeline = web.changes.timeline(page, max(stop, seen[-1]))
        fresh += page_freshness(timeline, seen, seen[0], stop).fresh
        total += stop - seen[0]
        pages += 1
    return (fresh / total if total else float("nan")), pages


def table(runs: list[Run]) -> str:
    lines = [
        "| policy | peers | freshness | age (min) | gap closed | refreshes | unchanged | 304s "
        "| before a page's 3rd visit | overlaps | short gaps |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    low = {r.peers: r.freshness for r in runs if r.policy == "uniform"}
    high = {r.peers: r.freshness for r in runs if r.policy == "oracle"}
    for r in runs:
        closed = "-"
        if r.peers in low and r.peers in high and high[r.peers] > low[r.peers]:
            closed = f"{(r.freshness - low[r.peers]) / (high[r.peers] - low[r.peers]):+.0%}"
        lines.append(
            f"| {r.policy} | {r.peers} | {r.freshness:.3f} | {r.age_s / 60:.1f} | {closed} | "
            f"{r.refreshes} | {r.unchanged} | {r.not_modified} | {r.early_freshness:.3f} "
            f"({r.early_pages}) | {r.overlaps} | {r.short_gaps} |"
        )
    hinted = [r for r in runs if r.hints is not None]
    if hinted:
        lines += [
            "",
            "| policy | peers | freshness, accurate hosts' pages | per kind of host: hints "
            "used / ignored, hosts trusted / checked |",
            "|---|---|---|---|",
        ]
        for r in hinted:
            assert r.hints is not None
            kinds = "; ".join(
                f"{kind} {u} / {i}, {t} / {c}" for kind, (u, i, t, c) in r.hints.items()
            )
            lines.append(f"| {r.policy} | {r.peers} | {r.accurate_freshness:.3f} | {kinds} |")
    return "\n".join(lines)


def chart(runs: list[Run], where: Path) -> None:
    """Freshness and age by policy, one group of bars per number of peers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    peers = sorted({r.peers for r in runs})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / len(peers)
    policies = list(dict.fromkeys(r.policy for r in runs))
    for k, n in enumerate(peers):
        mine = {r.policy: r for r in runs if r.peers == n}
        xs = [i + k * width for i in range(len(policies))]
        label = f"{n} peer{'s' if n > 1 else ''}"
        fresh = [mine[p].freshness if p in mine else 0 for p in policies]
        age = [mine[p].age_s / 60 if p in mine else 0 for p in policies]
        axes[0].bar(xs, fresh, width, label=label)
        axes[1].bar(xs, age, width, label=label)
    for ax, title in zip(axes, ("average freshness", "average age (minutes)"), strict=True):
        ax.set_xticks([i + width * (len(peers) - 1) / 2 for i in range(len(policies))])
        ax.set_xticklabels(policies, rotation=20)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        ax.legend()
    axes[0].set_ylim(0.75, 1.0)
    fig.tight_layout()
    fig.savefig(where, dpi=90)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=40)
    parser.add_argument("--pages", type=int, default=25, help="pages per host on average")
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--peers", default="1")
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--budget", type=float, default=None, help="refreshes/s (default: N/h)")
    parser.add_argument("--hours", type=float, default=24.0, help="measured, after the warm-up")
    parser.add_argument("--warmup", type=float, default=6.0, help="hours")
    parser.add_argument("--delay", type=float, default=1.0)
    parser.add_argument("--min-interval", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=RESULTS / "freshness")
    parser.add_argument(
        "--runs",
        type=Path,
        default=None,
        help="render the table and chart of these runs "
        "(the JSON lines a run prints) instead of running",
    )
    args = parser.parse_args(argv)
    spec = WebSpec(
        seed=args.seed, hosts=args.hosts, pages_per_host=args.pages, ranked=True, changing=True
    )
    web = SyntheticWeb(spec)
    assert web.ranked is not None
    if args.budget is None:
        args.budget = web.ranked.page_count / 3600  # each page once an hour on average
    runs = []
    if args.runs is not None:
        lines = args.runs.read_text(encoding="utf-8").splitlines()
        runs = [Run(**json.loads(line)) for line in lines if line.startswith("{")]
    for n in (int(p) for p in args.peers.split(",")) if args.runs is None else ():
        for policy in args.policies.split(","):
            run = measure(web, policy, n, args)
            print(json.dumps(dataclasses.asdict(run)), flush=True)
            runs.append(run)
    text = table(runs)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"`python -m bench.freshness --hosts {args.hosts} --pages {args.pages} --seed "
        f"{args.seed} --budget {args.budget:.4g} --hours {args.hours:g} --warmup "
        f"{args.warmup:g}`: {web.ranked.page_count} pages, {args.budget:.4g} refreshes/s "
        "in all.\n\n"
    )
    args.out.with_suffix(".md").write_text(header + text + "\n", encoding="utf-8")
    chart(runs, args.out.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
