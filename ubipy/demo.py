"""``ubipy demo``: the synthetic web on loopback, a small cluster crawling it, live
progress, the dashboard's address, and the referee's verdict at the end.

Every peer runs in this process, in one trio run: the first serves the control
centre, the others join it with a secret made for the run. The crawl is seeded once
the ring has settled (every peer sees every other alive), so no host changes hands
during it, and it is over when the whole cluster is idle.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import re
import secrets
import shutil
import signal
import stat
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio

from ubipy.config import ControlConfig, CrawlConfig
from ubipy.control import control_bind, serve_control_centre
from ubipy.errors import ShardError, UbipyError, naming_address
from ubipy.net import is_loopback, split_address
from ubipy.peer import Peer, PeerStatus
from ubipy.progress import Progress, peer_figures
from ubipy.store import LOCK_FILE, SHARD_FILES, WARC_DIR, DataLock
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth, serve

# The ring must settle before the seed goes in; on loopback it takes well under a second.
_JOIN_PATIENCE = 30.0
# The cluster is idle when it is seen idle twice this far apart with nothing done between.
_SETTLE = 0.25
# Plain progress lines (not on a terminal) this often: a demo is short.
_LOG_INTERVAL = 2.0


# Left in the demo's --data directory: the entries named in it are the demo's to remove.
MARKER = ".ubipy-demo"
_MARKER_HEAD = (
    "# made by `ubipy demo`: when it runs here again, it removes the entries below "
    "and nothing else\n"
)
_MADE = re.compile(r"peer[0-9]+")  # the only names the demo makes, whatever a marker says


class DemoDirError(UbipyError, ValueError):
    """The demo's --data is not a directory, or holds what the demo did not make there."""


def prepare_data_dir(path: Path | None, peers: int) -> Path:
    """The directory where the demo keeps ``peer1`` ... ``peerN``, made ready for them.

    ``path`` must not exist, be empty, or hold the marker an earlier demo left there:
    then only what that marker names is removed, so nothing of the user's is ever
    deleted. ``None`` is a new temporary directory. The marker names this run's
    directories before any is made. Raises :class:`DemoDirError` (one line) otherwise.
    """
    names = [f"peer{i + 1}" for i in range(peers)]
    if path is None:
        path = Path(tempfile.mkdtemp(prefix="ubipy-demo-"))
    try:
        if not path.exists():
            path.mkdir(parents=True)
        elif not path.is_dir():
            raise DemoDirError(
                f"{path}: not a directory (--data is where the demo keeps its shards)"
            )
        elif any(path.iterdir()):
            _clear(path, names)
        (path / MARKER).write_text(_MARKER_HEAD + "".join(f"{name}\n" for name in names))
    except OSError as exc:
        raise DemoDirError(f"{path}: {exc.strerror or exc}") from exc
    return path


def _clear(path: Path, names: list[str]) -> None:
    """Remove what an earlier demo made in ``path``, after checking that it can all go
    and that this run's names are free: a refusal leaves everything as it was."""
    marker = path / MARKER
    if marker.is_symlink() or not marker.is_file():
        raise DemoDirError(
            f"{path}: not empty, and no earlier demo made it (no {MARKER} in it); "
            "name a new or empty directory"
        )
    lines = marker.read_text(encoding="utf-8", errors="replace").splitlines()
    made = [line for line in lines if _MADE.fullmatch(line)]
    for name in [*made, *names]:
        entry = path / name
        try:
            mode = entry.lstat().st_mode
        except FileNotFoundError:
            continue
        if name not in made:
            raise DemoDirError(f"{entry}: already there, and not made by the demo; move it away")
        if not stat.S_ISDIR(mode):
            raise DemoDirError(f"{entry}: not the directory the demo made there; move it away")
    # A demo still running there (lingering, or in another terminal) holds its peers'
    # directories: they were deleted under it, shard, WAL and WARCs open.
    held: list[DataLock] = []
    try:
        for name in made:
            if (path / name / LOCK_FILE).is_file():
                try:
                    held.append(DataLock.take(path / name, "ubipy demo, clearing"))
                except ShardError as exc:
                    raise DemoDirError(f"{exc}; stop the demo that runs there first") from None
        for name in made:
            # An export written there, notes: they went with the peer's files (QA).
            # Once the locks are held: a running demo is said as such (a review).
            if (path / name).is_dir() and (theirs := _not_the_peer_s(path / name)) is not None:
                raise DemoDirError(f"{theirs}: not made by the demo; move it away")
        for name in made:
            with contextlib.suppress(FileNotFoundError):
                shutil.rmtree(path / name)
    finally:
        for lock in held:
            lock.release()


