"""What a page costs at each stage, at 2 requests in flight and at 64, in one peer.

    python -m bench.stage_costs                        # 2 and 64 in flight, ~2 minutes
    python -m bench.stage_costs --concurrency 2,8,64 --window 30

Issue #19 asks that CPU per page at 2 in flight be at most 1.3 times the figure at 64.
This says where the difference is. For each concurrency, a fresh synthetic web with the
scaling harness's link and size (every response delayed 50 ms ± 20%, 500 hosts of 200
pages, 0.2 s between requests to a host: the concurrency is the limit, not politeness) and
one `ubipy peer` process whose stages are timed from inside (the peer's own thread CPU
time, taken around each call): a page's handling once its answer is in
(``Crawler._page_answered``: the scheduler told, the page parsed and its links made
candidates), the parse alone (``read_page``, within it), and the commits
(``Crawler._flush``: the transaction that writes the pages, marks them done and admits
their links). The rest of the peer's CPU is the request and its answer's reading (the
fetcher, the transport, trio's loop), robots.txt and the timers. The window starts after
``--warmup`` seconds, once the peer crawls steadily and has asked every host for its
robots.txt (the table says how many it asked in the window, a share of the pages: those
are in "rest").

The same code runs at both concurrencies, so a stage that costs more per page at 2 in
flight costs more because of when it runs: at 2 in flight the peer sleeps between most
answers, and on some machines (virtual ones above all) whatever runs right after a sleep
runs slower (`bench/wakeups.py` measures by how much).
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.scaling_run import (
    _BANNER,
    ROOT,
    SECRET,
    Child,
    RunFailed,
    Web,
    _ask,
    _env,
    _wait_for,
    stop_all,
)
from bench.speed import thread_cpu_timed

# Stages timed in the peer: (module, attribute path) -> name in the report.
_STAGES = {
    ("ubipy.peer.crawler", "Crawler._page_answered"): "answered",
    ("ubipy.peer.pageanswers", "read_page"): "parse",
    ("ubipy.peer.crawler", "Crawler._flush"): "commit",
    ("ubipy.peer.pageanswers", "robots_answered"): "robots",
}


def child(report: Path, peer_args: list[str]) -> int:
    """Run `ubipy peer` with its stages timed; each SIGUSR1 writes the totals so far."""
    import importlib

    totals: dict[str, list[float]] = {name: [0, 0.0] for name in _STAGES.values()}

    for (module_name, path), name in _STAGES.items():
        owner: Any = importlib.import_module(module_name)
        *parents, attr = path.split(".")
        for parent in parents:
            owner = getattr(owner, parent)
        setattr(owner, attr, thread_cpu_timed(getattr(owner, attr), totals[name]))

    def write(_sig: int, _frame: object) -> None:
        snapshot = {"cpu": time.process_time(), "stages": totals}
        tmp = report.with_suffix(".tmp")
        tmp.write_text(json.dumps(snapshot))
        tmp.replace(report)

    signal.signal(signal.SIGUSR1, write)
    from ubipy.cli import main

    return main(["peer", *peer_args])


def _snapshot(proc: subprocess.Popen[Any], report: Path, timeout: float = 10.0) -> dict[str, Any]:
    report.unlink(missing_ok=True)
    proc.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while not report.exists():
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RunFailed("the peer wrote no figures")
        time.sleep(0.05)
    figures: dict[str, Any] = json.loads(report.read_text())
    return figures


def measure(concurrency: int, args: argparse.Namespace, work: Path) -> dict[str, float]:
    """One peer at ``concurrency`` on a fresh web: per page, its CPU and each stage's."""
    web = Web(args, work)
    report = work / "figures.json"
    err = work / "peer.err"
    cmd = [
        sys.executable, "-m", "bench.stage_costs", "--child", str(report), "--",
        "--data", str(work / "data"), "--listen", "127.0.0.1:0", "--proxy", web.proxy,
        "--secret", SECRET, "--delay", str(args.delay), "--concurrency", str(concurrency),
        *args.peer_argv,
    ]  # fmt: skip
    with open(err, "w") as out:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=out, cwd=ROOT, env=_env())
    peer = Child("peer", proc, err)
    try:
        _wait_for("the peer's banner", lambda: bool(_BANNER.search(err.read_text())), 30, [peer])
        match = _BANNER.search(err.read_text())
        assert match is not None
        answer = _ask(match.group(2), "SEED", {"urls": [web.seed]})
        if "error" in answer:
            raise RunFailed(f"the seed was refused: {answer['error']}")
        time.sleep(args.warmup)
        first = _snapshot(proc, report)
        time.sleep(args.window)
        last = _snapshot(proc, report)
    finally:
        stop_all([proc], signal.SIGINT, 30.0)
        web.stop()
    pages = int(last["stages"]["answered"][0] - first["stages"]["answered"][0])
    robots = int(last["stages"]["robots"][0] - first["stages"]["robots"][0])
    if pages <= 0:
        raise RunFailed(
            f"no page was answered in the window ({robots} robots.txt): try a longer --warmup"
        )

    def per_page(stage: str) -> float:
        return float(last["stages"][stage][1] - first["stages"][stage][1]) / pages

    cpu = float(last["cpu"] - first["cpu"]) / pages
    answered, commit = per_page("answered"), per_page("commit")
    commits = last["stages"]["commit"][0] - first["stages"]["commit"][0]
    return {
        "pages": pages,
        "robots": robots / pages,
        "per_commit": pages / commits if commits else float("inf"),
        "cpu": cpu,
        "answered": answered,
        "parse": per_page("parse"),
        "commit": commit,
        "rest": cpu - answered - commit,
    }


