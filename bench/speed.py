"""ubipy versus Scrapy on the same synthetic web, in one go: CPU per page, pages/s, peak RSS.

    python bench/speed.py                       # 200 hosts x 100 pages, concurrency 64
    python bench/speed.py --hosts 50 --pages 40 # a quick run
    python bench/speed.py --only ubipy --profile cprofile
    python bench/speed.py --only ubipy,ubipy-https --max-requests 5   # TLS's cost

Each crawler runs against a fresh synthetic web server process (`python -m ubipy.synthweb`,
an HTTP forward proxy on loopback for the `hNNN.synth.test` names) and is itself a child
process, so its CPU time and peak RSS are its own (`os.wait4` on that child). The same
politeness and concurrency for all: one request per host at a time, the same global
concurrency, delay 0, robots.txt obeyed, every link followed, pages and titles stored.

Crawlers (``--only``, comma-separated; the default is ``ubipy,httpx,scrapy``):

- ``ubipy``: one peer, as shipped (httpx2 client, ubipy's own transport if it has one);
  page bodies in WARC files as they arrive (``--bodies``, default ``warc``).
- ``ubipy-shard``: the same with ``--bodies shard``: bodies zlib-compressed in the
  shard, as before WARC files were the default (``--only ubipy,ubipy-shard`` gives
  their CPU per page side by side).
- ``httpx``: the same, with httpx 0.28 imported in place of httpx2 (and httpcore 1.x in
  place of httpcore2), before anything of ubipy is imported.
- ``httpx-stock`` / ``httpx2-stock``: httpx 0.28 / httpx2 with its stock
  ``AsyncHTTPTransport`` (httpcore's pool) handed to the peer instead of ubipy's transport.
- ``ubipy-https``: ``ubipy`` on the same web over HTTPS: the server answers CONNECT and
  speaks TLS with a certificate for ``*.synth.test`` from a CA made for the run
  (trustme), which the peer is given with ``--ca-bundle``; the crawl starts at
  ``https://h000.synth.test/`` and stays on HTTPS. With ``--max-requests N`` the server
  closes every connection after N answers (both schemes), so each N pages pay a new
  connection, and over HTTPS a new handshake: the report then gives HTTPS's CPU per
  page over plain HTTP's, and how much of the difference is OpenSSL's own calls
  (handshakes, reads, writes, timed in the child; the rest is the tunnel and the
  handshake's sends and waits).
- ``scrapy``: `bench/scrapy_spider.py` with CONCURRENT_REQUESTS_PER_DOMAIN=1,
  DOWNLOAD_DELAY=0, ROBOTSTXT_OBEY=True, url and title to a JSON Lines feed.

The judge of pages fetched is the server's request log (robots.txt requests excluded).
robots.txt answering 5xx is retried by ubipy with back-off from ``robots_retry_base``,
which is set to 0.1 s here so the host that always answers 500 does not hold the crawl up.
"""

from __future__ import annotations

import argparse
import compileall
import functools
import json
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# The ubipy of this checkout, not the one installed: an editable install's finder comes
# after the path, and another checkout's speed.py ran this one's code (a session's
# old-against-new runs measured the new code twice).
sys.path.insert(0, str(ROOT))
CRAWLERS = (
    "ubipy",
    "ubipy-shard",
    "ubipy-https",
    "httpx",
    "httpx-stock",
    "httpx2-stock",
    "scrapy",
    "scrapy-stock",
)
LABELS = {
    "ubipy": "ubipy (httpx2)",
    "ubipy-shard": "ubipy (httpx2, bodies in the shard)",
    "ubipy-https": "ubipy (httpx2, HTTPS)",
    "httpx": "ubipy (httpx 0.28)",
    "httpx-stock": "ubipy (httpx 0.28, stock transport)",
    "httpx2-stock": "ubipy (httpx2, stock transport)",
    "scrapy": "Scrapy",
    "scrapy-stock": "Scrapy (stock pool)",
}


class CrawlFailed(RuntimeError):
    """A crawler's run failed; the others still run."""


# -- measuring a child ---------------------------------------------------------------


@dataclass
class Usage:
    wall: float
    cpu: float  # user + sys seconds
    user: float
    sys: float
    max_rss_mb: float
    status: int
    # Voluntary context switches: each a sleep and a wake-up, which costs CPU of its
    # own on some machines (bench/wakeups.py).
    wakeups: int = 0


