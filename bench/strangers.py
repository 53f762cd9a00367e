"""Strangers on the peer port: what floods of unauthenticated connections and of bad
frames cost a crawling peer (issue #15's acceptance).

    python bench/strangers.py                         # 5 windows of 20 s, about 2.5 minutes
    python bench/strangers.py --rounds 3              # each scenario 3 times, in turn
    python bench/strangers.py --window 8 --warmup 2   # a quick run
    python bench/strangers.py --only baseline,dribble --keep /tmp/strangers

One synthetic web (`python -m ubipy.synthweb`, 200 hosts x 100 pages, no latency) serves
every scenario. Each scenario starts a fresh ``ubipy -v peer`` child (a new ``--data``,
``--seeds`` naming the web's seed, ``--delay 0.01``), lets it crawl for ``--warmup``
seconds, then measures a window of ``--window`` seconds during which this process (trio,
one thread) attacks the peer's port from 127.0.0.2, so that the peer's log lines about
the attacker can be told from the rest:

- ``baseline``: no attack.
- ``4mib``: 1,000 connections, each announcing a 4 MiB frame (the largest a member may
  send) and dribbling a byte every 0.5 s; the peer closes each as soon as it reads the
  length (the first-frame cap is 64 KiB), and the stranger dials again after
  ``--reconnect-pause``.
- ``dribble``: 1,000 connections, each announcing a frame of ``FIRST_FRAME_CAP`` bytes
  (the largest a stranger may announce) and dribbling a byte every 0.5 s; the peer holds
  at most its cap of unauthenticated connections (one more pushes the oldest out) for at
  most 5 s each; a stranger that is cut dials again after ``--reconnect-pause``.
- ``flood``: 200,000 frames of 33 bytes with bad tags written on one connection (the
  peer answers the first with its refusal notice and closes the connection).
- ``flood-loop``: one stranger that dials, writes 64 KiB of such frames, waits for the
  peer to close the connection and dials again at once, for the whole window.

In every scenario the peer is asked for its status every second, each time on a new
connection without waiting for the earlier answers (the STATUS_REQUEST frame ``ubipy
status`` sends, given up after 10 s; answered and failed are counted, with the slowest
answer), and ``ubipy status`` itself is run ``--cli-status`` times in the window (a
process of its own, about 0.7 CPU-s, the same in every scenario; its time includes its
start). The peer's RSS (``/proc/PID/status`` VmRSS) is sampled every 0.2 s, and the
connections waiting in its listening socket's accept queue (``/proc/net/tcp``) every
second.

Reported per scenario: pages/s in the window, judged from the synthetic web's request log
(the peer's requests that ended in the window, robots.txt excluded), and its ratio to the
same round's baseline; the peer's CPU (``/proc/PID/stat`` utime + stime) per page; its
RSS at the window's start and the most during it; its log lines that mention 127.0.0.2,
per second (mean, and the most in any one second); the status answers; and the growth of
the status figures ``frames_rejected`` and ``connections_cut``. A second table says what
the attacker did (connections, failed dials, how long until the peer ended them, bytes and
bad frames written, this process's CPU, which includes the status asking), the longest
accept queue seen, and the CPU the peer and the web got and how long the peer waited for
a CPU while runnable (``/proc/PID/task/*/schedstat``): the peer, the web and the attacker
share this machine's CPUs, and on a busy machine the crawl rate moves with the load (the
CPU per page much less). With ``--rounds`` above 1, the median ratio of each scenario
follows.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shlex
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from ubipy.net import request, split_address
from ubipy.synthweb import Referee, RequestLog, SyntheticWeb, WebSpec
from ubipy.wire import DEFAULT_MAX_FRAME, FIRST_FRAME_CAP, StatusRequest, secret_from

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SECRET = "bench-strangers"
# The attacker's source address: the peer logs rejections per source host.
ATTACKER = "127.0.0.2"
SCENARIOS = ("baseline", "4mib", "dribble", "flood", "flood-loop")


def scenario_label(key: str, args: argparse.Namespace) -> str:
    return {
        "baseline": "baseline (no attack)",
        "4mib": f"{args.strangers:,} conns, 4 MiB prefix",
        "dribble": f"{args.strangers:,} conns, 64 KiB prefix, dribbling",
        "flood": f"{args.frames:,} bad frames, one conn",
        "flood-loop": "bad frames, reconnecting",
    }[key]


DRIBBLE_EVERY = 0.5
SAMPLE_EVERY = 0.2
STATUS_EVERY = 1.0
# ubipy.net.request's default; `ubipy status` itself waits 30 s.
STATUS_PATIENCE = 10.0
BAD_FRAME = struct.pack(">I", 33) + b"\x01" * 33  # a tag no secret gives
_BANNER = re.compile(r"ubipy peer (\w+) listening on (\S+)")
_CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- the peer as seen from outside --------------------------------------------------


def rss_mb(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rpartition(")")[2].split()
    # Fields 14 and 15 of proc(5); fields[0] here is field 3 (the state).
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def waited_s(pid: int) -> float:
    """Seconds a process's threads have spent runnable but waiting for a CPU
    (/proc/PID/task/*/schedstat, second field): what a busy machine costs it."""
    total = 0
    for task in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(task.read_text().split()[1])
    return total / 1e9


def accept_queue(port: int) -> int:
    """Connections waiting in the kernel for the peer to accept them: the receive
    queue of its listening socket in /proc/net/tcp."""
    want = f":{port:04X}"
    with contextlib.suppress(OSError), open("/proc/net/tcp") as table:
        for line in table:
            fields = line.split()
            if len(fields) > 4 and fields[3] == "0A" and fields[1].endswith(want):
                return int(fields[4].partition(":")[2], 16)
    return 0


def own_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


@dataclass
class PeerProc:
    proc: trio.Process
    log_path: Path
    peer_id: str = ""
    address: str = ""
    lines: list[tuple[float, str]] = field(default_factory=list)
    _seen: trio.Event = field(default_factory=trio.Event)

    async def drain(self) -> None:
        """Each stderr line with the wall time it arrived."""
        assert self.proc.stderr is not None
        rest = b""
        while chunk := await self.proc.stderr.receive_some(65536):
            now = time.time()
            *whole, rest = (rest + chunk).split(b"\n")
            for raw in whole:
                line = raw.decode(errors="replace")
                self.lines.append((now, line))
                if not self.address and (m := _BANNER.search(line)):
                    self.peer_id, self.address = m.group(1), m.group(2)
                    self._seen.set()
        self._seen.set()

    def save(self) -> None:
        self.log_path.write_text("".join(line + "\n" for _, line in self.lines))


# -- what one scenario measured -----------------------------------------------------


@dataclass
class Attack:
    """What the attacker did in the window."""

    connections: int = 0
    connect_failures: int = 0
    closed_by_peer: int = 0
    held_s: float = 0.0  # summed over the connections the peer closed
    # How the attacker's connections ended: closed (end of stream), reset, write failed.
    ends: Counter[str] = field(default_factory=Counter)
    bytes_written: int = 0
    frames_written: int = 0
    cpu_s: float = 0.0  # this process over the window: attacker and status asking


@dataclass
class StatusLog:
    ok: int = 0
    failed: int = 0
    max_s: float = 0.0
    errors: Counter[str] = field(default_factory=Counter)
    cli_ok: int = 0
    cli_failed: int = 0
    cli_max_s: float = 0.0
    # The last answer's figures, and the peer's page count at each answer.
    last: dict[str, Any] = field(default_factory=dict)
    last_asked: float = float("-inf")
    pages: list[tuple[float, int]] = field(default_factory=list)

    def own_rate(self) -> float:
        """Pages per second by the peer's own count, first answer to last."""
        if len(self.pages) < 2:
            return 0.0
        (t0, p0), (t1, p1) = min(self.pages), max(self.pages)
        return (p1 - p0) / max(t1 - t0, 1e-9)


@dataclass
class Result:
    key: str
    name: str
    round: int
    load: float  # the machine's 1-minute load average as the window began
    peer_id: str
    w0: float
    w1: float
    rss_before: float
    rss_max: float
    accept_queue: int  # the most connections waiting for the peer to accept them
    cpu: float
    cpu_wait: float  # seconds the peer was runnable and waited for a CPU
    web_cpu: float
    figures0: dict[str, Any]
    figures1: dict[str, Any]
    attack: Attack
    status: StatusLog
    attacker_lines: list[float]
    tracebacks: int
    pages: int = 0  # from the web's log, filled in at the end

    @property
    def seconds(self) -> float:
        return self.w1 - self.w0

    @property
    def rate(self) -> float:
        return self.pages / max(self.seconds, 1e-9)

    @property
    def label(self) -> str:
        return self.name + (f" ({self.round})" if self.round else "")

    @property
    def pending_end(self) -> int:
        return int(self.figures1.get("pending", 0))

    def grown(self, name: str) -> int:
        return int(self.figures1.get(name, 0)) - int(self.figures0.get(name, 0))

    def lines_per_second(self) -> tuple[float, int]:
        per_second = Counter(int(t - self.w0) for t in self.attacker_lines)
        return len(self.attacker_lines) / max(self.seconds, 1e-9), max(
            per_second.values(), default=0
        )


# -- the attacks --------------------------------------------------------------------


async def dial(address: str, attack: Attack) -> trio.SocketStream | None:
    host, port = split_address(address)
    try:
        stream = await trio.open_tcp_stream(host, port, local_address=ATTACKER)
    except OSError:
        attack.connect_failures += 1
        return None
    attack.connections += 1
    return stream


async def closed_by_peer(stream: trio.SocketStream, patience: float, attack: Attack) -> bool:
    """Read (and drop) until the peer closes or resets the connection."""
    with trio.move_on_after(patience):
        try:
            while await stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            attack.ends["reset"] += 1
        else:
            attack.ends["closed"] += 1
        return True
    return False


async def write(stream: trio.SocketStream, data: bytes, attack: Attack) -> bool:
    """Write ``data`` in 64 KiB pieces, counting what went out; False once cut."""
    view = memoryview(data)
    try:
        for i in range(0, len(data), 65536):
            piece = view[i : i + 65536]
            await stream.send_all(piece)
            attack.bytes_written += len(piece)
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        attack.ends["write failed"] += 1
        return False
    return True


async def stranger(address: str, announce: int, pause: float, attack: Attack) -> None:
    """Keep one connection open: announce a frame of ``announce`` bytes, dribble a byte
    every DRIBBLE_EVERY s until the peer closes it, then dial again after ``pause``."""
    prefix = struct.pack(">I", announce)
    while True:
        stream = await dial(address, attack)
        if stream is None:
            await trio.sleep(pause)
            continue
        start = trio.current_time()
        try:
            if await write(stream, prefix, attack):
                await dribble(stream, attack)
            attack.closed_by_peer += 1
            attack.held_s += trio.current_time() - start
        finally:
            await trio.aclose_forcefully(stream)
        await trio.sleep(pause)


async def dribble(stream: trio.SocketStream, attack: Attack) -> None:
    """A byte every DRIBBLE_EVERY s until the peer closes the connection."""
    try:
        while True:
            data = b"x"
            with trio.move_on_after(DRIBBLE_EVERY) as waited:
                data = await stream.receive_some(4096)
            if not data:
                attack.ends["closed"] += 1
                return
            if waited.cancelled_caught and not await write(stream, b"x", attack):
                return
    except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
        attack.ends["reset"] += 1


async def crowd(address: str, announce: int, n: int, pause: float, attack: Attack) -> None:
    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(stranger, address, announce, pause, attack)


async def flood_once(address: str, frames: int, attack: Attack) -> None:
    """``frames`` bad frames written on one connection, as fast as it takes them."""
    stream = await dial(address, attack)
    if stream is None:
        return
    start = trio.current_time()
    before = attack.bytes_written
    await write(stream, BAD_FRAME * frames, attack)
    attack.frames_written += (attack.bytes_written - before) // len(BAD_FRAME)
    if await closed_by_peer(stream, 30, attack):
        attack.closed_by_peer += 1
        attack.held_s += trio.current_time() - start
    await trio.aclose_forcefully(stream)
    await trio.sleep_forever()


async def flood_loop(address: str, attack: Attack) -> None:
    """Dial, write 64 KiB of bad frames, wait to be cut, dial again: for ever."""
    per_conn = (64 * 1024) // len(BAD_FRAME)
    data = BAD_FRAME * per_conn
    while True:
        stream = await dial(address, attack)
        if stream is None:
            await trio.sleep(0.01)
            continue
        start = trio.current_time()
        before = attack.bytes_written
        await write(stream, data, attack)
        attack.frames_written += (attack.bytes_written - before) // len(BAD_FRAME)
        if await closed_by_peer(stream, 10, attack):
            attack.closed_by_peer += 1
            attack.held_s += trio.current_time() - start
        await trio.aclose_forcefully(stream)


def attack_for(key: str, args: argparse.Namespace) -> Callable[[str, Attack], Awaitable[None]]:
    if key == "4mib":
        return lambda a, s: crowd(a, DEFAULT_MAX_FRAME, args.strangers, args.reconnect_pause, s)
    if key == "dribble":
        return lambda a, s: crowd(a, FIRST_FRAME_CAP, args.strangers, args.reconnect_pause, s)
    if key == "flood":
        return lambda a, s: flood_once(a, args.frames, s)
    if key == "flood-loop":
        return flood_loop
    assert key == "baseline"

    async def nothing(address: str, attack: Attack) -> None:
        await trio.sleep_forever()

    return nothing


# -- asking for the status ------------------------------------------------------------


async def figures(address: str) -> dict[str, Any]:
    """This peer's own status figures (a cluster of one)."""
    answer = await request(
        address, secret_from(SECRET), StatusRequest(cluster=True), patience=STATUS_PATIENCE
    )
    report: dict[str, Any] = json.loads(json.dumps(answer.to_wire()))
    peers: list[dict[str, Any]] = report["peers"]
    return peers[0] if peers else {}


async def ask_status(address: str, end: float, log: StatusLog) -> None:
    """Ask every STATUS_EVERY s until ``end`` (trio time), each question on a connection
    of its own without waiting for the earlier ones; the last is asked at ``end`` and
    its figures close the window. Returns when every question has been answered or
    given up."""

    async def ask(asked: float) -> None:
        try:
            answer = await figures(address)
        except (OSError, PermissionError) as exc:
            log.failed += 1
            log.errors[str(exc)[:80]] += 1
        else:
            log.ok += 1
            if asked >= log.last_asked:
                log.last, log.last_asked = answer, asked
            log.pages.append((time.time(), int(answer.get("pages", 0))))
        log.max_s = max(log.max_s, trio.current_time() - asked)

    async with trio.open_nursery() as nursery:
        due = trio.current_time()
        while True:
            nursery.start_soon(ask, trio.current_time())
            if due >= end:
                return
            due = min(due + STATUS_EVERY, end)
            await trio.sleep_until(due)


async def ask_cli(address: str, at: list[float], log: StatusLog) -> None:
    """Run ``ubipy status`` at each of the (trio) times in ``at``."""
    cmd = [sys.executable, "-m", "ubipy.cli", "status", "--peer", address, "--secret", SECRET]
    for when in at:
        await trio.sleep_until(when)
        start = trio.current_time()
        done = await trio.run_process(cmd, capture_stdout=True, capture_stderr=True, check=False)
        if done.returncode != 0:
            log.errors["ubipy status: " + done.stderr.decode(errors="replace")[-80:]] += 1
        log.cli_max_s = max(log.cli_max_s, trio.current_time() - start)
        if done.returncode == 0 and b"peer" in done.stdout.lower():
            log.cli_ok += 1
        else:
            log.cli_failed += 1


async def sample(pid: int, port: int, peak: list[float]) -> None:
    """The most RSS (MB) and the longest accept queue, into ``peak``."""
    n = 0
    while True:
        peak[0] = max(peak[0], rss_mb(pid))
        if n % 5 == 0:
            peak[1] = max(peak[1], accept_queue(port))
        n += 1
        await trio.sleep(SAMPLE_EVERY)


# -- one scenario -------------------------------------------------------------------


async def run_scenario(
    key: str, round_: int, args: argparse.Namespace, web: Web, base: Path
) -> Result:
    work = base / (f"{key}-{round_}" if round_ else key)
    work.mkdir(parents=True)
    cmd = [
        sys.executable, "-m", "ubipy.cli", "-v", "peer", "--data", str(work / "data"),
        "--listen", "127.0.0.1:0", "--proxy", web.proxy, "--delay", str(args.delay),
        "--robots-retry", "0.05", "--concurrency", str(args.concurrency),
        "--secret", SECRET, "--seeds", str(web.seeds),
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    proc = await trio.lowlevel.open_process(cmd, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    peer = PeerProc(proc, work / "peer.log")
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(peer.drain)
            with trio.fail_after(60):
                await peer._seen.wait()
            if not peer.address:
                tail = "\n".join(line for _, line in peer.lines[-20:])
                raise SystemExit(f"the peer of {key!r} exited before its banner:\n{tail}")
            await trio.sleep(args.warmup)
            result = await measure(key, round_, args, peer, web.pid)
            nursery.cancel_scope.cancel()
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        with trio.move_on_after(30):
            await proc.wait()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    peer.save()
    result.tracebacks = sum("Traceback" in line for _, line in peer.lines)
    return result


async def measure(
    key: str, round_: int, args: argparse.Namespace, peer: PeerProc, web_pid: int
) -> Result:
    pid = peer.proc.pid
    attack, status = Attack(), StatusLog()
    figures0 = await figures(peer.address)
    load = os.getloadavg()[0]
    rss0, cpu0, own0 = rss_mb(pid), cpu_s(pid), own_cpu_s()
    wait0, web0 = waited_s(pid), cpu_s(web_pid)
    peak = [rss0, 0.0]
    lines0 = len(peer.lines)
    w0 = time.time()
    start = trio.current_time()
    end = start + args.window
    cli_at = [start + args.window * (i + 1) / (args.cli_status + 1) for i in range(args.cli_status)]
    at_end: dict[str, float] = {}

    async def clock(attacking: trio.CancelScope) -> None:
        await trio.sleep_until(end)
        at_end.update(
            wall=time.time(),
            cpu=cpu_s(pid),
            own=own_cpu_s(),
            wait=waited_s(pid),
            web=cpu_s(web_pid),
        )
        attacking.cancel()

    # What asks for the status stops asking at the window's end, but the answers
    # awaited then still count.
    async with trio.open_nursery() as asking:
        asking.start_soon(ask_status, peer.address, end, status)
        asking.start_soon(ask_cli, peer.address, cli_at, status)
        async with trio.open_nursery() as attacking:
            attacking.start_soon(clock, attacking.cancel_scope)
            attacking.start_soon(sample, pid, split_address(peer.address)[1], peak)
            attacking.start_soon(attack_for(key, args), peer.address, attack)
    w1 = at_end["wall"]
    figures1 = status.last
    attack.cpu_s = at_end["own"] - own0
    attacker_lines = [t for t, line in peer.lines[lines0:] if ATTACKER in line and t <= w1 + 0.3]
    return Result(
        key=key,
        name=scenario_label(key, args),
        round=round_,
        load=load,
        peer_id=peer.peer_id,
        w0=w0,
        w1=w1,
        rss_before=rss0,
        rss_max=peak[0],
        accept_queue=int(peak[1]),
        cpu=at_end["cpu"] - cpu0,
        cpu_wait=at_end["wait"] - wait0,
        web_cpu=at_end["web"] - web0,
        figures0=figures0,
        figures1=figures1,
        attack=attack,
        status=status,
        attacker_lines=attacker_lines,
        tracebacks=0,
    )


# -- the synthetic web --------------------------------------------------------------


@dataclass
class Web:
    pid: int
    proxy: str
    seeds: Path  # a file naming its seed URL


async def read_banner(stdout: trio.abc.ReceiveStream) -> tuple[str, str]:
    """(proxy URL, seed URL) from the web's first lines."""
    buf = b""
    found: dict[str, str] = {}
    while not ("proxy" in found and "seed" in found):
        chunk = await stdout.receive_some(4096)
        if not chunk:
            raise SystemExit("the synthetic web ended before saying where it listens")
        buf += chunk
        *whole, buf = buf.split(b"\n")
        for line in whole:
            k, _, v = line.decode().strip().partition(" ")
            found[k] = v
    return found["proxy"], found["seed"]


def pages_in_windows(args: argparse.Namespace, log_path: Path, results: list[Result]) -> None:
    """Each result's pages: its peer's requests (robots.txt excluded) that ended in
    its window, by the web's own log."""
    web = SyntheticWeb(WebSpec(seed=args.web_seed, hosts=args.hosts, pages_per_host=args.pages))
    log = RequestLog.from_jsonl(log_path)
    referee = Referee(log, web)
    by_peer = {r.peer_id: r for r in results}
    for entry in log:
        result = by_peer.get(entry.peer)
        if result is None or referee.is_robots(entry):
            continue
        if result.w0 <= entry.end + entry.clock_offset < result.w1:
            result.pages += 1


async def run_all(args: argparse.Namespace, base: Path) -> list[Result]:
    web_cmd = [
        sys.executable, "-m", "ubipy.synthweb", "--hosts", str(args.hosts),
        "--pages", str(args.pages), "--seed", str(args.web_seed), "--crawl-delay", "0",
        "--bind", "127.0.0.1", "--port", "0", "--log", str(base / "requests.jsonl"),
    ]  # fmt: skip
    web = await trio.lowlevel.open_process(
        web_cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=ROOT
    )
    results: list[Result] = []
    try:
        assert web.stdout is not None
        with trio.fail_after(60):
            proxy, seed = await read_banner(web.stdout)
        seeds = base / "seeds.txt"
        seeds.write_text(seed + "\n")
        site = Web(web.pid, proxy, seeds)
        for round_ in range(1, args.rounds + 1) if args.rounds > 1 else [0]:
            for key in args.only:
                name = scenario_label(key, args) + (f" (round {round_})" if round_ else "")
                print(f"-- {name} ...", flush=True)
                result = await run_scenario(key, round_, args, site, base)
                results.append(result)
                print(f"   {progress_line(result)}", flush=True)
    finally:
        with contextlib.suppress(ProcessLookupError):
            web.send_signal(signal.SIGINT)
        with trio.move_on_after(120):
            await web.wait()
        if web.returncode is None:
            web.kill()
            await web.wait()
    pages_in_windows(args, base / "requests.jsonl", results)
    return results


def progress_line(r: Result) -> str:
    a = r.attack
    return (
        f"{r.status.own_rate():.0f} pages/s (the peer's count), RSS {r.rss_before:.0f} -> "
        f"max {r.rss_max:.0f} MB, peer CPU {r.cpu:.1f} s; status {r.status.ok} ok, "
        f"{r.status.failed} failed (slowest {r.status.max_s:.2f} s); "
        f"{a.connections:,} attacker connections, ended: {dict(a.ends)}"
    )


# -- the report ---------------------------------------------------------------------


def baseline_of(r: Result, results: list[Result]) -> Result | None:
    """The baseline of the same round."""
    return next((b for b in results if b.key == "baseline" and b.round == r.round), None)


def ratio(r: Result, results: list[Result]) -> float | None:
    base = baseline_of(r, results)
    return r.rate / base.rate if base is not None and base.rate > 0 else None


def table(results: list[Result]) -> str:
    lines = [
        "| scenario | pages/s | vs baseline | peer CPU ms/page | RSS before MB | RSS max MB "
        "| RSS growth MB | attacker log lines/s (most in 1 s) | status ok/failed "
        "| slowest status s | `ubipy status` ok/failed (slowest s) | frames_rejected "
        "| connections_cut |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        mean, most = r.lines_per_second()
        s = r.status
        vs = ratio(r, results)
        lines.append(
            f"| {r.label} | {r.rate:,.1f} | {'-' if vs is None else f'{vs:.2f}'} "
            f"| {1000 * r.cpu / max(r.pages, 1):.2f} | {r.rss_before:.0f} | {r.rss_max:.0f} "
            f"| {r.rss_max - r.rss_before:+.1f} | {mean:.2f} ({most}) | {s.ok}/{s.failed} "
            f"| {s.max_s:.2f} | {s.cli_ok}/{s.cli_failed} ({s.cli_max_s:.1f}) "
            f"| {r.grown('frames_rejected'):,} "
            f"| {r.grown('connections_cut'):,} |"
        )
    return "\n".join(lines)


def attack_table(results: list[Result]) -> str:
    lines = [
        "| scenario | connections | per s | failed dials | ended by the peer "
        "| mean s to the end | bytes written | bad frames written | attacker CPU s "
        "| most waiting to be accepted | peer CPU s | peer waited for a CPU s | web CPU s | load |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        a = r.attack
        lines.append(
            f"| {r.label} | {a.connections:,} | {a.connections / max(r.seconds, 1e-9):,.0f} "
            f"| {a.connect_failures:,} | {a.closed_by_peer:,} "
            f"| {a.held_s / max(a.closed_by_peer, 1):.2f} | {a.bytes_written:,} "
            f"| {a.frames_written:,} | {a.cpu_s:.1f} | {r.accept_queue:,} | {r.cpu:.1f} "
            f"| {r.cpu_wait:.1f} "
            f"| {r.web_cpu:.1f} | {r.load:.1f} |"
        )
    return "\n".join(lines)


def summary(results: list[Result]) -> list[str]:
    """Over several rounds: each scenario's median ratio to its round's baseline."""
    out = []
    for key, name in dict.fromkeys((r.key, r.name) for r in results):
        ratios = sorted(v for r in results if r.key == key and (v := ratio(r, results)))
        per_page = sorted(1000 * r.cpu / max(r.pages, 1) for r in results if r.key == key)
        if len(ratios) > 1 and key != "baseline":
            out.append(
                f"{name}: pages/s vs baseline median {statistics.median(ratios):.2f} "
                f"(range {ratios[0]:.2f}-{ratios[-1]:.2f}); peer CPU ms/page median "
                f"{statistics.median(per_page):.2f}"
            )
    return out


def notes(results: list[Result]) -> list[str]:
    out = []
    for r in results:
        if r.tracebacks:
            out.append(f"{r.label}: {r.tracebacks} traceback(s) in the peer's log")
        if r.pending_end == 0:
            out.append(f"{r.label}: the crawl ran out of URLs in the window")
        own = r.status.own_rate()
        if abs(own - r.rate) > 0.1 * r.rate:
            out.append(
                f"{r.label}: {own:.1f} pages/s by the peer's count (between its first and "
                f"last status answers), {r.rate:.1f} by the web's log"
            )
        if r.status.errors:
            out.append(f"{r.label}: status failures {dict(r.status.errors)}")
        if r.attack.ends:
            out.append(f"{r.label}: the attacker's connections ended {dict(r.attack.ends)}")
    return out


def reproduce(args: argparse.Namespace) -> str:
    cmd = [
        "python", "bench/strangers.py", "--hosts", str(args.hosts), "--pages", str(args.pages),
        "--warmup", f"{args.warmup:g}", "--window", f"{args.window:g}",
        "--strangers", str(args.strangers), "--reconnect-pause", f"{args.reconnect_pause:g}",
        "--frames", str(args.frames), "--concurrency", str(args.concurrency),
        "--only", ",".join(args.only),
    ]  # fmt: skip
    if args.rounds > 1:
        cmd += ["--rounds", str(args.rounds)]
    return shlex.join(cmd)


# -- main ---------------------------------------------------------------------------


def raise_fd_limit() -> int:
    """The soft RLIMIT_NOFILE raised to the hard one (1,000 strangers need it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--hosts", type=int, default=200)
    p.add_argument("--pages", type=int, default=100, help="pages per host")
    p.add_argument("--web-seed", type=int, default=1, help="the synthetic web's seed")
    p.add_argument("--concurrency", type=int, default=64, help="the peer's --concurrency")
    p.add_argument("--delay", type=float, default=0.01, help="the peer's --delay")
    p.add_argument("--warmup", type=float, default=3.0, help="seconds of crawl before a window")
    p.add_argument("--window", type=float, default=20.0, help="seconds measured per scenario")
    p.add_argument("--strangers", type=int, default=1000, help="connections of 4mib, dribble")
    p.add_argument(
        "--reconnect-pause",
        type=float,
        default=1.0,
        help="seconds a stranger of 4mib/dribble waits to dial again once cut",
    )
    p.add_argument("--frames", type=int, default=200_000, help="bad frames of the flood")
    p.add_argument("--cli-status", type=int, default=2, help="`ubipy status` runs per window")
    p.add_argument(
        "--only",
        default=",".join(SCENARIOS),
        help=f"comma-separated, in order, from: {', '.join(SCENARIOS)}",
    )
    p.add_argument(
        "--rounds", type=int, default=1, help="run the scenarios this many times, in turn"
    )
    p.add_argument("--keep", type=Path, default=None, help="keep logs and shards here")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args(argv)
    args.only = [c.strip() for c in args.only.split(",") if c.strip()]
    bad = [c for c in args.only if c not in SCENARIOS]
    if bad:
        p.error(f"unknown scenario(s) {bad}; choose from {', '.join(SCENARIOS)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    nofile = raise_fd_limit()
    base = Path(tempfile.mkdtemp(prefix="ubipy-strangers-")) if args.keep is None else args.keep
    base.mkdir(parents=True, exist_ok=True)
    print(
        f"synthetic web: {args.hosts} hosts x {args.pages} pages (seed {args.web_seed}); peer "
        f"--concurrency {args.concurrency} --delay {args.delay:g}; warm-up {args.warmup:g} s, "
        f"window {args.window:g} s; {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
        f"RLIMIT_NOFILE {nofile}",
        flush=True,
    )
    try:
        results = trio.run(run_all, args, base)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"logs and shards kept in {base}")
    print()
    print(table(results))
    print()
    print(attack_table(results))
    print()
    for line in summary(results):
        print(line)
    for line in notes(results):
        print(f"note: {line}")
    print(f"reproduce: {reproduce(args)}")
    if args.json is not None:
        rows = [
            {
                **{k: v for k, v in r.__dict__.items() if k not in ("attack", "status")},
                "attack": r.attack.__dict__,
                "status": {**r.status.__dict__, "errors": dict(r.status.errors)},
            }
            for r in results
        ]
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