def table(rows: dict[int, dict[str, float]]) -> str:
    lines = [
        "| in flight | pages | robots.txt a page | pages a commit | CPU ms/page "
        "| answered (parse) ms | commit ms | rest ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for concurrency, r in rows.items():
        lines.append(
            f"| {concurrency} | {r['pages']:,.0f} | {r['robots']:.2f} | {r['per_commit']:.1f} | "
            f"{r['cpu'] * 1e3:.2f} | "
            f"{r['answered'] * 1e3:.2f} ({r['parse'] * 1e3:.2f}) | {r['commit'] * 1e3:.2f} | "
            f"{r['rest'] * 1e3:.2f} |"
        )
    if len(rows) > 1:
        low, high = rows[min(rows)], rows[max(rows)]
        ratios = ", ".join(
            f"{stage} {low[stage] / high[stage]:.2f}"
            for stage in ("cpu", "answered", "parse", "commit", "rest")
            if high[stage] > 0
        )
        lines.append("")
        lines.append(f"{min(rows)} in flight over {max(rows)}, per page: {ratios}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--concurrency", default="2,64", help="requests in flight, comma-separated")
    p.add_argument("--warmup", type=float, default=30.0, help="seconds before the window")
    p.add_argument("--window", type=float, default=20.0, help="seconds measured")
    p.add_argument("--hosts", type=int, default=500)
    # The scaling harness's web. With 40 pages a host, crawled from one seed, 64 in
    # flight ran at 82 pages a second (not enough reachable at once), so its cost a
    # page was that of a crawl that sleeps too.
    p.add_argument("--pages", type=int, default=200)
    p.add_argument("--latency", type=float, default=0.05, help="seconds per response")
    p.add_argument("--jitter", type=float, default=0.2, help="latency's spread, a share")
    p.add_argument("--delay", type=float, default=0.2, help="politeness delay per host")
    p.add_argument("--web-seed", type=int, default=1)
    p.add_argument(
        "--peer-args", default="", help="more options for the peer, e.g. '--config crawl.toml'"
    )
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args, rest = p.parse_known_args(argv)
    if args.child is not None:
        return child(args.child, [a for a in rest if a != "--"])
    if rest:
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    try:
        args.peer_argv = shlex.split(args.peer_args)
    except ValueError as exc:
        p.error(f"--peer-args: {exc}")
    args.latency_min = args.latency * (1 - args.jitter)
    args.latency_span = 2 * args.latency * args.jitter
    rows: dict[int, dict[str, float]] = {}
    for concurrency in sorted({int(c) for c in args.concurrency.split(",")}):
        with tempfile.TemporaryDirectory(prefix="ubipy-stages-") as tmp:
            print(f"-- {concurrency} in flight ...", file=sys.stderr, flush=True)
            try:
                rows[concurrency] = measure(concurrency, args, Path(tmp))
            except RunFailed as exc:
                print(f"{concurrency} in flight: {exc}", file=sys.stderr)
                return 1
    print(table(rows))
    print(f"\nreproduce: python -m bench.stage_costs {' '.join(argv or sys.argv[1:])}".rstrip())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