def wait_child(proc: subprocess.Popen[Any], timeout: float) -> Usage:
    """Wait for `proc` and return its own resource usage (wait4: that child only)."""
    start = time.monotonic()
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - start > timeout:
            proc.kill()
            pid, status, ru = os.wait4(proc.pid, 0)
            break
        time.sleep(0.02)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Usage(
        wall=time.monotonic() - start,
        cpu=ru.ru_utime + ru.ru_stime,
        user=ru.ru_utime,
        sys=ru.ru_stime,
        # Linux reports ru_maxrss in KiB.
        max_rss_mb=ru.ru_maxrss / 1024,
        status=proc.returncode,
        wakeups=ru.ru_nvcsw,
    )


@dataclass
class Server:
    proc: subprocess.Popen[str]
    proxy: str
    seed: str
    log_path: Path


@dataclass
class Tls:
    """A CA made for one run, and the server's certificate for ``*.synth.test``."""

    ca: Path
    cert: Path
    key: Path

    @classmethod
    def make(cls, where: Path) -> Tls:
        import trustme

        ca = trustme.CA()
        leaf = ca.issue_cert("*.synth.test")
        tls = cls(where / "ca.pem", where / "server.pem", where / "server.key")
        ca.cert_pem.write_to_path(str(tls.ca))
        leaf.private_key_pem.write_to_path(str(tls.key))
        with open(tls.cert, "wb") as f:
            for blob in leaf.cert_chain_pems:
                f.write(blob.bytes())
        return tls


def start_server(
    args: argparse.Namespace, log_path: Path, stderr: Path, tls: Tls | None = None
) -> Server:
    cmd = [
        sys.executable,
        "-m",
        "ubipy.synthweb",
        "--hosts",
        str(args.hosts),
        "--pages",
        str(args.pages),
        "--seed",
        str(args.web_seed),
        "--bind",
        "127.0.0.1",
        "--port",
        "0",
        "--crawl-delay",
        "0",
        "--log",
        str(log_path),
    ]
    if tls is not None:
        cmd += ["--tls-cert", str(tls.cert), "--tls-key", str(tls.key)]
    if args.max_requests:
        cmd += ["--max-requests", str(args.max_requests)]
    with open(stderr, "w") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, cwd=ROOT)
    assert proc.stdout is not None
    banner = web_banner(proc.stdout)
    if banner is None:
        raise SystemExit(f"the synthetic web did not start; see {stderr}")
    return Server(proc, *banner, log_path)


def web_banner(stdout: IO[str]) -> tuple[str, str] | None:
    """The synthetic web's proxy and seed URL from the first lines it prints
    (``proxy URL``, ``seed URL``); None if it ends before saying both."""
    proxy = seed = ""
    while not (proxy and seed):
        line = stdout.readline()
        if not line:
            return None
        key, _, value = line.strip().partition(" ")
        if key == "proxy":
            proxy = value
        elif key == "seed":
            seed = value
    return proxy, seed


def stop_server(server: Server) -> Usage:
    """SIGINT the server (it then writes its log) and wait for it."""
    try:
        pid, _, _ = os.wait4(server.proc.pid, os.WNOHANG)
    except ChildProcessError:
        pid = server.proc.pid
    if pid:
        # Already gone: something outside this script stopped it during the crawl.
        raise CrawlFailed("the synthetic web's server stopped during the crawl")
    server.proc.send_signal(signal.SIGINT)
    usage = wait_child(server.proc, timeout=120)
    if server.proc.stdout is not None:
        server.proc.stdout.close()
    return usage


# -- judging from the server's log ---------------------------------------------------


@dataclass
class LogVerdict:
    requests: int
    robots: int
    pages: int
    urls: int
    duplicates: int
    robots_violations: int
    overlaps: int
    missing: int
    unexpected: int
    connections: int | None  # distinct client addresses, when the UA names no peer


_TRUTH: dict[tuple[int, int, int], set[str]] = {}


def judge(args: argparse.Namespace, log_path: Path, seed: str) -> LogVerdict:
    from ubipy.synthweb import Referee, RequestLog, SyntheticWeb, WebSpec, ground_truth

    spec = WebSpec(seed=args.web_seed, hosts=args.hosts, pages_per_host=args.pages, crawl_delay=0.0)
    web = SyntheticWeb(spec)
    key = (args.web_seed, args.hosts, args.pages)
    if key not in _TRUTH:
        _TRUTH[key] = ground_truth(web, [seed], sitemaps=False)  # as every crawler is run
    truth = _TRUTH[key]
    log = RequestLog.from_jsonl(log_path)
    referee = Referee(log, web)
    robots = sum(1 for r in log if referee.is_robots(r))
    peers = Counter(r.peer for r in log)
    named = any("peer=" in r.user_agent for r in log)
    return LogVerdict(
        requests=len(log),
        robots=robots,
        pages=len(log) - robots,
        urls=len(referee.requested()),
        duplicates=len(referee.duplicates()),
        robots_violations=len(referee.robots_violations()),
        overlaps=len(referee.overlaps()),
        missing=len(referee.missing(truth)),
        unexpected=len(referee.unexpected(truth)),
        connections=None if named else len(peers),
    )


