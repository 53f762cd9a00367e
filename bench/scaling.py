"""Scaling: 1, 2, 4 and 8 ubipy peers (and scrapy-redis processes) on a web with latency.

    python -m bench.scaling                          # N = 1,2,4,8, both crawlers
    python -m bench.scaling --peers 1,2 --duration 10 --only ubipy   # a quick look

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
import math
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CRAWLERS = ("ubipy", "scrapy-redis")
SECRET = "scaling-bench"
_BANNER = re.compile(r"ubipy peer (\w+) listening on (\S+)")
# Scrapy's delay counts from when a request leaves its slot's queue, a little before it
# reaches the web; this much more keeps the gap the web sees at or above the delay.
SCRAPY_DELAY_MARGIN = 0.01
# A run whose machine was busier than this was bound by the CPU, not by its links.
SATURATED = 0.9


class RunFailed(RuntimeError):
    """One run failed; the others still run."""


# -- what a run measured -------------------------------------------------------------


@dataclass
class RunResult:
    """One crawler at one N. Rates, CPU and the machine's load are measured over the
    second half of the run (the first half includes the warm-up: the web's home page links
    to every host, so each host's robots.txt comes first); pages over time and the wire
    figures cover the whole run."""

    crawler: str
    n: int
    window: float  # seconds the run lasted, from the web's first request
    pages: int  # non-robots responses completed in the run (the web's log)
    timeline: list[int]  # cumulative pages at 0, 1, 2, ... s
    measured_from: float  # seconds into the run where the measured half starts
    measured: float  # its length in seconds
    measured_pages: int  # pages completed in it
    per_peer: dict[str, int]  # the same, by process
    cpu_crawler: float  # CPU s of the crawler's processes in it (Redis included)
    cpu_coordinator: float  # of which Redis's (0 for ubipy)
    cpu_server: float  # the synthetic web's
    cpus: int
    machine_busy: float  # all CPUs' busy share in it, whoever used them
    duplicates: int
    overlaps: int
    short_gaps: int
    robots_violations: int
    requests: int  # every request in the log, robots.txt and after the run included
    wire_frames: int  # frames between peers (ubipy) or Redis commands (scrapy-redis)
    wire_bytes: int  # their bytes (scrapy-redis: Redis's input + output)
    wire_pages: int  # pages the wire figures are divided by (the crawler's own count)
    url_frames: int = 0  # ubipy: URL_BATCH + URL_ACK frames
    url_bytes: int = 0
    forwarded_urls: int = 0  # ubipy: URLs sent to their owner
    measured_requests: int = 0  # every request completed in the measured half (robots.txt too)
    on_wire: float = 0.0  # seconds of requests in flight at the web in it, added up
    exhausted: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        """Pages/s in the measured half."""
        return self.measured_pages / max(self.measured, 1e-9)

    @property
    def in_flight(self) -> float:
        """Mean requests in flight at the web per process in the measured half: how much of
        its concurrency a process keeps on the wire (at most --concurrency)."""
        return self.on_wire / max(self.measured * self.n, 1e-9)

    @property
    def whole_rate(self) -> float:
        return self.pages / max(self.window, 1e-9)

    def peer_rates(self) -> list[float]:
        rates = [p / max(self.measured, 1e-9) for p in self.per_peer.values()]
        return sorted(rates + [0.0] * (self.n - len(rates)))

    @property
    def max_mean(self) -> float:
        counts = list(self.per_peer.values()) + [0] * (self.n - len(self.per_peer))
        mean = statistics.mean(counts) if counts else 0.0
        return max(counts) / mean if mean else 0.0

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.cpu_crawler / max(self.measured_pages, 1)

    @property
    def own_busy(self) -> float:
        """This run's processes (crawler and web) as a share of all the machine's CPUs."""
        return (self.cpu_crawler + self.cpu_server) / max(self.measured * self.cpus, 1e-9)

    @property
    def saturated(self) -> bool:
        return self.machine_busy >= SATURATED

    @property
    def wire_frames_per_page(self) -> float:
        return self.wire_frames / max(self.wire_pages, 1)

    @property
    def wire_bytes_per_page(self) -> float:
        return self.wire_bytes / max(self.wire_pages, 1)


def efficiency(result: RunResult, base: RunResult | None) -> float | None:
    """rate(N) / (N × rate(1)); None without a run at N=1 for the same crawler."""
    if base is None or base.rate <= 0:
        return None
    return result.rate / (result.n * base.rate)


def base_of(results: Sequence[RunResult], crawler: str) -> RunResult | None:
    return next((r for r in results if r.crawler == crawler and r.n == 1), None)


def cumulative(times: Iterable[float], seconds: int) -> list[int]:
    """Cumulative counts at 0, 1, ..., `seconds` of events at `times` (seconds from 0)."""
    per_second = [0] * (seconds + 1)
    for t in times:
        if 0 <= t <= seconds:
            per_second[min(seconds, math.ceil(t))] += 1
    out, total = [], 0
    for count in per_second:
        total += count
        out.append(total)
    return out


# -- the report ----------------------------------------------------------------------


def _fmt(value: float | None, spec: str = ".2f") -> str:
    return "–" if value is None else format(value, spec)


def table(results: Sequence[RunResult]) -> str:
    lines = [
        "| crawler | N | pages in the run | pages/s | per process pages/s (min–max) "
        "| max/mean | efficiency | in flight per process | CPU ms/page | machine CPU busy "
        "| duplicates | overlaps | short gaps | wire frames/page | wire B/page |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(results, key=lambda r: (CRAWLERS.index(r.crawler), r.n)):
        rates = r.peer_rates()
        eff = efficiency(r, base_of(results, r.crawler))
        busy = f"{100 * r.machine_busy:.0f}%" + (" (saturated)" if r.saturated else "")
        lines.append(
            f"| {r.crawler} | {r.n} | {r.pages:,} | {r.rate:,.0f} "
            f"| {rates[0]:.0f}–{rates[-1]:.0f} | {r.max_mean:.2f} | {_fmt(eff)} "
            f"| {r.in_flight:.2f} | {r.cpu_ms_per_page:.2f} | {busy} | {r.duplicates} "
            f"| {r.overlaps} | {r.short_gaps} | {r.wire_frames_per_page:.3f} "
            f"| {r.wire_bytes_per_page:.0f} |"
        )
    return "\n".join(lines)


def ratios(results: Sequence[RunResult]) -> list[str]:
    """ubipy against scrapy-redis at each N: pages/s and CPU per page."""
    out = []
    for ours in sorted((r for r in results if r.crawler == "ubipy"), key=lambda r: r.n):
        theirs = next((r for r in results if r.crawler == "scrapy-redis" and r.n == ours.n), None)
        if theirs is None:
            continue
        speed = ours.rate / max(theirs.rate, 1e-9)
        cpu = theirs.cpu_ms_per_page / max(ours.cpu_ms_per_page, 1e-9)
        out.append(
            f"N={ours.n}: ubipy pages/s / scrapy-redis pages/s = {speed:.2f}; "
            f"scrapy-redis CPU per page / ubipy's = {cpu:.2f}"
        )
    return out


def targets(results: Sequence[RunResult]) -> list[str]:
    """The issue's targets, each with MET or NOT MET and its figures."""

    def verdict(ok: bool) -> str:
        return "MET" if ok else "NOT MET"

    out: list[str] = []
    ubipy = sorted((r for r in results if r.crawler == "ubipy"), key=lambda r: r.n)
    if not ubipy:
        return out
    top = ubipy[-1]
    eff = efficiency(top, base_of(results, "ubipy"))
    if eff is not None and top.n > 1:
        cpu = "saturated" if top.saturated else "not saturated"
        out.append(
            f"{verdict(eff >= 0.9 and not top.saturated)}: ubipy's efficiency at N={top.n} "
            f"is {eff:.2f} (target >= 0.9), machine CPU {100 * top.machine_busy:.0f}% busy "
            f"({cpu})"
        )
    clean = all(r.duplicates == 0 and r.overlaps == 0 and r.short_gaps == 0 for r in ubipy)
    out.append(
        f"{verdict(clean)}: ubipy 0 duplicates and 0 politeness violations at every N ("
        + ", ".join(f"N={r.n}: {r.duplicates}/{r.overlaps}/{r.short_gaps}" for r in ubipy)
        + " duplicates/overlaps/short gaps)"
    )
    pairs = [(r, t) for r in ubipy for t in results if t.crawler == "scrapy-redis" and t.n == r.n]
    if pairs:
        faster = all(r.rate >= t.rate for r, t in pairs)
        cheaper = all(r.cpu_ms_per_page < t.cpu_ms_per_page for r, t in pairs)
        out.append(
            f"{verdict(faster)}: ubipy pages/s >= scrapy-redis's at every N ("
            + ", ".join(f"N={r.n}: {r.rate:.0f} vs {t.rate:.0f}" for r, t in pairs)
            + ")"
        )
        out.append(
            f"{verdict(cheaper)}: ubipy fewer CPU s per page at every N ("
            + ", ".join(
                f"N={r.n}: {r.cpu_ms_per_page:.2f} vs {t.cpu_ms_per_page:.2f} ms" for r, t in pairs
            )
            + ")"
        )
    multi = [r for r in ubipy if r.n > 1]
    if len(multi) >= 2:
        per_page = [r.wire_bytes_per_page for r in multi]
        flat = max(per_page) <= 1.25 * min(per_page)
        out.append(
            f"{verdict(flat)}: wire bytes per page flat as N grows ("
            + ", ".join(f"N={r.n}: {r.wire_bytes_per_page:.0f} B" for r in multi)
            + "; flat = max within 1.25x of min)"
        )
    return out


def wire_lines(results: Sequence[RunResult]) -> list[str]:
    """What ubipy's peers sent each other, per page and per forwarded URL."""
    out = []
    for r in sorted((r for r in results if r.crawler == "ubipy" and r.n > 1), key=lambda r: r.n):
        urls = max(r.forwarded_urls, 1)
        out.append(
            f"ubipy N={r.n}: {r.forwarded_urls / max(r.wire_pages, 1):.2f} URLs forwarded per "
            f"page, {r.url_frames / urls:.2f} URL_BATCH+URL_ACK frames and "
            f"{r.url_bytes / urls:.0f} bytes per forwarded URL; all frames "
            f"{r.wire_frames_per_page:.2f} and {r.wire_bytes_per_page:.0f} B per page"
        )
    return out


def markdown(results: Sequence[RunResult], header: Sequence[str]) -> str:
    parts = [*header, "", table(results), ""]
    if rs := ratios(results):
        parts += ["Ratios:", "", *[f"- {line}" for line in rs], ""]
    if ws := wire_lines(results):
        parts += ["Wire:", "", *[f"- {line}" for line in ws], ""]
    if ts := targets(results):
        parts += ["Targets:", "", *[f"- {line}" for line in ts], ""]
    notes = [f"- {r.crawler} N={r.n}: {note}" for r in results for note in r.notes]
    if notes:
        parts += ["Notes:", "", *notes, ""]
    return "\n".join(parts)


def to_json(results: Sequence[RunResult], settings: dict[str, Any]) -> dict[str, Any]:
    runs = []
    for r in results:
        row = asdict(r)
        row.update(
            rate=r.rate,
            peer_rates=r.peer_rates(),
            max_mean=r.max_mean,
            efficiency=efficiency(r, base_of(results, r.crawler)),
            cpu_ms_per_page=r.cpu_ms_per_page,
            own_busy=r.own_busy,
            saturated=r.saturated,
            in_flight=r.in_flight,
            wire_frames_per_page=r.wire_frames_per_page,
            wire_bytes_per_page=r.wire_bytes_per_page,
        )
        runs.append(row)
    return {
        "settings": settings,
        "runs": runs,
        "ratios": ratios(results),
        "targets": targets(results),
    }


def chart(
    results: Sequence[RunResult], path: Path, title: str, ceiling: float | None = None
) -> bool:
    """Cumulative pages over time for each N (ubipy solid, scrapy-redis dashed), and each
    process's pages/s at each N against the link's `ceiling` (concurrency / latency).
    False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ns = sorted({r.n for r in results})
    colours = {n: f"C{i}" for i, n in enumerate(ns)}
    styles = {"ubipy": "-", "scrapy-redis": "--"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2), width_ratios=(3, 2))
    for r in sorted(results, key=lambda r: (r.n, CRAWLERS.index(r.crawler))):
        left.plot(
            range(len(r.timeline)),
            r.timeline,
            styles[r.crawler],
            color=colours[r.n],
            label=f"{r.crawler}, N={r.n}",
        )
    left.set_xlabel("seconds since the first request")
    left.set_ylabel("pages fetched (cumulative)")
    left.set_title("pages over time")
    left.grid(alpha=0.3)
    left.legend(fontsize=8, ncol=2)
    offsets = {"ubipy": -0.12, "scrapy-redis": 0.12}
    markers = {"ubipy": "o", "scrapy-redis": "x"}
    for crawler in CRAWLERS:
        xs: list[float] = []
        ys: list[float] = []
        for r in results:
            if r.crawler == crawler:
                rates = r.peer_rates()
                xs += [ns.index(r.n) + offsets[crawler]] * len(rates)
                ys += rates
        if xs:
            right.scatter(xs, ys, marker=markers[crawler], label=crawler, alpha=0.8)
    if ceiling is not None:
        right.axhline(ceiling, color="grey", linestyle=":", label="link ceiling")
    right.set_xticks(range(len(ns)), [str(n) for n in ns])
    right.set_xlabel("N (processes)")
    right.set_ylabel("pages/s of each process")
    right.set_ylim(bottom=0)
    right.set_title("per-process rates")
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# -- processes -----------------------------------------------------------------------


def _env() -> dict[str, str]:
    env = dict(os.environ)
    for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        env.pop(var, None)
    env.pop("UBIPY_SECRET", None)
    return env


def _stop(procs: Sequence[subprocess.Popen[Any]], sig: int, patience: float) -> None:
    """Signal each live process, then wait up to `patience` s in all for them."""
    for p in procs:
        if p.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(sig)
    deadline = time.monotonic() + patience
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.0, deadline - time.monotonic()))


def stop_all(procs: Sequence[subprocess.Popen[Any]], first: int, patience: float) -> float:
    """`first` signal, then a second one (abandon what is in flight), then SIGKILL.
    Returns the seconds it took."""
    start = time.monotonic()
    for sig, wait in ((first, patience), (first, 3.0), (signal.SIGKILL, 5.0)):
        if all(p.poll() is not None for p in procs):
            break
        _stop(procs, sig, wait)
    return time.monotonic() - start


class Web:
    """The synthetic web's process; a thread follows its `progress` lines."""

    def __init__(self, args: argparse.Namespace, work: Path, *, progress: float = 0.1) -> None:
        self.log_path = work / "requests.jsonl"
        cmd = [
            sys.executable, "-m", "ubipy.synthweb",
            "--hosts", str(args.hosts), "--pages", str(args.pages),
            "--seed", str(args.web_seed), "--bind", "127.0.0.1", "--port", "0",
            "--latency", str(args.latency_min), "--jitter", str(args.latency_span),
            "--crawl-delay", "0", "--log", str(self.log_path), "--progress", str(progress),
        ]  # fmt: skip
        self.err = open(work / "web.err", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=self.err, text=True, cwd=ROOT, env=_env()
        )
        assert self.proc.stdout is not None
        self.proxy = self.seed = ""
        while not (self.proxy and self.seed):
            line = self.proc.stdout.readline()
            if not line:
                self.proc.kill()
                self.proc.wait()
                raise RunFailed(f"the synthetic web did not start; see {work / 'web.err'}")
            key, _, value = line.strip().partition(" ")
            if key == "proxy":
                self.proxy = value
            elif key == "seed":
                self.seed = value
        self.requests = 0
        self.changed_at = time.time()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            key, _, value = line.strip().partition(" ")
            if key == "progress":
                count, wall = value.split()
                if int(count) != self.requests:
                    self.requests, self.changed_at = int(count), float(wall)

    def stop(self) -> None:
        """SIGINT: the web writes its log and exits."""
        stop_all([self.proc], signal.SIGINT, 120.0)
        self._thread.join(timeout=5)
        self.err.close()
        if not self.log_path.exists():
            raise RunFailed("the synthetic web wrote no log")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def redis_command(port: int, *parts: str) -> str:
    """One command to Redis over RESP; the reply as text (enough for PING, LPUSH, INFO)."""
    request = f"*{len(parts)}\r\n" + "".join(f"${len(p.encode())}\r\n{p}\r\n" for p in parts)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(request.encode())
        reply = s.makefile("rb")
        line = reply.readline()
        kind, rest = line[:1], line[1:].rstrip(b"\r\n")
        if kind == b"-":
            raise RunFailed(f"redis: {rest.decode()}")
        if kind == b"$":
            size = int(rest)
            return "" if size < 0 else reply.read(size + 2)[:-2].decode()
        return rest.decode()


def redis_stats(port: int) -> dict[str, int]:
    info = redis_command(port, "INFO", "stats")
    entries = dict(line.split(":", 1) for line in info.splitlines() if ":" in line)
    return {k: int(v) for k, v in entries.items() if v.strip().isdigit()}


class Redis:
    def __init__(self, work: Path) -> None:
        self.port = _free_port()
        cmd = [
            "redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
            "--save", "", "--appendonly", "no", "--dir", str(work), "--daemonize", "no",
        ]  # fmt: skip
        self.out = open(work / "redis.log", "w")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, stdout=self.out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while True:
            try:
                if redis_command(self.port, "PING") == "PONG":
                    return
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RunFailed(f"redis-server did not start; see {work / 'redis.log'}")
            time.sleep(0.05)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        stop_all([self.proc], signal.SIGTERM, 10.0)
        self.out.close()


@dataclass
class Child:
    name: str
    proc: subprocess.Popen[Any]
    output: Path
    address: str = ""


def _wait_for(
    what: str, check: Callable[[], bool], timeout: float, children: Sequence[Child]
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        for c in children:
            if c.proc.poll() is not None:
                tail = c.output.read_text(errors="replace")[-2000:]
                raise RunFailed(f"{c.name} exited with {c.proc.returncode}:\n{tail}")
        if time.monotonic() > deadline:
            raise RunFailed(f"timed out waiting for {what}")
        time.sleep(0.1)


# -- ubipy ---------------------------------------------------------------------------


def _ask(address: str, kind_name: str, payload: dict[str, Any]) -> dict[str, Any]:
    """One request to a peer and its answer, as plain JSON; RunFailed if it cannot be had."""
    import trio

    from ubipy.peer.links import request
    from ubipy.peer.wire import FrameType, secret_from

    async def go() -> dict[str, Any]:
        frame = await request(address, secret_from(SECRET), FrameType[kind_name], payload)
        answer: dict[str, Any] = json.loads(json.dumps(frame.payload))
        return answer

    try:
        return trio.run(go)
    except OSError as exc:  # PermissionError (a wrong secret) included
        raise RunFailed(f"peer {address} did not answer {kind_name}: {exc!r}") from exc


def start_ubipy(
    n: int, web: Web, args: argparse.Namespace, work: Path, children: list[Child]
) -> None:
    """Start N peers into `children` (the caller stops them, even if this fails)."""

    def start(i: int, join: str | None) -> Child:
        cmd = [
            sys.executable, "-m", "ubipy.cli", "peer", "--data", str(work / f"p{i}"),
            "--listen", "127.0.0.1:0", "--proxy", web.proxy, "--secret", SECRET,
            "--delay", str(args.delay), "--concurrency", str(args.concurrency),
            *(["--join", join] if join else []), *shlex.split(args.peer_args),
        ]  # fmt: skip
        out = work / f"p{i}.err"
        with open(out, "w") as err:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=err, cwd=ROOT, env=_env()
            )
        return Child(f"peer p{i}", proc, out)

    def banner(child: Child) -> bool:
        m = _BANNER.search(child.output.read_text(errors="replace"))
        if m:
            child.address = m.group(2)
        return m is not None

    first = start(0, None)
    children.append(first)
    _wait_for("the first peer's banner", lambda: banner(first), 30, children)
    children += [start(i, first.address) for i in range(1, n)]
    _wait_for("the peers' banners", lambda: all(banner(c) for c in children), 60, children)

    def converged() -> bool:
        for c in children:
            try:
                members = _ask(c.address, "STATUS_REQUEST", {})["members"]
            except RunFailed:
                return False
            if sum(m["state"] == "alive" for m in members) != n:
                return False
        return True

    _wait_for(f"{n} peers to see each other", converged, 60, children)


def ubipy_wire(children: Sequence[Child]) -> dict[str, int]:
    totals: Counter[str] = Counter()
    for c in children:
        for p in _ask(c.address, "STATUS_REQUEST", {})["peers"]:
            for key in (
                "frames_out", "bytes_out_wire", "url_frames", "url_bytes", "forwarded_urls", "pages"
            ):  # fmt: skip
                totals[key] += int(p[key])
    return dict(totals)


# -- scrapy-redis --------------------------------------------------------------------


def scrapy_redis_missing() -> str | None:
    """Why the scrapy-redis rows cannot run here, or None."""
    if shutil.which("redis-server") is None:
        return "redis-server is not on PATH (Debian: apt-get install redis-server)"
    try:
        import scrapy_redis  # noqa: F401
    except ImportError:
        return "scrapy-redis is not installed (pip install -e '.[bench]')"
    return None


def scrapy_delay(args: argparse.Namespace) -> float:
    """Scrapy's DOWNLOAD_DELAY runs from the start of the previous request, ubipy's delay
    from its end: add the longest latency, so the gap after a response is >= the delay."""
    return round(float(args.delay + args.latency_min + args.latency_span) + SCRAPY_DELAY_MARGIN, 3)


def start_scrapy_redis(
    n: int, web: Web, redis: Redis, args: argparse.Namespace, work: Path, children: list[Child]
) -> None:
    """Start N Scrapy processes into `children` (the caller stops them, even if this fails)."""
    delay = scrapy_delay(args)
    for i in range(n):
        cmd = [
            sys.executable, "-m", "bench.scrapy_redis_spider", "--redis-url", redis.url,
            "--proxy", web.proxy, "--concurrency", str(args.concurrency),
            "--delay", str(delay), "--name", f"s{i}",
            "--queue", args.scrapy_queue, "--feed", str(work / f"s{i}.jsonl"),
            "--result", str(work / f"s{i}.json"),
        ]  # fmt: skip
        out = work / f"s{i}.out"
        with open(out, "w") as f:
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env=_env())
        children.append(Child(f"scrapy s{i}", proc, out))

    def ready() -> bool:
        return all("ready" in c.output.read_text(errors="replace").split() for c in children)

    _wait_for(f"{n} Scrapy processes to open", ready, 120, children)


