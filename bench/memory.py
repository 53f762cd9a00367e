"""Bounded memory: a frontier grown to 1,000,000 pending URLs over 10,000 hosts.

    python bench/memory.py                           # 1,000,000 URLs over 10,000 hosts
    python bench/memory.py --urls 200000 --hosts 2000
    python bench/memory.py --tracemalloc             # also: what holds the memory (top 10)

A fresh child process opens a shard in a temporary directory and builds the peer's real
`Crawler` (admission, Bloom filter, recent-URL cache, politeness scheduler) with an HTTP
client that is never used. It then admits synthetic URLs (`http://host{i}.example/path/{j}`,
spread round-robin over the hosts) the way links found on pages are admitted: pages of
`--links` links each, turned into candidates by the crawler, admitted in one transaction
per group of `commit_every_pages` pages, then handed to the scheduler. Nothing is fetched.

Reported: the RSS after imports and set-up (baseline), the peak RSS of the process
(ru_maxrss) and its RSS at the end, bytes per seen URL in memory ((peak - baseline) / N)
and on disk (the shard file and its WAL / N), how many frontier entries the scheduler holds
in memory versus on disk, and the time taken. The target: peak RSS under 300 MB.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TARGET_MB = 300.0


def rss_mb() -> float:
    """The current resident set size, from /proc (Linux)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def file_sizes(directory: Path) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in directory.iterdir() if p.is_file()}


def child(args: argparse.Namespace) -> dict[str, Any]:
    import tracemalloc

    import httpx2
    import trio

    from ubipy.config import BoundsConfig, CrawlConfig, CrawlOrder, PolitenessConfig, Scope
    from ubipy.fetch import Entry
    from ubipy.peer import Crawler
    from ubipy.store import NewURL, Shard

    data = Path(args.dir)
    figures: dict[str, Any] = {}

    async def grow() -> None:
        config = CrawlConfig(
            data_dir=data,
            bounds=BoundsConfig(scope=Scope.ANY, order=CrawlOrder(args.order)),
            politeness=PolitenessConfig(delay=0.0),
        )
        if args.window is not None:
            store = dataclasses.replace(config.store, host_window=args.window)
            config = dataclasses.replace(config, store=store)
        shard = Shard.open(data)
        client = httpx2.AsyncClient(trust_env=False)  # never used: nothing is fetched
        crawler = Crawler(config, shard, client)
        figures["baseline_mb"] = rss_mb()
        figures["host_window"] = config.store.host_window
        figures["commit_every_pages"] = config.store.commit_every_pages
        if args.tracemalloc:
            tracemalloc.start(1)
        n, hosts, per_page = args.urls, args.hosts, args.links
        group = config.store.commit_every_pages * per_page
        started = time.monotonic()
        next_report = 100_000
        admitted = 0
        for first in range(0, n, group):
            batch = range(first, min(first + group, n))
            # One page's links at a time, as the committer gathers them.
            candidates: list[NewURL] = []
            for page_start in range(batch.start, batch.stop, per_page):
                links = [
                    f"http://host{k % hosts}.example/path/{k // hosts}"
                    for k in range(page_start, min(page_start + per_page, batch.stop))
                ]
                # Under a ranked order each page hands its links a share of its score.
                page = Entry(page_start, page_start, "", 0, score=1.0)
                candidates.extend(crawler.order.scored(page, crawler._candidates(links, None, 1)))
            with shard.transaction():
                rows = crawler.admission.admit(candidates)
            crawler._schedule(rows)
            admitted += len(rows)
            if admitted >= next_report:
                elapsed = time.monotonic() - started
                print(
                    f"{admitted:>10,} URLs  {elapsed:6.1f} s  RSS {rss_mb():6.1f} MB  "
                    f"peak {peak_rss_mb():6.1f} MB",
                    file=sys.stderr,
                    flush=True,
                )
                next_report += 100_000
        figures["seconds"] = time.monotonic() - started
        figures["admitted"] = admitted
        figures["pending"] = crawler.pending
        sched = crawler.scheduler
        slots = sched._slots.values()
        figures["hosts"] = sched.hosts
        figures["in_memory_entries"] = sum(len(s.queue) for s in slots)
        figures["on_disk_entries"] = sum(s.on_disk for s in slots)
        figures["rss_after_mb"] = rss_mb()
        figures["peak_rss_mb"] = peak_rss_mb()
        if args.tracemalloc:
            snapshot = tracemalloc.take_snapshot()
            figures["tracemalloc_peak_mb"] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            top = snapshot.statistics("lineno")[:10]
            figures["tracemalloc_top"] = [
                f"{s.size / 2**20:7.1f} MB {s.count:>9,} blocks  {s.traceback[0]}" for s in top
            ]
        # Before closing: the WAL holds what was not checkpointed yet (close checkpoints it).
        figures["files_open"] = file_sizes(data)
        counts = shard.counts()
        figures["seen_rows"] = counts.seen
        figures["pending_rows"] = counts.pending
        await client.aclose()
        shard.close()

    trio.run(grow)
    files = file_sizes(data)
    figures["disk_bytes"] = sum(files.values())
    figures["files"] = files
    return figures