# -- one crawler, one fresh web ------------------------------------------------------


@dataclass
class Run:
    name: str
    usage: Usage
    server: Usage
    verdict: LogVerdict
    own: dict[str, Any] = field(default_factory=dict)

    @property
    def pages(self) -> int:
        return self.verdict.pages

    @property
    def crawl_wall(self) -> float:
        return float(self.own.get("crawl_wall") or self.usage.wall)

    @property
    def pages_per_cpu_second(self) -> float:
        return self.pages / max(self.usage.cpu, 1e-9)


def child_command(
    name: str, args: argparse.Namespace, server: Server, work: Path, tls: Tls | None = None
) -> list[str]:
    result = str(work / "result.json")
    if name.startswith("scrapy"):
        return [
            *(_callgrind(work) if args.instructions else []),
            sys.executable,
            str(HERE / "scrapy_spider.py"),
            "--seed-url",
            server.seed,
            "--proxy",
            server.proxy,
            "--concurrency",
            str(args.concurrency),
            "--feed",
            str(work / "items.jsonl"),
            "--result",
            result,
            *(["--stock-pool"] if name == "scrapy-stock" else []),
        ]
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        name,
        "--seed-url",
        server.seed,
        "--proxy",
        server.proxy,
        "--concurrency",
        str(args.concurrency),
        "--data",
        str(work / "data"),
        "--result",
        result,
        "--bodies",
        "shard" if name == "ubipy-shard" else args.bodies,
    ]
    if tls is not None:
        # The same web, from its https home page on.
        cmd[cmd.index("--seed-url") + 1] = "https://" + server.seed.removeprefix("http://")
        cmd += ["--ca-bundle", str(tls.ca)]
    if args.profile:
        cmd += ["--profile", args.profile, "--profile-out", str(work / "profile")]
    if args.instructions:
        return [*_callgrind(work), *cmd]
    if args.profile == "pyspy":
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        return [
            spy,
            "record",
            "--format",
            "raw",
            "--rate",
            "250",
            # --native (C frames: sqlite, zlib, lxml) needs the target paused per sample.
            *(["--native"] if args.native else ["--nonblocking"]),
            "--output",
            str(work / "profile.txt"),
            "--",
            *cmd,
        ]
    return cmd


def _callgrind(work: Path) -> list[str]:
    """The prefix that runs a crawler under callgrind (``--instructions``)."""
    return ["valgrind", "--tool=callgrind", f"--callgrind-out-file={work / 'callgrind.out'}"]


def _instructions(child_out: Path) -> int | None:
    """The instructions callgrind counted in the child (its summary, in the child's
    output), or None when it was not run under callgrind."""
    found = re.findall(r"Collected : (\d+)", child_out.read_text(errors="replace"))
    return int(found[-1]) if found else None


def run_crawler(name: str, args: argparse.Namespace, base: Path) -> Run:
    work = base / name
    work.mkdir(parents=True)
    tls = Tls.make(work) if name.endswith("-https") else None
    server = start_server(args, work / "requests.jsonl", work / "server.err", tls)
    try:
        env = dict(os.environ)
        for var in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
            env.pop(var, None)
        with open(work / "child.out", "w") as out:
            proc = subprocess.Popen(
                child_command(name, args, server, work, tls),
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
                env=env,
            )
            usage = wait_child(proc, timeout=args.timeout)
    finally:
        server_usage = stop_server(server)
    if usage.status != 0:
        tail = (work / "child.out").read_text(errors="replace")[-3000:]
        raise CrawlFailed(f"{name} exited with {usage.status}:\n{tail}")
    own = json.loads((work / "result.json").read_text())
    counted = _instructions(work / "child.out")
    if counted is not None:
        own["instructions"] = counted
    verdict = judge(args, server.log_path, server.seed)
    run = Run(LABELS[name], usage, server_usage, verdict, own)
    if args.profile == "cprofile" and not name.startswith("scrapy"):
        print(profile_report_cprofile(work / "profile", args.top), flush=True)
    elif args.profile == "pyspy" and not name.startswith("scrapy"):
        print(profile_report_pyspy(work / "profile.txt", args.top), flush=True)
    return run