async def _interrupted_by_sigterm() -> None:
    """SIGTERM (timeout, systemd, a cancelled CI job) ends the demo as Ctrl-C does,
    saying where its data is: it ended it without a word (QA). Its linger's own
    receiver takes SIGTERM as the end of the linger."""
    with trio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            raise KeyboardInterrupt


def _not_the_peer_s(peer_dir: Path) -> Path | None:
    """The first thing in a demo peer's directory that is not one of the peer's files
    (its lock, its shard, its WARC files and their indexes, the hidden index lines of a
    file being written, which a kill leaves: a review), if any."""
    own = {LOCK_FILE, *SHARD_FILES}
    for entry in peer_dir.iterdir():
        if entry.name in own and entry.is_file() and not entry.is_symlink():
            continue
        if entry.name == WARC_DIR and entry.is_dir() and not entry.is_symlink():
            for f in entry.iterdir():
                ours = f.name.startswith(("ubipy-", ".ubipy-"))
                if not (ours and f.is_file() and not f.is_symlink()):
                    return f
            continue
        return entry
    return None


async def run_demo(args: argparse.Namespace, base: CrawlConfig) -> int:
    """Run the demo with ``base`` for every peer but where it keeps its data, where it
    listens, its secret and the proxy (the synthetic web's)."""
    for flag, address in (("--listen", args.listen), ("--control", args.control)):
        if address is not None and not is_loopback(split_address(address)[0].lower()):
            # 0.0.0.0 bound every interface, where `ubipy peer` asks for --advertise;
            # --control's refusal named --control-public, which the demo has not (QA).
            print(f"ubipy demo: {flag}: the demo listens on loopback only, not {address}",
                  file=sys.stderr)  # fmt: skip
            return 2
    try:
        data_dir = prepare_data_dir(args.data, args.peers)
    except DemoDirError as exc:
        print(f"ubipy demo: {exc}", file=sys.stderr)
        return 2
    try:
        code = await _demo(args, base, data_dir)
    except* OSError:  # it could not start (an address in use): said by the caller
        _forget(args, data_dir)
        raise
    except* KeyboardInterrupt:  # kept: it may be looked at (the caller says it was)
        print(f"ubipy demo: its peers' data is in {data_dir}", file=sys.stderr)
        raise
    if code != 0:
        _forget(args, data_dir)
    return code


def _forget(args: argparse.Namespace, data_dir: Path) -> None:
    """A demo refused at start leaves no directory it made for itself (a --data one
    stays, marked, as the user named it)."""
    if args.data is None:
        shutil.rmtree(data_dir, ignore_errors=True)


