"""Scaling: 1, 2, 4 and 8 ubipy peers (and scrapy-redis processes) on a web with latency.

    python -m bench.scaling                          # N = 1,2,4,8, both crawlers
    python -m bench.scaling --peers 1,2 --duration 10 --only ubipy --out /tmp/look
                                                     # a quick look, kept out of bench/results/

For each N, each crawler gets a fresh synthetic web (`python -m ubipy.synthweb`, one
process, every response delayed by the emulated link: 50 ms ± 20% by default) with enough
hosts that politeness is not the limit (500 hosts, 0.2 s between requests to a host), and
N crawler processes with the same fixed number of requests in flight each (2 by default).
With 50 ms per response, a process with 2 requests in flight can fetch at most about 40
pages/s however fast it is: each is bound by its own link, not by this machine's CPU,
which the harness measures (and says when it is saturated). The web's home page links to
every host, so a crawl starts by asking each host for its robots.txt.

- ubipy: N `ubipy peer` processes (`--join` the first, one cluster secret); once every peer
  sees N alive members, the web's home page is seeded into the first one.
- scrapy-redis: N Scrapy processes (`bench/scrapy_redis_spider.py`) sharing the request
  queue (FIFO, breadth-first; `--scrapy-queue`) and duplicate filter in a Redis started
  here on loopback (`redis-server` from the machine's packages; skipped with a message
  when there is none); the home page is pushed to Redis once all N are up. The same
  concurrency per process, one request per host at a time and the same delay, but per
  process: Scrapy shares no per-host state between processes.

The clock starts at the first request the web receives and runs for `--duration` seconds
(or until no request has arrived for `--stall` seconds: the web is exhausted). The judge
is the web's own request log, through the referee of the end-to-end tests: pages over
time, per process, duplicate fetches, two requests in flight to one host (overlaps) and
gaps under the delay. Rates, CPU and the machine's load are taken over the second half of
each run, after the warm-up; CPU seconds are each process's own (psutil), the machine's
utilisation is all of its CPUs, whoever uses them. Wire frames and bytes are what ubipy's
peers sent each other over the whole run (their STATUS figures), and for scrapy-redis the
traffic to and from Redis (its INFO stats). Results go to `--out`: scaling.json,
scaling.md and scaling.png (matplotlib, the `bench` extra; skipped without it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from bench.scaling_report import (
    CRAWLERS,
    RunResult,
    base_of,
    chart,
    efficiency,
    fmt,
    markdown,
    ratios,
    table,
    targets,
    to_json,
    wire_lines,
)
from bench.scaling_run import RunFailed, run_one, scrapy_delay, scrapy_redis_missing

HERE = Path(__file__).resolve().parent

# -- main ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.scaling",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--peers", default="1,2,4,8", help="the Ns, comma-separated (default: 1,2,4,8)")
    p.add_argument(
        "--only", default=",".join(CRAWLERS), help=f"crawlers, from {', '.join(CRAWLERS)}"
    )
    p.add_argument("--duration", type=float, default=60.0, help="seconds per run (default: 60)")
    p.add_argument(
        "--concurrency", type=int, default=2, help="requests in flight per process (default: 2)"
    )
    p.add_argument(
        "--latency", type=float, default=0.05, help="mean seconds per response (default: 0.05)"
    )
    p.add_argument(
        "--jitter", type=float, default=0.2, help="latency ± this fraction (default: 0.2)"
    )
    p.add_argument(
        "--delay", type=float, default=0.2, help="politeness delay per host, s (default: 0.2)"
    )
    p.add_argument("--hosts", type=int, default=500, help="hosts in the web (default: 500)")
    p.add_argument("--pages", type=int, default=200, help="pages per host (default: 200)")
    p.add_argument("--web-seed", type=int, default=1, help="the web's seed (default: 1)")
    p.add_argument(
        "--stall", type=float, default=8.0, help="no request for this long: exhausted (8)"
    )
    p.add_argument(
        "--scrapy-queue",
        choices=("fifo", "priority", "lifo"),
        default="fifo",
        help="scrapy-redis's shared queue (default: fifo, breadth-first; its own default, "
        "priority, hands out equal-priority requests by URL, one host in a row)",
    )
    p.add_argument(
        "--peer-args",
        default="",
        help="more options for every `ubipy peer`, e.g. '--batch-linger 1.0' (default: none)",
    )
    p.add_argument(
        "--stop-patience", type=float, default=3.0, help="seconds before a second SIGTERM (3)"
    )
    p.add_argument("--out", type=Path, default=HERE / "results", help="where results go")
    p.add_argument("--keep", type=Path, default=None, help="keep logs and shards here")
    p.add_argument(
        "--render",
        type=Path,
        default=None,
        metavar="JSON",
        help="run nothing: write scaling.md and scaling.png to --out from this scaling.json",
    )
    args = p.parse_args(argv)
    args.ns = [int(x) for x in args.peers.split(",") if x.strip()]
    args.crawlers = [c.strip() for c in args.only.split(",") if c.strip()]
    bad = [c for c in args.crawlers if c not in CRAWLERS]
    if bad or not args.ns or min(args.ns) < 1:
        p.error(f"--only from {', '.join(CRAWLERS)}; --peers positive integers")
    if args.hosts < 400:
        print(f"note: {args.hosts} hosts: politeness may become the limit", file=sys.stderr)
    args.latency_min = args.latency * (1 - args.jitter)
    args.latency_span = 2 * args.latency * args.jitter
    return args


def settings_of(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "ns": args.ns,
        "crawlers": args.crawlers,
        "duration": args.duration,
        "concurrency": args.concurrency,
        "latency": args.latency,
        "jitter": args.jitter,
        "delay": args.delay,
        "hosts": args.hosts,
        "pages_per_host": args.pages,
        "web_seed": args.web_seed,
        "scrapy_queue": args.scrapy_queue,
        "scrapy_download_delay": scrapy_delay(args),
        "peer_args": args.peer_args,
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "versions": versions(),
    }


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for name in ("ubipy", "scrapy", "scrapy-redis", "redis", "trio", "httpx2"):
        with contextlib.suppress(PackageNotFoundError):
            out[name] = version(name)
    if shutil.which("redis-server"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            banner = subprocess.run(
                ["redis-server", "--version"], capture_output=True, text=True, timeout=10
            ).stdout
            out["redis-server"] = banner.split("v=", 1)[-1].split()[0]
    return out


def header(args: argparse.Namespace) -> list[str]:
    link = args.concurrency / args.latency
    polite = args.hosts / (args.delay + args.latency)
    top = max(args.ns)
    return [
        f"Synthetic web: {args.hosts} hosts x {args.pages} pages, every response delayed "
        f"{1000 * args.latency:.0f} ms ± {100 * args.jitter:.0f}%; politeness delay "
        f"{args.delay} s per host; {args.concurrency} requests in flight per process; "
        f"{args.duration:.0f} s per run; {os.cpu_count()} CPUs.",
        f"Each process is bound by its own emulated link: {args.concurrency} in flight / "
        f"{1000 * args.latency:.0f} ms = at most ~{link:.0f} pages/s, so at most "
        f"~{top * link:.0f} pages/s at N={top}; politeness allows {args.hosts} hosts / "
        f"{args.delay + args.latency:.2f} s = ~{polite:.0f} pages/s in all, not the limit.",
    ]


def reproduce(args: argparse.Namespace) -> str:
    cmd = ["python", "-m", "bench.scaling"]
    defaults = parse_args([])
    for name in (
        "peers", "only", "duration", "concurrency", "latency", "jitter", "delay", "hosts",
        "pages", "web_seed", "scrapy_queue", "peer_args",
    ):  # fmt: skip
        if getattr(args, name) != getattr(defaults, name):
            cmd.append(f"--{name.replace('_', '-')}={getattr(args, name)}")
    return shlex.join(cmd)


def write_outputs(
    results: Sequence[RunResult], args: argparse.Namespace, lines: Sequence[str]
) -> None:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(
        json.dumps(to_json(results, settings_of(args)), indent=1) + "\n"
    )
    (out / "scaling.md").write_text(markdown(results, lines) + "\n")
    title = (
        f"{args.hosts} hosts, {1000 * args.latency:.0f} ms ± {100 * args.jitter:.0f}% per "
        f"response, {args.concurrency} in flight per process, delay {args.delay} s; "
        f"ubipy solid, scrapy-redis dashed"
    )
    ceiling = args.concurrency / args.latency
    if results and not chart(results, out / "scaling.png", title, ceiling):
        print("no chart: matplotlib is not installed (pip install -e '.[bench]')")


def load(path: Path) -> tuple[list[RunResult], argparse.Namespace]:
    """The runs and settings of a scaling.json written by this harness."""
    data = json.loads(path.read_text())
    names = {f.name for f in fields(RunResult)}
    results = [RunResult(**{k: v for k, v in row.items() if k in names}) for row in data["runs"]]
    s = data["settings"]
    argv = [
        "--peers", ",".join(map(str, s["ns"])), "--only", ",".join(s["crawlers"]),
        "--duration", str(s["duration"]), "--concurrency", str(s["concurrency"]),
        "--latency", str(s["latency"]), "--jitter", str(s["jitter"]),
        "--delay", str(s["delay"]), "--hosts", str(s["hosts"]),
        "--pages", str(s["pages_per_host"]), "--web-seed", str(s["web_seed"]),
        "--scrapy-queue", s.get("scrapy_queue", "fifo"), f"--peer-args={s.get('peer_args', '')}",
    ]  # fmt: skip
    return results, parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.render is not None:
        loaded, settings = load(args.render)
        settings.out, settings.render = args.out, args.render
        write_outputs(loaded, settings, header(settings))
        print(table(loaded))
        return
    crawlers = list(args.crawlers)
    if "scrapy-redis" in crawlers and (why := scrapy_redis_missing()):
        print(f"skipping the scrapy-redis rows: {why}", flush=True)
        crawlers.remove("scrapy-redis")
    lines = header(args)
    for line in lines:
        print(line, flush=True)
    runs = len(crawlers) * len(args.ns)
    # Start-up, stopping and the referee take some 10-25 s a run, more at large N.
    estimate = sum(args.duration + 10 + 2 * n for n in args.ns) * len(crawlers)
    print(f"{runs} runs; expect about {estimate / 60:.1f} minutes", flush=True)
    base = Path(tempfile.mkdtemp(prefix="ubipy-scaling-")) if args.keep is None else args.keep
    base.mkdir(parents=True, exist_ok=True)
    results: list[RunResult] = []
    started = time.monotonic()
    try:
        for n in args.ns:
            for crawler in crawlers:
                t = time.monotonic()
                print(f"-- {crawler}, N={n} ...", flush=True)
                try:
                    r = run_one(crawler, n, args, base)
                except RunFailed as exc:
                    print(f"   FAILED: {exc}", flush=True)
                    continue
                results.append(r)
                eff = efficiency(r, base_of(results, crawler))
                print(
                    f"   {r.pages:,} pages in {r.window:.1f} s = {r.rate:.0f} pages/s "
                    f"(per process {r.peer_rates()[0]:.0f}–{r.peer_rates()[-1]:.0f}, "
                    f"{r.in_flight:.2f} requests in flight of {args.concurrency}), "
                    f"efficiency {fmt(eff)}, CPU {r.cpu_ms_per_page:.2f} ms/page "
                    f"({r.wakeups_per_page:.2f} wake-ups a page), "
                    f"machine {100 * r.machine_busy:.0f}% busy "
                    f"(this run {100 * r.own_busy:.0f}%)"
                    + (" SATURATED: CPU-bound, not link-bound" if r.saturated else "")
                    + f", {r.duplicates} duplicates, {r.overlaps} overlaps, "
                    f"{r.short_gaps} short gaps; run took {time.monotonic() - t:.0f} s",
                    flush=True,
                )
                for note in r.notes:
                    print(f"   note: {note}", flush=True)
                write_outputs(results, args, lines)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"logs and shards kept in {base}")
    print()
    print(table(results))
    print()
    for line in ratios(results) + wire_lines(results) + targets(results):
        print(line)
    print()
    print(f"whole harness: {time.monotonic() - started:.0f} s; results in {args.out}")
    print(f"reproduce: {reproduce(args)}")


if __name__ == "__main__":
    main()