# -- the ubipy child -----------------------------------------------------------------


def ubipy_child(args: argparse.Namespace) -> None:
    """Run one peer in this process until the crawl is idle; write its figures."""
    if args.child.startswith("httpx") and not args.child.startswith("httpx2"):
        # httpx 0.28 in place of httpx2: the same API, aliased before ubipy is imported.
        import httpcore
        import httpx

        sys.modules["httpx2"] = httpx
        sys.modules["httpcore2"] = httpcore
    import trio

    from ubipy.config import (
        BodyStore,
        BoundsConfig,
        CrawlConfig,
        FetchConfig,
        PolitenessConfig,
        StoreConfig,
    )
    from ubipy.peer import Peer, settle_collector

    # The same work as Scrapy's: links only (it reads no sitemaps) and a fixed delay
    # (its AutoThrottle is off by default, as ubipy's response-time delay is here).
    politeness = PolitenessConfig(
        delay=0.0, concurrency=args.concurrency, robots_retry_base=0.1, delay_factor=0.0
    )
    config = CrawlConfig(
        data_dir=Path(args.data),
        listen="127.0.0.1:0",
        politeness=politeness,
        bounds=BoundsConfig(sitemaps=False),
        fetch=FetchConfig(
            proxy=args.proxy, ca_bundle=Path(args.ca_bundle) if args.ca_bundle else None
        ),
        peer_token="bench",
        store=StoreConfig(bodies=BodyStore(args.bodies)),
    )
    figures: dict[str, Any] = {}
    handshakes = _count_handshakes()

    async def crawl() -> None:
        transport = None
        if args.child.endswith("-stock"):
            import httpx2  # httpx itself when aliased above

            limits = httpx2.Limits(
                max_connections=args.concurrency,
                max_keepalive_connections=args.concurrency,
                keepalive_expiry=15.0,
            )
            transport = httpx2.AsyncHTTPTransport(proxy=args.proxy, limits=limits)
        async with trio.open_nursery() as nursery:
            peer: Peer = await nursery.start(Peer(config, transport=transport).run)
            wall0, cpu0 = time.monotonic(), _cpu()
            peer.crawler.seed([args.seed_url])
            await peer.crawler.wait_idle()
            wall1, cpu1 = time.monotonic(), _cpu()
            stats = peer.crawler.stats
            figures.update(handshakes())
            figures.update(
                crawler=LABELS[args.child],
                pages_own=stats.pages + stats.errors,
                robots_requests=stats.robots_requests,
                errors=stats.errors,
                robots_disallowed=stats.robots_disallowed,
                crawl_wall=wall1 - wall0,
                crawl_cpu=cpu1 - cpu0,
                startup_cpu=cpu0,
            )
            peer.stop()
            await peer.crawler.stopped.wait()
        import httpx2

        figures["client"] = f"{httpx2.__name__} {httpx2.__version__}"

    if args.profile == "cprofile":
        import cProfile

        # CPU time, not wall time: waiting in epoll is not a cost.
        prof = cProfile.Profile(time.process_time)
        prof.enable()
        trio.run(crawl)
        prof.disable()
        prof.dump_stats(args.profile_out)
    else:
        settle_collector()  # as `ubipy peer` does
        trio.run(crawl)
    Path(args.result).write_text(json.dumps(figures))


def _count_handshakes() -> Callable[[], dict[str, float]]:
    """Count the TLS handshakes the peer makes, and how many resumed a session:
    what HTTPS costs over HTTP depends on it. Also time OpenSSL's own calls (the
    handshakes, and the reads and writes that decrypt and encrypt), in seconds of
    the thread's CPU: how much of HTTPS's cost is OpenSSL's, how much the rest
    (the tunnel, the handshake's flights, their waits). The timing adds about 1 us
    to each of those calls. Gives what reads the figures so far."""
    import ssl

    from ubipy.fetch import TlsStream

    counts: dict[str, float] = {"tls_handshakes": 0, "tls_resumed": 0}
    handshake = TlsStream.do_handshake

    async def counted(self: TlsStream) -> None:
        await handshake(self)
        counts["tls_handshakes"] += 1
        counts["tls_resumed"] += int(self.session_reused)

    TlsStream.do_handshake = counted  # type: ignore[method-assign]
    tallies: dict[str, list[float]] = {}
    for name in ("do_handshake", "read", "write"):
        tally = tallies[f"openssl_{name.removeprefix('do_')}_cpu"] = [0, 0.0]
        setattr(ssl.SSLObject, name, thread_cpu_timed(getattr(ssl.SSLObject, name), tally))
    return lambda: counts | {key: seconds for key, (_, seconds) in tallies.items()}


