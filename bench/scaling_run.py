"""One run of the scaling harness: a crawler at one N, from start to stop, and its figures.

Starts and stops the synthetic web, the `ubipy peer` processes, Redis and the scrapy-redis
Scrapy processes; measures CPU (psutil) and the wire; and has the referee judge the web's
request log. `run_one` returns a `bench.scaling_report.RunResult`, or raises `RunFailed`.
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
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.scaling_report import RunResult, cumulative
from bench.speed import web_banner

ROOT = Path(__file__).resolve().parent.parent
if TYPE_CHECKING:
    from ubipy.synthweb import SyntheticWeb

SECRET = "scaling-bench"
_BANNER = re.compile(r"ubipy peer (\w+) listening on (\S+)")
# Scrapy's delay counts from when a request leaves its slot's queue, a little before it
# reaches the web; this much more keeps the gap the web sees at or above the delay.
SCRAPY_DELAY_MARGIN = 0.01


class RunFailed(RuntimeError):
    """One run failed; the others still run."""


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
        banner = web_banner(self.proc.stdout)
        if banner is None:
            self.proc.kill()
            self.proc.wait()
            raise RunFailed(f"the synthetic web did not start; see {work / 'web.err'}")
        self.proxy, self.seed = banner
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

    from ubipy.net import request
    from ubipy.wire import FrameType, decode, secret_from

    async def go() -> dict[str, Any]:
        message = decode(FrameType[kind_name], payload)
        reply = await request(address, secret_from(SECRET), message)
        answer: dict[str, Any] = json.loads(json.dumps(reply.to_wire()))
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


def ubipy_members(children: Sequence[Child]) -> list[str]:
    """The ids of the peers alive in the first one's view: the ring's members."""
    members = _ask(children[0].address, "STATUS_REQUEST", {})["members"]
    return sorted(m["id"] for m in members if m["state"] == "alive")


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


def wakeups_of(pids: Iterable[int]) -> int:
    """Voluntary context switches: how often the processes slept and woke up again."""
    import psutil

    total = 0
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            total += psutil.Process(pid).num_ctx_switches().voluntary
    return total


@dataclass
class Snapshot:
    wall: float
    cpu_crawler: float
    wakeups_crawler: int
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
        wakeups_crawler=wakeups_of(crawler),
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
        members = ubipy_members(children) if redis is None else []
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
    verdict = judge(args, web.log_path, t0, mid.wall, last.wall, members)
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
        wakeups_crawler=last.wakeups_crawler - mid.wakeups_crawler,
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
        cross_links=verdict["cross_links"],
        foreign_links=verdict["foreign_links"],
        measured_requests=verdict["measured_requests"],
        on_wire=verdict["on_wire"],
        exhausted=exhausted,
        notes=notes,
    )


def link_counts(
    web: SyntheticWeb, pages: Iterable[tuple[str, str]], members: Sequence[str]
) -> tuple[int, int]:
    """(links to another host, of which into another peer's hosts) on `pages`, each a
    (url, the peer that fetched it), a link counted once per page. The second is what a
    crawler that places hosts on peers must hand on, whatever each costs it: the truth from
    the web's model and the peers' ring, not the peers' own counts."""
    from ubipy.fetch import host_key
    from ubipy.ring import Ring

    ring = Ring(members)
    cross = foreign = 0
    for url, peer in pages:
        here = host_key(url)
        for target in set(web.links_of(url)):
            host = host_key(target)
            if host != here:
                cross += 1
                foreign += ring.owner(host) != peer
    return cross, foreign


def judge(
    args: argparse.Namespace,
    log_path: Path,
    t0: float,
    mid: float,
    t1: float,
    members: Sequence[str] = (),
) -> dict[str, Any]:
    """The referee's figures from the web's log. The run starts at the web's first
    request (the harness's `t0` is within a progress tick of it) and ends at wall time
    `t1`; the measured half runs from `mid` to `t1`. A page counts when its response was
    complete: its end, moved from the log's clock to wall time, falls inside. With the
    ring's `members` (ubipy), the links on the run's pages are counted too."""
    from ubipy.synthweb import Referee, RequestLog, SyntheticWeb, WebSpec

    spec = WebSpec(seed=args.web_seed, hosts=args.hosts, pages_per_host=args.pages, crawl_delay=0)
    log = RequestLog.from_jsonl(log_path)
    web = SyntheticWeb(spec)
    referee = Referee(log, web)
    if not referee.requests:
        raise RunFailed("the web's log is empty")
    start = min(r.start + r.clock_offset for r in referee.requests)
    done = [r for r in referee.requests if r.complete and not referee.is_robots(r)]
    ends = [(r.end + r.clock_offset, r.peer) for r in done]
    run = [t - start for t, _ in ends if t <= t1]
    cross, foreign = 0, 0
    if members:
        in_run = [(referee.url_of(r), r.peer) for r in done if r.end + r.clock_offset <= t1]
        cross, foreign = link_counts(web, in_run, members)
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
        "cross_links": cross,
        "foreign_links": foreign,
    }
