"""``ubipy peer | seed | status | export | index | demo``: the command line.

This is the only place that turns flags (and a config file) into a
:class:`CrawlConfig`; the flags themselves are declared with the options, in
:mod:`ubipy.config`.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import trio

from ubipy import __version__
from ubipy.asking import ask, asking_options, say_paused, unreachable
from ubipy.checks import (
    OneLineParser,
    any_port_address,
    at_least,
    check_addresses,
    idle_options,
    output_path,
    path,
    peer_address,
    seconds,
    verbose_parent,
)
from ubipy.config import CrawlConfig
from ubipy.control import control_bind, serve_control_centre
from ubipy.errors import ConfigError, naming_address
from ubipy.exportwords import export_said
from ubipy.fetch import SeedList, SeedsFileError, parse_seeds
from ubipy.options import add_flags, build, flag_names, flags_given, read_file, sections
from ubipy.peer import Peer, settle_collector
from ubipy.peerexit import said_at_exit
from ubipy.progress import Progress, peer_figures
from ubipy.seedfiles import peer_seeds, read_seeds_file, say_problems, seed_summary, take_seeds
from ubipy.statustable import format_cluster
from ubipy.stdio import drop_stdout, to_devnull
from ubipy.store import ShardError
from ubipy.wire import Seed, SeedAck, Status, StatusRequest, batches, secret_from
from ubipy.wording import counted

log = logging.getLogger("ubipy")

_DEFAULTS = CrawlConfig()
# The crawl's own sections: the demo's flags (a peer has them all).
_CRAWL_SECTIONS = ("politeness", "bounds", "fetch")
# A demo should end soon: short delays, quick robots.txt retries.
_DEMO_DEFAULTS = {"politeness.delay": 0.05, "politeness.robots_retry_base": 0.2}


def _fail(command: str, message: str) -> NoReturn:
    """End as argparse does for a bad flag (status 2), on one line."""
    print(f"ubipy {command}: error: {message}", file=sys.stderr)
    raise SystemExit(2)


def _config(args: argparse.Namespace, defaults: Mapping[str, Any] | None = None) -> CrawlConfig:
    """The configuration from ``defaults`` (by dotted path), then the --config file,
    then $UBIPY_SECRET, then the flags given; a bad value ends the command, named as
    the user gave it."""
    values = dict(defaults or {})
    given_as: dict[str, str] = {}
    config_file: Path | None = getattr(args, "config", None)
    try:
        if config_file is not None:
            from_file = read_file(CrawlConfig, config_file)
            values.update(from_file)
            given_as.update({path: f"{config_file}: {path}" for path in from_file})
        if env := os.environ.get("UBIPY_SECRET"):
            values["secret"] = env
            given_as["secret"] = "$UBIPY_SECRET"
        flags = flags_given(args)
        if flags.get("secret") == "":
            del flags["secret"]  # no secret given: $UBIPY_SECRET's, or the file's
        values.update(flags)
        names = flag_names(CrawlConfig)
        given_as.update({path: names[path] for path in flags if path in names})
        if args.command == "peer" and "data_dir" not in values:
            _fail(
                args.command,
                "the following arguments are required: --data (or data_dir in --config's file)",
            )
        config = build(CrawlConfig, values)
        check_addresses(config)
        for path, needs in idle_options(config, given_as):
            said = f"{given_as[path]} has no effect without {needs}"
            print(f"ubipy {args.command}: warning: {said}", file=sys.stderr)
        return config
    except ConfigError as exc:
        if exc.option is None:
            _fail(args.command, str(exc))
        _fail(args.command, f"{given_as.get(exc.option, exc.option)} {exc.problem}")


#: Peers a demo may run, all in this process.
DEMO_PEERS = 16


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="ubipy", description="ubipy, a peer-to-peer distributed web crawler."
    )
    parser.add_argument("--version", action="version", version=f"ubipy {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log every fetch failure (default: off)"
    )
    verbose = verbose_parent()
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "peer",
        parents=[verbose],
        help="run a peer until SIGINT/SIGTERM/SIGHUP",
        description="Run a crawling peer. The first SIGINT, SIGTERM or SIGHUP (its terminal "
        "closed; not under nohup) stops it gracefully "
        "(requests in flight finish and are saved); a second one abandons them. Options "
        "come from the flags given, then the --config file, then the defaults.",
    )
    p.add_argument(
        "--config",
        type=path,
        default=None,
        metavar="FILE",
        help="read options from this TOML file: the peer's own at the top, a table for "
        "each group below ([politeness] delay = 0.5); flags given override it "
        "(default: none)",
    )
    p.add_argument(
        "--seeds",
        type=path,
        default=None,
        metavar="FILE",
        help="seed the peer from this file at start-up (default: none)",
    )
    add_flags(p, CrawlConfig, sections(CrawlConfig))

    s = sub.add_parser(
        "seed",
        parents=[verbose],
        help="send seed URLs to a running peer",
        description="Send the URLs of FILE (one a line, # comments) to a running peer. "
        "Bad lines are reported with their line numbers; the good ones are still sent.",
    )
    s.add_argument("file", type=path, help="the seeds file ('-' for standard input)")
    s.add_argument(
        "--peer",
        type=peer_address,
        default=_DEFAULTS.listen,
        metavar="ADDR",
        help="HOST:PORT of any peer; seeds are routed to their owners (default: %(default)s)",
    )
    asking_options(s)

    st = sub.add_parser("status", help="print a running peer's figures", parents=[verbose])
    st.add_argument(
        "--peer",
        type=peer_address,
        default=_DEFAULTS.listen,
        metavar="ADDR",
        help="HOST:PORT of any peer; it asks the others (default: %(default)s)",
    )
    asking_options(st)

    x = sub.add_parser(
        "export",
        parents=[verbose],
        help="write the pages of one or many shards to WARC or JSON Lines",
        description="Write the pages of one or many peers' shards, merged in fetch order, "
        "to a WARC file (request, response and metadata records per page) or JSON Lines "
        "(one object per page). Shards are read read-only, so a live peer's can be exported.",
    )
    x.add_argument(
        "--data",
        type=path,
        nargs="+",
        required=True,
        metavar="DIR",
        help="data directories of the peers whose shards to export",
    )
    x.add_argument("--format", choices=("warc", "jsonl"), help="default: what --out's name says")
    x.add_argument(
        "--out",
        type=output_path,
        required=True,
        metavar="PATH",
        help="output file, or - for standard output (a file named - is ./-). A new or "
        "regular file appears only once complete; a link is written through to what it "
        "points to; a device or FIFO is written in place. An existing directory is taken "
        "only by --format warc of peers that keep WARC files: their files are linked (or "
        "copied) into it, the pages kept in the shards written to ubipy-export.warc.gz "
        "there; otherwise it is refused",
    )
    x.add_argument(
        "--gzip",
        action="store_true",
        help="gzip-compress the output (per record for WARC); implied by an --out name "
        "ending in .gz, and the only way to compress standard output",
    )

    ix = sub.add_parser(
        "index",
        parents=[verbose],
        help="index the WARC files of one or many peers for pywb (CDXJ) or DuckDB (Parquet)",
        description="Index the closed WARC files in each DATA/warc/: a CDXJ file beside "
        "each (what pywb reads from a collection's index directory; one already newer "
        "than its WARC file is kept), or one Parquet file with Common Crawl's "
        "columnar-index columns. The files a peer is still writing are left out.",
    )
    ix.add_argument(
        "data", type=path, nargs="+", metavar="DATA", help="data directories of the peers"
    )
    ix.add_argument(
        "--format",
        choices=("cdxj", "parquet"),
        default=None,
        help="cdxj: beside each file; parquet: one file at -o, needs pyarrow "
        "(pip install 'ubipy[parquet]') (default: what -o's name says, .parquet or "
        ".cdxj, else cdxj)",
    )
    ix.add_argument(
        "-o",
        "--out",
        type=output_path,
        default=None,
        metavar="FILE",
        help="the Parquet file; with cdxj, every file's CDXJ merged into one sorted "
        "file too. Written as export writes (complete or not at all)",
    )
    ix.add_argument(
        "--force", action="store_true", help="rewrite every CDXJ, even those up to date"
    )
    ix.add_argument(
        "--include-open",
        action="store_true",
        help="with --format parquet only (refused with cdxj): add the whole records of "
        "the files being written, under their "
        "name while open (renamed when closed; cut back if the peer is killed before "
        "they are committed)",
    )

    d = sub.add_parser(
        "demo",
        parents=[verbose],
        help="crawl a synthetic web on loopback with a small cluster and show the progress",
        description="Start the synthetic web on loopback and a cluster of peers in this "
        "process (the first serves the control centre; the others join it), seed it, show "
        "live progress until the whole cluster is idle, then a summary and the referee's "
        "verdict.",
    )
    d.add_argument(
        "--hosts",
        type=at_least(1),
        default=20,
        help="hosts in the synthetic web (default: %(default)s)",
    )
    d.add_argument(
        "--pages", type=at_least(1), default=30, help="pages per host (default: %(default)s)"
    )
    d.add_argument(
        "--web-seed", type=int, default=0, help="seed of the web's generator (default: %(default)s)"
    )
    d.add_argument(
        "--peers",
        # All on this machine: a million was taken, started peer after peer until
        # killed, deaf to Ctrl-C (QA). A larger cluster is `ubipy peer` on each machine.
        type=at_least(1, DEMO_PEERS),
        default=3,
        metavar="N",
        help=f"peers in the cluster, at most {DEMO_PEERS} (default: %(default)s)",
    )
    d.add_argument(
        "--data",
        type=path,
        default=None,
        metavar="DIR",
        help="where to keep the shards, one directory per peer: a new or empty directory, "
        "or one an earlier demo made (it leaves a .ubipy-demo file there and removes only "
        "what it made; default: a new temporary directory)",
    )
    d.add_argument(
        "--listen",
        type=any_port_address,
        default="127.0.0.1:0",
        metavar="ADDR",
        help="the first peer's endpoint, loopback only; the others take any free port on "
        "its host (default: %(default)s, any free port)",
    )
    d.add_argument(
        "--control",
        type=any_port_address,
        default="127.0.0.1:0",
        metavar="ADDR",
        help="the control centre (dashboard) of the first peer, loopback only "
        "(default: %(default)s, any free port)",
    )
    d.add_argument(
        "--linger",
        type=seconds,
        default=0.0,
        metavar="SECONDS",
        help="keep the cluster and its dashboard up this long after the crawl; Ctrl-C "
        "ends it sooner (default: %(default)s)",
    )
    add_flags(d, CrawlConfig, _CRAWL_SECTIONS, _DEMO_DEFAULTS)
    for command in sub.choices.values():
        command.set_defaults(command_parser=command)  # to say main's errors (below)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said by the command's parser: "ubipy: error:" named no command (QA)
        args.command_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "peer":
            config = _config(args)
            settle_collector()
            return _or_cannot_start("peer", lambda: trio.run(_run_peer, args, config))
        if args.command == "seed":
            return _seed(args)
        if args.command == "status":
            return _status(args)
        if args.command in ("export", "index"):
            with _sigterm_as_interrupt():
                return _export(args) if args.command == "export" else _index(args)
        if args.command == "demo":
            from ubipy.demo import run_demo

            return _or_cannot_start(
                "demo", lambda: trio.run(run_demo, args, _config(args, _DEMO_DEFAULTS))
            )
    except ShardError as exc:
        print(f"ubipy: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # Its reader went away (`ubipy status | head`): no traceback (QA), and nothing
        # more written to the closed pipe at the interpreter's exit.
        drop_stdout()
        return 1
    except (KeyboardInterrupt, BaseExceptionGroup) as exc:
        # Ctrl-C before a command's own handler is in place (a peer loading its
        # --seeds, the demo): trio raises it out of its nurseries, in a group that
        # printed as a traceback of some fifty lines (QA). Anything else raised with
        # it is raised still (a review).
        if isinstance(exc, BaseExceptionGroup):
            interrupt, rest = exc.split(KeyboardInterrupt)
            if interrupt is None or rest is not None:
                raise
        print(f"ubipy {args.command}: interrupted", file=sys.stderr)
        return 130
    raise AssertionError(args.command)


async def _run_peer(args: argparse.Namespace, config: CrawlConfig) -> int:
    try:  # the seeds read first: a file not there was said once the peer had joined
        seeds = None if args.seeds is None else peer_seeds(args.seeds)
    except (OSError, SeedsFileError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else None
        print(f"ubipy peer: --seeds {args.seeds}: {why or exc}", file=sys.stderr)
        return 2
    try:
        if config.control.address is not None:
            control_bind(config.control.address, config.control.public, secret_from(config.secret))
        peer = Peer(config)
    except (ValueError, ShardError) as exc:
        print(f"ubipy peer: {exc}", file=sys.stderr)
        return 2
    return await _serve_peer(peer, args, seeds)


def _or_cannot_start(command: str, run: Callable[[], int]) -> int:
    """``run()``, or a line saying why it could not start: most often an address in
    use, for a peer or its control centre."""
    problem: BaseException | None = None
    try:
        return run()
    except* (OSError, ShardError) as group:  # a data directory too (the demo's peers')
        problem = group
    while isinstance(problem, BaseExceptionGroup):
        problem = problem.exceptions[0]
    print(f"ubipy {command}: cannot start: {problem}", file=sys.stderr)
    return 2


async def _serve_peer(peer: Peer, args: argparse.Namespace, seeds: SeedList | None) -> int:
    async with trio.open_nursery() as nursery:
        try:
            await nursery.start(peer.run)
        except* OSError as group:
            raise naming_address(group, "--listen", peer.config.listen) from None
        print(f"ubipy peer {peer.peer_id} listening on {peer.bound}", file=sys.stderr)
        # A mistyped --data read as a resume, the peer a new member under a new id (QA).
        where = peer.config.data_dir.resolve()
        print(f"{'a new data directory' if peer.new else 'its data'}: {where}", file=sys.stderr)
        if not peer.config.recrawl.recrawl and (due := peer.shard.refresh_planned()):
            log.warning("%s kept fresh by --recrawl: none asked without it", counted(due, "page"))
        if peer.address != peer.bound:
            print(f"advertised to the cluster as {peer.address}", file=sys.stderr)
        control = peer.config.control
        if control.address is not None:
            serve = functools.partial(serve_control_centre, public=control.public)
            try:
                bound = await nursery.start(serve, peer, control.address)
            except* OSError as group:
                peer.start_failed()
                raise naming_address(group, "--control", control.address) from None
            print(f"control centre on http://{bound}/", file=sys.stderr)
        if seeds is not None:
            retry = peer.config.store.storage_retry
            nursery.start_soon(take_seeds, peer.crawler.seed, retry, args.seeds, seeds)
        # A live line on a terminal, a log line every 10 s elsewhere; it ends with
        # the peer (its last figures, and the terminal's line ended).
        progress = Progress(sys.stderr, interval=10.0)
        nursery.start_soon(_stop_on_signals, peer, nursery.cancel_scope, progress)
        nursery.start_soon(progress.run, functools.partial(peer_figures, [peer]))
        # The peer's run ends after the crawler stops and the leave (and its
        # hand-off) is done; only then does the signal watcher go.
        await peer.finished.wait()
        nursery.cancel_scope.cancel()
    lines, status = said_at_exit(peer)
    for line in lines:
        print(line, file=sys.stderr)
    return status


async def _stop_on_signals(peer: Peer, scope: trio.CancelScope, progress: Progress) -> None:
    # SIGHUP (the terminal or the ssh session closed) stops it as SIGTERM does: it
    # killed the peer outright, with no leave (QA). Not under nohup, which ignores it
    # for the peer to outlive the session (a handler would undo that: a review).
    wanted = [signal.SIGINT, signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        wanted.append(signal.SIGHUP)
    # Asked now: once the terminal has hung up, isatty() fails on it too.
    ttys = [fd for fd in (1, 2) if os.isatty(fd)]
    with trio.open_signal_receiver(*wanted) as signals:
        async for signum in signals:
            if signum == signal.SIGHUP:
                # The terminal is gone: each write to it fails (EIO) and would break the
                # leave asked for. What went to it goes nowhere now (a file or pipe stays).
                with contextlib.suppress(OSError):
                    to_devnull(ttys)
            with contextlib.suppress(OSError):
                progress.clear()  # on a terminal, the line was written on the progress line
            if not peer.crawler.stopped.is_set() and not peer.stopping:
                _say("stopping: letting requests in flight finish…")
                peer.stop()
            else:
                _say("stopping now: abandoning requests in flight")
                scope.cancel()
                return


def _say(line: str) -> None:
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr)


def _seed(args: argparse.Namespace) -> int:
    try:
        data = read_seeds_file(args.file)
    except OSError as exc:
        print(f"ubipy seed: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    except SeedsFileError as exc:
        print(f"ubipy seed: {args.file}: {exc}", file=sys.stderr)
        return 2
    seeds = parse_seeds(data)
    say_problems(args.file, seeds)
    if not seeds.urls:
        print(f"ubipy seed: no usable URL in {args.file}", file=sys.stderr)
        return 1
    # In frames far under the cap, each admitted (durably) before the next is sent.
    sent = admitted = forwarded = 0
    refused: list[tuple[str, str]] = []
    for batch in batches(seeds.urls):
        taken = f" ({sent} of {counted(len(seeds.urls), 'seed')} were taken)" if sent else ""
        try:
            answer = ask(args, Seed(batch), SeedAck)
        except OSError as exc:
            print(f"ubipy seed: {unreachable(args, exc)}{taken}", file=sys.stderr)
            return 2
        if answer.error is not None:
            print(f"ubipy seed: the peer refused the seeds: {answer.error}{taken}", file=sys.stderr)
            return 2
        sent += len(batch)
        admitted += answer.admitted
        forwarded += answer.forwarded
        refused += answer.refused
    for url, reason in refused:
        print(f"{args.file}: refused by the peer ({reason}): {url[:80]!r}", file=sys.stderr)
    print(seed_summary(args.peer, seeds, sent, admitted, forwarded, refused))
    say_paused(args)
    return 1 if seeds.skipped or refused else 0


def _status(args: argparse.Namespace) -> int:
    try:
        report = ask(args, StatusRequest(cluster=True), Status)
    except OSError as exc:
        print(f"ubipy status: {unreachable(args, exc)}", file=sys.stderr)
        return 2
    print(format_cluster(report.to_wire()))
    return 0


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (timeout, systemd) taken as Ctrl-C while the block runs: an export left
    its partial .part file (QA). Where signals can be set (the main thread), and the
    handler before put back (a review)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def _export(args: argparse.Namespace) -> int:
    from ubipy.store import ExportError, ExportWriteError, export, format_of

    to_stdout = str(args.out) == "-"
    try:
        summary = export(
            args.data,
            args.format,
            sys.stdout.buffer if to_stdout else args.out,
            gzipped=True if args.gzip else None,
        )
    except ExportWriteError as exc:
        print(f"ubipy export: {exc}", file=sys.stderr)
        if to_stdout:
            drop_stdout()
        return 1
    except ExportError as exc:
        print(f"ubipy export: {exc}", file=sys.stderr)
        return 2

    unit = "WARC record" if (args.format or format_of(args.out)) == "warc" else "JSON line"
    where = "standard output" if to_stdout else str(args.out)
    print(f"ubipy export: {export_said(summary, unit, where)}", file=sys.stderr)
    return 0


def _index(args: argparse.Namespace) -> int:
    from ubipy.store import ExportError, ExportWriteError, describe_index, index_data, index_format

    try:
        fmt = index_format(args.format, args.out)
        summary = index_data(
            args.data, fmt, args.out, force=args.force, include_open=args.include_open
        )
    except ExportWriteError as exc:
        print(f"ubipy index: {exc}", file=sys.stderr)
        return 1
    except ExportError as exc:
        print(f"ubipy index: {exc}", file=sys.stderr)
        return 2
    for line in describe_index(summary, fmt, args.out):
        print(f"ubipy index: {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