def thread_cpu_timed(fn: Callable[P, R], tally: list[float]) -> Callable[P, R]:
    """``fn``, counting its calls in ``tally[0]`` and the CPU time they take in
    ``tally[1]`` (seconds of the calling thread's: what it runs in C, OpenSSL or
    SQLite, included; other threads' and processes' not)."""

    @functools.wraps(fn)
    def timed(*args: P.args, **kwargs: P.kwargs) -> R:
        start = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            tally[0] += 1
            tally[1] += time.thread_time() - start

    return timed


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# -- profiles ------------------------------------------------------------------------

# (pattern, module) tried in order on a frame's text, "function (file:line)" or a C
# function "name (library)"; a frame matching none is "other".
_MODULES = (
    (r"\bhttpx2/|\bhttpcore2/", "httpx2/httpcore2"),
    (r"\bhttpx/|\bhttpcore/|\banyio/", "httpx/httpcore/anyio"),
    (r"\bh11/", "h11"),
    (r"\btrio/|\boutcome/|\bsniffio/|epoll", "trio"),
    (r"lxml|libxml2|etree", "lxml"),
    (r"sqlite|\bcursor\.c|\bconnection\.c|\bstatement\.c", "sqlite"),
    (r"zlib|libz\.", "zlib"),
    (r"\bubipy/", "ubipy"),
    (r"ada_url|\bada\b|libada", "ada-url"),
    (r"protego", "protego"),
    (r"xxhash", "xxhash"),
    (r"rbloom|ubipy/store/bloom", "bloom filter"),
    (r"socketmodule\.c|<method '(send|recv)\w*' of '_socket", "socket syscalls"),
    (r"gc_collect|\bgcmodule\.c", "garbage collector"),
)
_COMPILED = [(re.compile(p), name) for p, name in _MODULES]
_UBIPY = re.compile(r"\bubipy/([\w/]+)\.py")
OTHER = "other (interpreter, stdlib)"
_LINE = re.compile(r":\d+\)$")


def module_of(frame: str) -> str | None:
    """The module a frame belongs to; ubipy's own frames by file; None if unknown."""
    for regex, name in _COMPILED:
        if regex.search(frame):
            if name == "ubipy":
                m = _UBIPY.search(frame)
                return f"ubipy: {m.group(1)}" if m else name
            return name
    return None


def _format_profile(
    title: str, modules: dict[str, float], functions: dict[str, float], top: int, note: str
) -> str:
    total = sum(functions.values()) or 1e-9
    lines = [f"\n### {title}", "", note, "", "| module | share |", "|---|---:|"]
    for name, cost in sorted(modules.items(), key=lambda kv: -kv[1]):
        lines.append(f"| {name} | {100 * cost / total:.1f}% |")
    lines += ["", f"Top {top} functions by own time:", "", "| own | function |", "|---:|---|"]
    for where, cost in sorted(functions.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"| {100 * cost / total:.1f}% | `{where}` |")
    return "\n".join(lines)


def profile_report_cprofile(path: Path, top: int) -> str:
    import pstats

    st = pstats.Stats(str(path))
    raw: dict[tuple[str, int, str], tuple[Any, ...]] = st.stats  # type: ignore[attr-defined]
    functions: dict[str, float] = {}
    modules: dict[str, float] = {}
    for (filename, line, name), (_cc, _nc, tottime, _ct, _callers) in raw.items():
        where = f"{name} ({_short(filename)}:{line})" if filename != "~" else name
        functions[where] = functions.get(where, 0.0) + float(tottime)
        module = module_of(where) or OTHER
        modules[module] = modules.get(module, 0.0) + float(tottime)
    note = (
        "CPU time (time.process_time) spent in each function itself; C functions "
        "(sqlite, zlib, lxml, socket calls) are their own entries. cProfile's overhead "
        "inflates pure-Python code."
    )
    return _format_profile("cProfile, own CPU time", modules, functions, top, note)