# -- one run -------------------------------------------------------------------------


def _cpu_of(pids: Iterable[int]) -> float:
    import psutil

    total = 0.0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            t = psutil.Process(pid).cpu_times()
            total += t.user + t.system + t.children_user + t.children_system
    return total


@dataclass
class Snapshot:
    wall: float
    cpu_crawler: float
    cpu_coordinator: float
    cpu_server: float
    machine_busy: float  # CPU seconds since boot, all CPUs
    machine_total: float


def snapshot(crawler: Iterable[int], coordinator: Iterable[int], server: int) -> Snapshot:
    import psutil

    t = psutil.cpu_times()
    total = float(sum(t))
    idle = t.idle + getattr(t, "iowait", 0.0)
    return Snapshot(
        wall=time.time(),
        cpu_crawler=_cpu_of(crawler),
        cpu_coordinator=_cpu_of(coordinator),
        cpu_server=_cpu_of([server]),
        machine_busy=total - idle,
        machine_total=total,
    )


def run_one(crawler: str, n: int, args: argparse.Namespace, base: Path) -> RunResult:
    work = base / f"{crawler}-{n}"
    work.mkdir(parents=True)
    web = Web(args, work)
    redis: Redis | None = None
    children: list[Child] = []
    notes: list[str] = []
    try:
        if crawler == "ubipy":
            start_ubipy(n, web, args, work, children)
        else:
            redis = Redis(work)
            start_scrapy_redis(n, web, redis, args, work, children)
        pids = [c.proc.pid for c in children]
        coordinator = [redis.proc.pid] if redis else []

        def wire() -> dict[str, int]:
            if redis is None:
                return ubipy_wire(children)
            s = redis_stats(redis.port)
            return {
                "frames_out": s.get("total_commands_processed", 0),
                "bytes_out_wire": s.get("total_net_input_bytes", 0)
                + s.get("total_net_output_bytes", 0),
            }

        wire0 = wire()
        if redis is None:
            answer = _ask(children[0].address, "SEED", {"urls": [web.seed]})
            if "error" in answer:
                raise RunFailed(f"the seed was refused: {answer['error']}")
        else:
            from bench.scrapy_redis_spider import START_KEY

            redis_command(redis.port, "LPUSH", START_KEY, json.dumps({"url": web.seed}))
        _wait_for("the first request", lambda: web.requests > 0, 60, children)
        first = snapshot(pids, coordinator, web.proc.pid)
        t0 = first.wall
        end = t0 + args.duration
        mid: Snapshot | None = None
        exhausted = False
        while time.time() < end:
            time.sleep(0.1)
            if mid is None and time.time() >= t0 + args.duration / 2:
                mid = snapshot(pids, coordinator, web.proc.pid)
            if time.time() - web.changed_at > args.stall:
                exhausted = True
                notes.append(f"no request for {args.stall:.0f} s: the web is exhausted")
                break
            for c in children:
                if c.proc.poll() is not None:
                    raise RunFailed(f"{c.name} exited with {c.proc.returncode} mid-run")
        last = snapshot(pids, coordinator, web.proc.pid)
        if exhausted:
            last.wall = web.changed_at
        wire1 = wire()
    finally:
        patience = args.stop_patience
        took = stop_all(
            [c.proc for c in children], signal.SIGTERM if redis is None else signal.SIGINT, patience
        )
        if redis is not None:
            redis.stop()
        web.stop()
    if took > patience:
        notes.append(f"stopping the {n} processes took {took:.0f} s (second signal sent)")
    for c in children:
        text = c.output.read_text(errors="replace")
        if "Traceback" in text:
            notes.append(f"{c.name} logged a traceback (see {c.output} with --keep)")
    if mid is None or mid.wall >= last.wall:
        notes.append("the web was exhausted before the second half: measured over the whole run")
        mid = first
    verdict = judge(args, web.log_path, t0, mid.wall, last.wall)
    machine = (last.machine_busy - mid.machine_busy) / max(
        last.machine_total - mid.machine_total, 1e-9
    )
    if redis is None:
        wire_pages = wire1.get("pages", 0) - wire0.get("pages", 0)
    else:
        wire_pages = verdict["pages"]
    return RunResult(
        crawler=crawler,
        n=n,
        window=last.wall - t0,
        pages=verdict["pages"],
        timeline=verdict["timeline"],
        measured_from=mid.wall - t0,
        measured=last.wall - mid.wall,
        measured_pages=verdict["measured_pages"],
        per_peer=verdict["per_peer"],
        cpu_crawler=last.cpu_crawler - mid.cpu_crawler,
        cpu_coordinator=last.cpu_coordinator - mid.cpu_coordinator,
        cpu_server=last.cpu_server - mid.cpu_server,
        cpus=os.cpu_count() or 1,
        machine_busy=machine,
        duplicates=verdict["duplicates"],
        overlaps=verdict["overlaps"],
        short_gaps=verdict["short_gaps"],
        robots_violations=verdict["robots_violations"],
        requests=verdict["requests"],
        wire_frames=wire1.get("frames_out", 0) - wire0.get("frames_out", 0),
        wire_bytes=wire1.get("bytes_out_wire", 0) - wire0.get("bytes_out_wire", 0),
        wire_pages=wire_pages,
        url_frames=wire1.get("url_frames", 0) - wire0.get("url_frames", 0),
        url_bytes=wire1.get("url_bytes", 0) - wire0.get("url_bytes", 0),
        forwarded_urls=wire1.get("forwarded_urls", 0) - wire0.get("forwarded_urls", 0),
        measured_requests=verdict["measured_requests"],
        on_wire=verdict["on_wire"],
        exhausted=exhausted,
        notes=notes,
    )


