"""``ubipy demo``: the synthetic web on loopback, one peer crawling it, live progress,
and the referee's verdict at the end."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import trio

from ubipy.config import CrawlConfig
from ubipy.peer.peer import Peer
from ubipy.synthweb.model import SyntheticWeb, WebSpec
from ubipy.synthweb.referee import Referee
from ubipy.synthweb.server import serve
from ubipy.synthweb.truth import ground_truth

ConfigBuilder = Callable[..., CrawlConfig]


def _data_dir(path: Path | None) -> Path:
    if path is None:
        return Path(tempfile.mkdtemp(prefix="ubipy-demo-"))
    if path.exists():
        shutil.rmtree(path)
    return path


class Progress:
    """A live line on a terminal, plain log lines elsewhere."""

    def __init__(self, out: TextIO) -> None:
        self._out = out
        self._tty = out.isatty()
        self._ticks = 0

    def show(self, peer: Peer) -> None:
        st = peer.status()
        line = (
            f"{st.pages:6d} pages  {st.pages_per_second:7.1f} pages/s  "
            f"frontier {st.pending:6d}  in flight {st.in_flight:3d}  errors {st.errors}"
        )
        self._ticks += 1
        if self._tty:
            self._out.write("\r" + line)
            self._out.flush()
        elif self._ticks % 4 == 1:
            print(line, file=self._out)

    def end(self) -> None:
        if self._tty:
            self._out.write("\n")


async def run_demo(args: argparse.Namespace, make_config: ConfigBuilder) -> int:
    out = sys.stdout
    web = SyntheticWeb(WebSpec(seed=args.web_seed, hosts=args.hosts, pages_per_host=args.pages))
    data_dir = _data_dir(args.data)
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        config = make_config(
            args,
            data_dir=data_dir,
            listen=args.listen,
            proxy=server.proxy_url,
        )
        peer: Peer = await nursery.start(Peer(config).run)
        print(
            f"synthetic web: {args.hosts} hosts x {args.pages} pages on {server.proxy_url}; "
            f"peer {peer.peer_id} on {peer.address}, delay {config.delay} s",
            file=out,
        )
        seed = web.seed_url()
        peer.crawler.seed([seed])
        started = trio.current_time()
        progress = Progress(out)
        async with trio.open_nursery() as watch:
            watch.start_soon(_tick, progress, peer)
            await peer.crawler.wait_idle()
            watch.cancel_scope.cancel()
        progress.show(peer)
        progress.end()
        elapsed = trio.current_time() - started
        status = peer.status()
        peer.stop()
        await peer.crawler.stopped.wait()
        nursery.cancel_scope.cancel()
    verdict = _verdict(web, server.log, seed, config)
    print(
        f"crawled {status.pages} pages from {status.hosts} hosts in {elapsed:.1f} s "
        f"({status.pages / max(elapsed, 1e-9):.0f} pages/s); {status.errors} errors, "
        f"{status.robots_disallowed} URLs barred by robots.txt",
        file=out,
    )
    print(f"referee: {verdict}", file=out)
    print(f"shard: {data_dir / 'shard.sqlite3'}", file=out)
    return 0


def _verdict(web: SyntheticWeb, log: Any, seed: str, config: CrawlConfig) -> str:
    referee = Referee(log, web)
    truth = ground_truth(web, [seed], max_depth=config.max_depth, scope=config.scope.value)
    missing = referee.missing(truth)
    fetched = len(truth) - len(missing)
    return (
        f"coverage {fetched}/{len(truth)} ({100 * fetched / max(len(truth), 1):.0f}%), "
        f"{len(referee.unexpected(truth))} unexpected, {len(referee.duplicates())} duplicate "
        f"fetches, {len(referee.robots_violations())} robots violations, "
        f"{len(referee.overlaps())} overlaps, {len(referee.short_gaps(config.delay))} short gaps"
    )


async def _tick(progress: Progress, peer: Peer) -> None:
    while True:
        progress.show(peer)
        await trio.sleep(0.5)
