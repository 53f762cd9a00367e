"""`python -m ubipy.synthweb`: serve a synthetic web until SIGINT/SIGTERM, then write the log."""

from __future__ import annotations

import argparse
import functools
import signal
import ssl
import sys
import time
from collections.abc import Callable

import trio

from ubipy.synthweb.model import SyntheticWeb
from ubipy.synthweb.server import SynthServer, serve
from ubipy.synthweb.spec import WebSpec

_PROG = "python -m ubipy.synthweb"


def _in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from ``low`` to ``high``."""

    def number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {low} to {high}, not {value}")
        return value

    return number


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=_PROG, description=__doc__)
    d = WebSpec()
    # Out of range, a port was taken modulo 65536 and a host count of 0 a traceback (QA).
    p.add_argument(
        "--hosts", type=_in(1, 1_000_000), default=d.hosts, help="hosts (default: %(default)s)"
    )
    p.add_argument(
        "--pages",
        type=_in(1, 1_000_000),
        default=d.pages_per_host,
        help="pages per host (default: %(default)s)",
    )
    p.add_argument(
        "--seed", type=int, default=d.seed, help="the web's shape and links (default: %(default)s)"
    )
    p.add_argument(
        "--port", type=_in(0, 65535), default=0, help="port to listen on (default: 0, any free)"
    )
    p.add_argument("--bind", default="127.0.0.1", help="a loopback address (default: %(default)s)")

    def seconds(flag: str, default: float, what: str) -> None:
        p.add_argument(flag, type=float, default=default, help=f"{what} (default: %(default)s)")

    seconds("--latency", d.latency, "seconds added before every response")
    seconds("--jitter", d.jitter, "plus up to this many, the same for a request each time")
    seconds("--crawl-delay", d.crawl_delay, "the Crawl-delay that host h004's robots.txt gives")
    p.add_argument("--hostile", action="store_true", help="add the x-* hosts (traps, faults)")
    p.add_argument(
        "--paced",
        action="store_true",
        help="add the pace-* hosts: one fast, one slow (0.2-0.4 s), one answering 503 for "
        "--unavailable-for seconds",
    )
    seconds(
        "--unavailable-for", d.unavailable_for, "seconds pace-busy answers 503 from its first page"
    )
    p.add_argument(
        "--encodings",
        action="store_true",
        help="add the enc-* hosts (GBK, Big5, Shift_JIS, EUC-KR, windows-1251) and an IDN host",
    )
    p.add_argument(
        "--ranked",
        action="store_true",
        help="the ranked web: Zipf host sizes (--hosts x --pages pages in all), links "
        "with heavy-tailed in-degrees, no special cases",
    )
    p.add_argument(
        "--changing",
        action="store_true",
        help="pages change as Poisson processes (ETag, Last-Modified, 304s); the server's "
        "clock, which they and the log run on, counts seconds from its start",
    )
    p.add_argument("--log", default=None, help="write the request log here (JSON Lines)")
    p.add_argument(
        "--tls-cert",
        default=None,
        metavar="PEM",
        help="serve HTTPS too (CONNECT host:443), with this certificate chain and its key "
        "(for *.synth.test; see --tls-key)",
    )
    p.add_argument("--tls-key", default=None, metavar="PEM", help="the key of --tls-cert")
    p.add_argument(
        "--max-requests",
        type=int,
        default=None,
        metavar="N",
        help="close each connection after N answers (default: keep-alive without limit)",
    )
    p.add_argument(
        "--progress",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="print 'progress REQUESTS WALL_TIME' every SECONDS (default: never)",
    )
    return p.parse_args(argv)


async def run(args: argparse.Namespace) -> None:
    spec = WebSpec(
        seed=args.seed,
        hosts=args.hosts,
        pages_per_host=args.pages,
        latency=args.latency,
        jitter=args.jitter,
        crawl_delay=args.crawl_delay,
        hostile=args.hostile,
        paced=args.paced,
        unavailable_for=args.unavailable_for,
        encodings=args.encodings,
        ranked=args.ranked,
        changing=args.changing,
    )
    web = SyntheticWeb(spec)
    # Receive signals as messages so the log is written by ordinary code, not in a handler.
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            tls = None
            if args.tls_cert:
                tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                try:
                    tls.load_cert_chain(args.tls_cert, args.tls_key)
                except (OSError, ssl.SSLError) as exc:
                    why = exc.strerror if isinstance(exc, OSError) else None
                    raise ValueError(f"--tls-cert {args.tls_cert}: {why or exc}") from None
            server: SynthServer = await nursery.start(
                functools.partial(
                    serve,
                    web,
                    host=args.bind,
                    port=args.port,
                    tls=tls,
                    max_requests=args.max_requests,
                )
            )
            print(f"proxy {server.proxy_url}", flush=True)
            print(f"seed {web.seed_url()}", flush=True)
            if args.progress > 0:
                nursery.start_soon(_progress, server, args.progress)
            async for _ in signals:
                break
            nursery.cancel_scope.cancel()
    if args.log:
        server.log.to_jsonl(args.log)
        print(f"log {args.log} ({len(server.log)} requests)", file=sys.stderr, flush=True)


async def _progress(server: SynthServer, every: float) -> None:
    """How many requests so far, for a harness that watches a crawl from outside."""
    while True:
        await trio.sleep(every)
        print(f"progress {len(server.log)} {time.time():.3f}", flush=True)


class SinceStart(trio.abc.Clock):
    """Trio's clock as seconds since the server started (trio's own has an arbitrary
    origin), so the changing web's time 0 is the server's start and a log's `start`
    times read as seconds into the run."""

    def __init__(self) -> None:
        self._origin = time.perf_counter()

    def start_clock(self) -> None:
        self._origin = time.perf_counter()

    def current_time(self) -> float:
        return time.perf_counter() - self._origin

    def deadline_to_sleep_time(self, deadline: float) -> float:
        return deadline - self.current_time()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    problem: BaseException | None = None
    try:
        if args.log:  # not only at the end, once the whole session's log is made (QA)
            with open(args.log, "w"):
                pass
        trio.run(run, args, clock=SinceStart() if args.changing else None)
        return
    except* (OSError, ValueError) as group:  # an address in use, a certificate not there
        problem = group
    while isinstance(problem, BaseExceptionGroup):
        problem = problem.exceptions[0]
    print(f"{_PROG}: cannot start: {problem}", file=sys.stderr)
    raise SystemExit(2)


if __name__ == "__main__":
    main()