async def _demo(args: argparse.Namespace, base: CrawlConfig, data_dir: Path) -> int:
    out = sys.stdout
    web = SyntheticWeb(WebSpec(seed=args.web_seed, hosts=args.hosts, pages_per_host=args.pages))
    secret = secrets.token_urlsafe(16)
    host, _ = split_address(args.listen)

    def config(index: int, proxy: str, **fields: Any) -> CrawlConfig:
        return dataclasses.replace(
            base,
            data_dir=data_dir / f"peer{index + 1}",
            secret=secret,
            fetch=dataclasses.replace(base.fetch, proxy=proxy),
            # Every name is the synthetic web's, behind its own proxy on loopback: the
            # warning that a proxy's names are not checked was said once a peer, of a
            # --proxy the user never gave (a review).
            dns=dataclasses.replace(base.dns, allow_private=True),
            **fields,
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(_interrupted_by_sigterm)
        server = await nursery.start(serve, web)
        try:
            first = Peer(
                config(
                    0,
                    server.proxy_url,
                    listen=args.listen,
                    control=ControlConfig(address=args.control),
                )
            )
            if args.control is not None:
                control_bind(args.control, False, first.secret)
        except ValueError as exc:
            print(f"ubipy demo: {exc}", file=sys.stderr)
            nursery.cancel_scope.cancel()
            return 2
        try:
            peers: list[Peer] = [await nursery.start(first.run)]
        except* OSError as group:  # said with no address (QA), where `ubipy peer` names it
            raise naming_address(group, "--listen", args.listen) from None
        control: str | None = None
        if first.config.control.address is not None:
            address = first.config.control.address
            try:
                control = await nursery.start(serve_control_centre, first, address)
            except* OSError as group:
                raise naming_address(group, "--control", address) from None
        for i in range(1, args.peers):
            cfg = config(i, server.proxy_url, listen=f"{host}:0", join=(first.address,))
            peers.append(await nursery.start(Peer(cfg).run))
        delay = first.config.politeness.delay
        print(
            f"synthetic web: {args.hosts} hosts x {args.pages} pages on {server.proxy_url}; "
            f"{len(peers)} peers, delay {delay} s",
            file=out,
        )
        for i, peer in enumerate(peers):
            role = "control centre" if i == 0 else f"joined {first.peer_id}"
            print(f"peer {peer.peer_id} on {peer.address} ({role})", file=out)
        with trio.move_on_after(_JOIN_PATIENCE) as joining:
            await _ring_settled(peers)
        if joining.cancelled_caught:
            print("ubipy demo: the peers did not all see each other; crawling anyway", file=out)
        if control is not None:
            print(f"dashboard: http://{control}/", file=out)
        print(f"secret: {secret} (the bearer token for POST /api/seed and /api/stop)", file=out)
        out.flush()

        seed = web.seed_url()
        seeded = await first.seed([seed])
        if seeded.error is not None:
            print(f"ubipy demo: the seed was refused: {seeded.error}", file=sys.stderr)
        started = trio.current_time()
        progress = Progress(out, interval=_LOG_INTERVAL, label="crawling")
        async with trio.open_nursery() as watch:
            watch.start_soon(progress.run, functools.partial(peer_figures, peers))
            idle_at = await cluster_idle(peers)
            watch.cancel_scope.cancel()
        elapsed = idle_at - started
        statuses = [p.status() for p in peers]
        with trio.fail_after(10):
            await server.wait_idle()  # every request of the crawl is in the log
        verdict = _verdict(web, server.log, seed, first.config)

        lines = [
            _summary(statuses, elapsed),
            f"referee: {verdict}",
            "data: " + " ".join(str(data_dir / f"peer{i + 1}") for i in range(len(peers))),
        ]
        if args.linger > 0 and control is not None:
            lines.append(
                f"the dashboard stays up {args.linger:g} s on http://{control}/ "
                "(Ctrl-C ends it sooner)"
            )
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            print("\n".join(lines), file=out, flush=True)
            with trio.move_on_after(max(args.linger, 0.0)):
                async for _ in signals:
                    break
        for peer in peers:
            peer.stop()
        for peer in peers:
            await peer.finished.wait()
        nursery.cancel_scope.cancel()
    return 0


async def _ring_settled(peers: Sequence[Peer]) -> None:
    """Wait until every peer sees every peer alive (gossip has no event to wait on)."""
    ids = frozenset(p.peer_id for p in peers)
    while True:
        if all(p.membership.alive_ids() == ids for p in peers):
            return
        await trio.sleep(0.05)


def _quiet(peers: Sequence[Peer]) -> tuple[int, ...] | None:
    """What the cluster has done so far, if every peer is quiet now: nothing queued,
    parked or in flight, and nothing forwarded that its owner has not acknowledged
    (an owner admits a batch before it acknowledges it). None while any is busy."""
    done: list[int] = []
    for peer in peers:
        st = peer.status()
        if not st.idle or st.pending or st.in_flight or st.forward_backlog or st.storage_error:
            return None
        done += (st.pages, st.errors, st.forwarded_urls)
    return tuple(done)


async def cluster_idle(peers: Sequence[Peer], settle: float = _SETTLE) -> float:
    """Wait until the whole cluster is idle; return when it was first seen so.

    All peers are looked at in one go (no await between them), so they are idle at
    the same instant; then once more ``settle`` seconds later, with nothing done
    meanwhile. That covers what a peer's status does not show: a page fetched but
    not yet saved, whose links would be admitted or forwarded at the next commit
    (every 50 ms), and a forwarded batch read by its owner but not yet acknowledged.
    """
    while True:
        for peer in peers:
            await peer.crawler.wait_idle()  # each one idle and saved at least once
        seen = _quiet(peers)
        if seen is None:
            await trio.sleep(0.05)
            continue
        at = trio.current_time()
        await trio.sleep(settle)
        if _quiet(peers) == seen:
            return at


def _summary(statuses: Sequence[PeerStatus], elapsed: float) -> str:
    pages = sum(s.pages for s in statuses)
    split = (
        f" ({' + '.join(str(s.pages) for s in statuses)} by {len(statuses)} peers)"
        if len(statuses) > 1
        else ""
    )
    return (
        f"crawled {pages} pages{split} from {sum(s.hosts for s in statuses)} hosts in "
        f"{elapsed:.1f} s ({pages / max(elapsed, 1e-9):.0f} pages/s); "
        f"{sum(s.errors for s in statuses)} errors, "
        f"{sum(s.robots_disallowed for s in statuses)} URLs barred by robots.txt"
    )


def _verdict(web: SyntheticWeb, log: Any, seed: str, config: CrawlConfig) -> str:
    """The referee's word on the crawl, its truth cut by the flags the demo took (a
    coverage of 29% under --max-pages-per-host 5, and 3 URLs "unexpected" under --scope
    host that the README says are read: QA)."""
    referee = Referee(log, web)
    bounds = config.bounds
    include = [re.compile(p) for p in bounds.include]
    exclude = [re.compile(p) for p in bounds.exclude]

    def kept(url: str) -> bool:
        return (not include or any(p.search(url) for p in include)) and not any(
            p.search(url) for p in exclude
        )

    truth = ground_truth(
        web,
        [seed],
        max_depth=bounds.max_depth,
        scope=bounds.scope.value,
        sitemaps=bounds.sitemaps,
        max_path_repeats=bounds.max_path_repeats,
        robots_attempts=config.politeness.robots_max_attempts,
        keep=kept if include or exclude else None,
    )
    budget = bounds.max_pages_per_host
    if budget is None:
        fetched = len(truth) - len(referee.missing(truth))
        coverage = f"coverage {fetched}/{len(truth)} ({100 * fetched / max(len(truth), 1):.0f}%)"
    else:  # which pages a host's budget buys is the crawl order's
        coverage = f"{len(referee.over_budget(budget))} hosts over --max-pages-per-host"
    gaps = referee.short_gaps(config.politeness.delay)
    return (
        f"{coverage}, "
        f"{len(referee.unexpected(truth))} unexpected, {len(referee.duplicates())} duplicate "
        f"fetches, {len(referee.robots_violations())} robots violations, "
        f"{len(referee.overlaps())} overlaps, {len(gaps)} short gaps"
    )