def profile_report_pyspy(path: Path, top: int) -> str:
    """py-spy's raw format: `root;...;leaf COUNT` per line. A sample's function is its
    leaf; its module is the innermost frame that belongs to a known module, so a
    stdlib or libc helper counts for the library that called it."""
    functions: Counter[str] = Counter()
    modules: Counter[str] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        # py-spy names the line; a function's lines are summed.
        functions[_LINE.sub(")", frames[-1])] += int(count)
        module = next((m for f in reversed(frames) if (m := module_of(f))), OTHER)
        modules[module] += int(count)
    note = (
        "Samples of the running process (py-spy). Without --native, time in C code counts "
        "for the Python function that called it (zlib.compress and sqlite's COMMIT show "
        "as ubipy: store/shard); --native adds C frames but pauses the process at each "
        "sample, which slows it and inflates system calls. A sample counts for the "
        "innermost frame of a known module: a stdlib helper counts for its caller's."
    )
    return _format_profile(
        "py-spy, share of CPU samples",
        {k: float(v) for k, v in modules.items()},
        {k: float(v) for k, v in functions.items()},
        top,
        note,
    )


def _short(filename: str) -> str:
    for marker in ("site-packages/", "/ubipy/", "/lib/python3"):
        i = filename.find(marker)
        if i >= 0:
            return filename[i + len(marker) :] if marker != "/ubipy/" else filename[i + 1 :]
    return filename


# -- the report ----------------------------------------------------------------------


def table(runs: list[Run]) -> str:
    lines = [
        "| crawler | pages (server log) | pages (own) | wall s | pages/s | CPU s "
        "| CPU ms/page | peak RSS MB | server CPU s |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r.name} | {r.pages:,} | {int(r.own.get('pages_own', 0)):,} "
            f"| {r.crawl_wall:.1f} | {r.pages / max(r.crawl_wall, 1e-9):,.0f} "
            f"| {r.usage.cpu:.1f} | {1000 * r.usage.cpu / max(r.pages, 1):.2f} "
            f"| {r.usage.max_rss_mb:.0f} | {r.server.cpu:.1f} |"
        )
    return "\n".join(lines)


