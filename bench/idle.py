"""What an idle peer costs: CPU a second of peers that have nothing to crawl.

    python -m bench.idle                      # one peer alone, then a cluster of 3
    python -m bench.idle --seconds 60 --cluster 5

Real `ubipy peer` processes on loopback, each with a data directory of its own in a
temporary directory (removed at the end). After ``--warmup`` seconds (start-up, joining),
each peer's CPU time is read from /proc/PID/schedstat (nanoseconds on the CPU) at the
start and the end of ``--seconds``; reported per peer, in milliseconds of CPU a second of
wall time, with its wake-ups a second (voluntary context switches, counted as the
scaling harness counts them: psutil, of the `bench` extra):
on some machines each costs hundreds of microseconds of CPU whatever the peer does
awake (bench/wakeups.py). Issue #19's target: an idle peer alone under 2 ms a second. In
a cluster a peer also probes, answers probes and gossips (SWIM), so it costs more; the
figure says how much.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.scaling_run import wakeups_of

_LISTENING = re.compile(r"listening on (\S+)")


def _cpu_ns(pid: int) -> int:
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0])


def _start(data: Path, join: str | None) -> tuple[subprocess.Popen[str], str]:
    cmd = [sys.executable, "-m", "ubipy.cli", "peer", "--data", str(data)]
    cmd += ["--listen", "127.0.0.1:0"]
    if join is not None:
        cmd += ["--join", join]
    env = {**os.environ, "UBIPY_SECRET": "idle-bench-secret"}
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if m := _LISTENING.search(line):
            # Keep draining stderr so the peer never blocks on a full pipe.
            subprocess.Popen(["cat"], stdin=proc.stderr, stdout=subprocess.DEVNULL)
            return proc, m.group(1)
    proc.kill()
    raise SystemExit(f"the peer in {data} did not start")


def measure(n: int, warmup: float, seconds: float) -> list[tuple[float, float]]:
    """Milliseconds of CPU a second and wake-ups a second, for each of ``n`` idle peers
    started together."""
    with tempfile.TemporaryDirectory(prefix="ubipy-idle-") as tmp:
        procs: list[subprocess.Popen[str]] = []
        try:
            first, address = _start(Path(tmp) / "p0", None)
            procs.append(first)
            for i in range(1, n):
                procs.append(_start(Path(tmp) / f"p{i}", address)[0])
            time.sleep(warmup)
            before = [(_cpu_ns(p.pid), wakeups_of([p.pid])) for p in procs]
            start = time.monotonic()
            time.sleep(seconds)
            after = [(_cpu_ns(p.pid), wakeups_of([p.pid])) for p in procs]
            wall = time.monotonic() - start
        finally:
            for p in procs:
                p.send_signal(signal.SIGINT)
            for p in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
    return [
        ((cpu1 - cpu0) / 1e6 / wall, (woke1 - woke0) / wall)
        for (cpu0, woke0), (cpu1, woke1) in zip(before, after, strict=True)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--warmup", type=float, default=5.0)
    parser.add_argument("--cluster", type=int, default=3, help="peers in the cluster run")
    args = parser.parse_args()
    ((cpu, woke),) = measure(1, args.warmup, args.seconds)
    print(f"one peer alone: {cpu:.2f} ms of CPU a second, {woke:.1f} wake-ups", flush=True)
    if args.cluster > 1:
        each = measure(args.cluster, args.warmup, args.seconds)
        figures = ", ".join(f"{cpu:.2f} ({woke:.1f})" for cpu, woke in each)
        print(
            f"each of {args.cluster} peers in a cluster: {figures} ms of CPU a second "
            "(wake-ups a second)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