def report(args: argparse.Namespace, f: dict[str, Any]) -> str:
    n = max(int(f["admitted"]), 1)
    growth = f["peak_rss_mb"] - f["baseline_mb"]
    db = sum(v for k, v in f["files"].items() if not k.endswith(("-wal", "-shm")))
    wal = sum(v for k, v in f["files_open"].items() if k.endswith(("-wal", "-shm")))
    verdict = "PASS" if f["peak_rss_mb"] < TARGET_MB else "FAIL"
    lines = [
        f"frontier: {f['admitted']:,} URLs admitted over {f['hosts']:,} hosts "
        f"({f['pending']:,} pending; seen rows {f['seen_rows']:,}) in {f['seconds']:.1f} s "
        f"({f['admitted'] / max(f['seconds'], 1e-9):,.0f} URLs/s)",
        f"scheduler: {f['in_memory_entries']:,} entries in memory "
        f"(window {f['host_window']} per host), {f['on_disk_entries']:,} on disk only",
        "",
        "| measure | value |",
        "|---|---:|",
        f"| baseline RSS (imports, shard, crawler) | {f['baseline_mb']:.1f} MB |",
        f"| peak RSS (ru_maxrss) | {f['peak_rss_mb']:.1f} MB |",
        f"| RSS after | {f['rss_after_mb']:.1f} MB |",
        f"| memory per seen URL, (peak - baseline) / N | {growth * 2**20 / n:.0f} B |",
        f"| shard on disk after close (WAL checkpointed) | {db / 2**20:.1f} MB |",
        f"| WAL + shm while open, at the end | {wal / 2**20:.1f} MB |",
        f"| disk per seen URL (closed shard) | {f['disk_bytes'] / n:.0f} B |",
        f"| time | {f['seconds']:.1f} s |",
        "",
        f"target: peak RSS < {TARGET_MB:.0f} MB: {verdict} ({f['peak_rss_mb']:.1f} MB)",
    ]
    if "tracemalloc_top" in f:
        lines += [
            "",
            f"tracemalloc (traced peak {f['tracemalloc_peak_mb']:.1f} MB), top 10 by size:",
            *f["tracemalloc_top"],
        ]
    lines += [
        "",
        "reproduce: python bench/memory.py "
        f"--urls {args.urls} --hosts {args.hosts} --links {args.links}"
        + (f" --window {args.window}" if args.window is not None else "")
        + (f" --order {args.order}" if args.order != "bfs" else "")
        + (" --tracemalloc" if args.tracemalloc else ""),
    ]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--urls", type=int, default=1_000_000)
    p.add_argument("--hosts", type=int, default=10_000)
    p.add_argument("--links", type=int, default=50, help="links per simulated page")
    p.add_argument("--window", type=int, default=None, help="host_window (default: config's)")
    p.add_argument(
        "--tracemalloc", action="store_true", help="top 10 allocations (much slower; RSS grows)"
    )
    p.add_argument("--order", default="bfs", help="the crawl order (--order)")
    p.add_argument("--keep", type=Path, default=None, help="keep the shard here")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--dir", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child:
        Path(args.result).write_text(json.dumps(child(args)))
        return
    base = Path(tempfile.mkdtemp(prefix="ubipy-memory-"))
    data = (args.keep or base / "data").resolve()
    if data.exists():
        shutil.rmtree(data)
    result = base / "result.json"
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--dir",
        str(data),
        "--result",
        str(result),
        "--urls",
        str(args.urls),
        "--hosts",
        str(args.hosts),
        "--links",
        str(args.links),
        *(["--window", str(args.window)] if args.window is not None else []),
        "--order",
        args.order,
        *(["--tracemalloc"] if args.tracemalloc else []),
    ]
    try:
        # A fresh process: its peak RSS is this frontier's, not this script's.
        subprocess.run(cmd, check=True, env=dict(os.environ))
        figures = json.loads(result.read_text())
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(report(args, figures))
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