def judge(
    args: argparse.Namespace, log_path: Path, t0: float, mid: float, t1: float
) -> dict[str, Any]:
    """The referee's figures from the web's log. The run starts at the web's first
    request (the harness's `t0` is within a progress tick of it) and ends at wall time
    `t1`; the measured half runs from `mid` to `t1`. A page counts when its response was
    complete: its end, moved from the log's clock to wall time, falls inside."""
    from ubipy.synthweb.log import RequestLog
    from ubipy.synthweb.model import SyntheticWeb, WebSpec
    from ubipy.synthweb.referee import Referee

    spec = WebSpec(seed=args.web_seed, hosts=args.hosts, pages_per_host=args.pages, crawl_delay=0)
    log = RequestLog.from_jsonl(log_path)
    referee = Referee(log, SyntheticWeb(spec))
    if not referee.requests:
        raise RunFailed("the web's log is empty")
    start = min(r.start + r.clock_offset for r in referee.requests)
    ends = [
        (r.end + r.clock_offset, r.peer)
        for r in referee.requests
        if r.complete and not referee.is_robots(r)
    ]
    run = [t - start for t, _ in ends if t <= t1]
    measured = [peer for t, peer in ends if mid < t <= t1]
    # Seconds of requests (robots.txt included) on the wire inside the measured half.
    on_wire = sum(
        max(0.0, min(r.end + r.clock_offset, t1) - max(r.start + r.clock_offset, mid))
        for r in referee.requests
    )
    return {
        "pages": len(run),
        "timeline": cumulative(run, math.ceil(t1 - start)),
        "measured_pages": len(measured),
        "measured_requests": sum(mid < r.end + r.clock_offset <= t1 for r in referee.requests),
        "on_wire": on_wire,
        "per_peer": dict(Counter(measured)),
        "duplicates": len(referee.duplicates()),
        "overlaps": len(referee.overlaps()),
        "short_gaps": len(referee.short_gaps(args.delay)),
        "robots_violations": len(referee.robots_violations()),
        "requests": len(referee.requests),
    }


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
                    f"efficiency {_fmt(eff)}, CPU {r.cpu_ms_per_page:.2f} ms/page, "
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