def details(runs: list[Run]) -> str:
    lines = [
        "",
        "| crawler | crawl CPU ms/page | start-up CPU s | robots.txt requests | distinct URLs "
        "| duplicates | missing | unexpected | robots violations | overlaps | connections |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        v = r.verdict
        crawl_cpu = float(r.own.get("crawl_cpu", 0.0))
        lines.append(
            f"| {r.name} | {1000 * crawl_cpu / max(r.pages, 1):.2f} "
            f"| {float(r.own.get('startup_cpu', 0.0)):.2f} | {v.robots} | {v.urls:,} "
            f"| {v.duplicates} | {v.missing} | {v.unexpected} | {v.robots_violations} "
            f"| {v.overlaps} | {'' if v.connections is None else v.connections} |"
        )
    return "\n".join(lines)


def ratio_lines(runs: list[Run]) -> list[str]:
    out = []
    by_name = {r.name: r for r in runs}
    plain, https = by_name.get(LABELS["ubipy"]), by_name.get(LABELS["ubipy-https"])
    shard = by_name.get(LABELS["ubipy-shard"])
    if plain is not None and shard is not None:
        ms = [_median_ms(runs, r.name, "crawl_cpu") for r in (plain, shard)]
        out.append(
            f"ubipy crawl CPU per page, bodies in WARC files / in the shard = "
            f"{ms[0] / max(ms[1], 1e-9):.2f} ({ms[0]:.2f} / {ms[1]:.2f} ms)"
        )
    if plain is not None and https is not None:
        # With --repeat, the median of each crawler's runs (they alternate, so a
        # busy spell of the machine weighs on both alike).
        ms = [_median_ms(runs, r.name, "cpu") for r in (https, plain)]
        crawl = [_median_ms(runs, r.name, "crawl_cpu") for r in (https, plain)]
        repeats = sum(r.name == https.name for r in runs)
        out.append(
            f"ubipy CPU per page over HTTPS / over HTTP = {ms[0] / max(ms[1], 1e-9):.2f} "
            f"({ms[0]:.2f} / {ms[1]:.2f} ms; crawl only {crawl[0]:.2f} / {crawl[1]:.2f} ms "
            f"= {crawl[0] / max(crawl[1], 1e-9):.2f})"
            + (f", medians of {repeats} runs each" if repeats > 1 else "")
        )
        if repeats > 2:
            # Each HTTPS run over the HTTP run beside it: how far one pair can be from
            # the medians' ratio on this machine.
            pairs = sorted(
                (a.usage.cpu / max(a.pages, 1)) / max(b.usage.cpu / max(b.pages, 1), 1e-9)
                for a, b in zip(
                    [r for r in runs if r.name == https.name],
                    [r for r in runs if r.name == plain.name],
                    strict=False,
                )
            )
            out.append(
                f"each HTTPS run over the HTTP run beside it: median "
                f"{_median(pairs):.2f}, from {pairs[0]:.2f} to {pairs[-1]:.2f}"
            )
        handshakes = int(https.own.get("tls_handshakes", 0))
        if handshakes:
            resumed = int(https.own.get("tls_resumed", 0))
            out.append(f"TLS handshakes: {handshakes:,}, {resumed:,} of them resumed")
            out.extend(_openssl_lines(runs, https.name, crawl[0] - crawl[1]))
    # Each crawler once (by_name keeps one run of each), its median with --repeat.
    for scrapy in by_name.values():
        if not scrapy.name.startswith("Scrapy"):
            continue
        theirs = "Scrapy's" if scrapy.name == LABELS["scrapy"] else f"{scrapy.name}'s"
        for r in by_name.values():
            if r.name.startswith("Scrapy"):
                continue
            ours = _median_ms(runs, r.name, "cpu")
            ratio = _median_ms(runs, scrapy.name, "cpu") / max(ours, 1e-9)
            who = "ubipy" if r.name == LABELS["ubipy"] else r.name
            out.append(f"{who} pages per CPU-second / {theirs} = {ratio:.2f}")
            mine, their = (_median_per_page(runs, x.name, "instructions") for x in (r, scrapy))
            if mine and their:
                out.append(
                    f"{who} pages per instruction / {theirs} = {their / mine:.2f} "
                    f"({mine:,.0f} / {their:,.0f} instructions a page, callgrind)"
                )
    return out


def _openssl_lines(runs: list[Run], name: str, over_http_ms: float) -> list[str]:
    """OpenSSL's own CPU in the HTTPS crawl, a page (medians with --repeat), against
    what HTTPS's crawl costs a page over HTTP's."""
    ms = {
        what: _median_ms(runs, name, f"openssl_{what}_cpu")
        for what in ("handshake", "read", "write")
    }
    total = sum(ms.values())
    if not total:
        return []  # a result from before the bench timed OpenSSL
    return [
        f"OpenSSL's own CPU a page over HTTPS: {total:.2f} ms (handshakes "
        f"{ms['handshake']:.2f}, reads {ms['read']:.2f}, writes {ms['write']:.2f}), "
        f"of the {over_http_ms:.2f} ms HTTPS's crawl costs a page over HTTP's"
    ]


def _median_ms(runs: list[Run], name: str, what: str) -> float:
    """The median over ``name``'s runs of CPU ms per page: the whole process's
    (``cpu``), or seconds the child reported (``crawl_cpu``, the crawl's alone;
    ``openssl_*_cpu``, OpenSSL's calls)."""
    return _median(
        1000 * (r.usage.cpu if what == "cpu" else float(r.own.get(what, 0.0))) / max(r.pages, 1)
        for r in runs
        if r.name == name
    )


def _median_per_page(runs: list[Run], name: str, what: str) -> float:
    """The median over ``name``'s runs of a count the child's run reported, a page
    (0 when none reported it)."""
    return _median(float(r.own.get(what, 0)) / max(r.pages, 1) for r in runs if r.name == name)


def _median(figures: Iterable[float]) -> float:
    values = sorted(figures)
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def reproduce(args: argparse.Namespace) -> str:
    cmd = [
        "python",
        "bench/speed.py",
        "--hosts",
        str(args.hosts),
        "--pages",
        str(args.pages),
        "--web-seed",
        str(args.web_seed),
        "--concurrency",
        str(args.concurrency),
        "--only",
        ",".join(args.only),
    ]
    if args.max_requests:
        cmd += ["--max-requests", str(args.max_requests)]
    if args.repeat > 1:
        cmd += ["--repeat", str(args.repeat)]
    if args.profile:
        cmd += ["--profile", args.profile]
    if args.native:
        cmd += ["--native"]
    if args.instructions:
        cmd += ["--instructions", "--timeout", f"{args.timeout:g}"]
    return shlex.join(cmd)


# -- main ----------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--hosts", type=int, default=200)
    p.add_argument("--pages", type=int, default=100, help="pages per host")
    p.add_argument("--web-seed", type=int, default=1, help="the synthetic web's seed")
    p.add_argument("--concurrency", type=int, default=64, help="global requests in flight")
    p.add_argument(
        "--only",
        default="ubipy,httpx,scrapy",
        help=f"comma-separated, from: {', '.join(CRAWLERS)}",
    )
    p.add_argument(
        "--profile",
        choices=("cprofile", "pyspy"),
        default=None,
        help="profile the ubipy children (their CPU figures are then not comparable)",
    )
    p.add_argument("--native", action="store_true", help="py-spy --native (C frames)")
    p.add_argument(
        "--instructions",
        action="store_true",
        help="run each crawler under valgrind's callgrind and report instructions a page: "
        "a count that repeats where CPU time does not, for comparing two versions "
        "(50-100x slower: use a small web and a larger --timeout)",
    )
    p.add_argument("--top", type=int, default=25, help="functions listed by --profile")
    p.add_argument(
        "--max-requests",
        type=int,
        default=None,
        metavar="N",
        help="the server closes each connection after N answers (default: never)",
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="run the crawlers N times, alternating; ratios from the medians",
    )
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per crawler")
    p.add_argument(
        "--bodies",
        choices=("warc", "shard"),
        default="warc",
        help="where ubipy keeps page bodies (its --bodies; default: warc)",
    )
    p.add_argument("--keep", type=Path, default=None, help="keep logs and shards here")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    # The child modes.
    p.add_argument("--child", choices=CRAWLERS, default=None, help=argparse.SUPPRESS)
    p.add_argument("--seed-url", help=argparse.SUPPRESS)
    p.add_argument("--proxy", help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--result", help=argparse.SUPPRESS)
    p.add_argument("--profile-out", help=argparse.SUPPRESS)
    p.add_argument("--ca-bundle", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.instructions and args.profile:
        p.error("--instructions and --profile do not go together")
    if args.child is None:
        args.only = [c.strip() for c in args.only.split(",") if c.strip()]
        bad = [c for c in args.only if c not in CRAWLERS]
        if bad:
            p.error(f"unknown crawler(s) {bad}; choose from {', '.join(CRAWLERS)}")
    return args


def schedule(names: list[str], repeat: int) -> list[tuple[int, str]]:
    """(round, crawler) in the order they run: every round runs each crawler once,
    every other round in the reverse order (A B, B A, ...), so that neither goes first
    after the pause between rounds every time (a machine that slows down after a pause
    would otherwise weigh on one side only)."""
    return [(n, name) for n in range(repeat) for name in (names if n % 2 == 0 else names[::-1])]


def compile_bytecode() -> None:
    """Compile ubipy's modules to bytecode before the runs, as an install has them
    (pip compiles what it installs; Scrapy's is). Run from a checkout where
    PYTHONDONTWRITEBYTECODE is set, every ubipy process would compile its modules
    again at start-up: 0.25 s of CPU counted against ubipy alone."""
    compileall.compile_dir(ROOT / "ubipy", quiet=1)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.child is not None:
        ubipy_child(args)
        return
    base = Path(tempfile.mkdtemp(prefix="ubipy-speed-")) if args.keep is None else args.keep
    base.mkdir(parents=True, exist_ok=True)
    print(
        f"synthetic web: {args.hosts} hosts x {args.pages} pages (seed {args.web_seed}); "
        f"concurrency {args.concurrency}, 1 per host, delay 0; {os.cpu_count()} CPUs",
        flush=True,
    )
    compile_bytecode()
    runs: list[Run] = []
    try:
        for round_, name in schedule(args.only, args.repeat):
            print(f"-- {LABELS[name]} ...", flush=True)
            try:
                run = run_crawler(name, args, base / f"run{round_}")
            except CrawlFailed as exc:
                print(f"   FAILED: {exc}", flush=True)
                continue
            print(
                f"   {run.pages:,} pages in {run.crawl_wall:.1f} s, CPU {run.usage.cpu:.1f} s, "
                f"peak RSS {run.usage.max_rss_mb:.0f} MB, "
                f"{run.usage.wakeups / max(run.pages, 1):.2f} wake-ups a page"
                + (
                    f", {run.own['instructions'] / max(run.pages, 1):,.0f} instructions a page"
                    if "instructions" in run.own
                    else ""
                )
                + (f" ({run.own['client']})" if "client" in run.own else ""),
                flush=True,
            )
            runs.append(run)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"logs, feeds and shards kept in {base}")
    print()
    print(table(runs))
    print(details(runs))
    print()
    for line in ratio_lines(runs):
        print(line)
    print()
    print(f"reproduce: {reproduce(args)}")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                [
                    {
                        "name": r.name,
                        "usage": r.usage.__dict__,
                        "server": r.server.__dict__,
                        "verdict": r.verdict.__dict__,
                        "own": r.own,
                    }
                    for r in runs
                ],
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
