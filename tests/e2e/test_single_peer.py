"""One peer crawls the synthetic web on loopback; the web server's log is the judge."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from ubipy.config import BoundsConfig, CrawlConfig, FetchConfig, PolitenessConfig, Scope
from ubipy.peer.peer import Peer
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.synthweb.log import RequestLog
from ubipy.synthweb.referee import Referee
from ubipy.synthweb.server import SynthServer, serve
from ubipy.synthweb.truth import ground_truth

DELAY = 0.02
SPEC = WebSpec(seed=7, crawl_delay=0.1)


@dataclass
class World:
    web: SyntheticWeb
    server: SynthServer
    nursery: trio.Nursery

    def config(self, data: Path, **sections: Any) -> CrawlConfig:
        """A peer on this web: through its proxy, quick; ``sections`` replace the
        config's whole (``bounds=BoundsConfig(max_depth=2)``)."""
        base = CrawlConfig(
            data_dir=data,
            listen="127.0.0.1:0",
            politeness=PolitenessConfig(delay=DELAY, concurrency=16, robots_retry_base=0.05),
            fetch=self.fetch(),
        )
        return dataclasses.replace(base, **sections)

    def fetch(self, **fields: Any) -> FetchConfig:
        """Requests through this web's proxy, ``fields`` as given."""
        return FetchConfig(**{"proxy": self.server.proxy_url, "read_timeout": 10.0, **fields})

    async def start_peer(self, config: CrawlConfig) -> Peer:
        peer: Peer = await self.nursery.start(Peer(config).run)
        return peer


@asynccontextmanager
async def world(spec: WebSpec = SPEC) -> AsyncIterator[World]:
    web = SyntheticWeb(spec)
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        yield World(web, server, nursery)
        # The log gets its entry just after the response's last byte leaves.
        with trio.fail_after(10):
            await server.wait_idle()
        nursery.cancel_scope.cancel()


async def finish(peer: Peer, seconds: float = 60.0) -> None:
    with trio.fail_after(seconds):
        await peer.crawler.wait_idle()
    peer.stop()
    with trio.fail_after(seconds):
        await peer.crawler.stopped.wait()


def assert_perfect(log: RequestLog, web: SyntheticWeb, truth: set[str], delay: float) -> None:
    referee = Referee(log, web)
    assert referee.missing(truth) == set()
    assert referee.unexpected(truth) == set()
    assert referee.duplicates() == []
    assert referee.robots_violations() == []
    assert referee.overlaps() == []
    assert referee.short_gaps(delay) == []


async def test_one_peer_fetches_exactly_the_ground_truth(tmp_path: Path) -> None:
    async with world() as w:
        peer = await w.start_peer(w.config(tmp_path))
        seed = w.web.seed_url()
        peer.crawler.seed([seed])
        await finish(peer)
        log = w.server.log
    truth = ground_truth(w.web, [seed])
    # The web's special cases are all there to be judged.
    assert len(truth) > 150
    assert_perfect(log, w.web, truth, DELAY)
    # The shard agrees with the referee, page for page: every request but robots.txt
    # is one stored row with the status the server sent.
    conn = sqlite3.connect(tmp_path / "shard.sqlite3")
    stored = {(url, status) for url, status in conn.execute("SELECT url, status FROM pages")}
    served = {(r.url, r.status) for r in log if not _is_robots(r.target_path, w.web, r.host)}
    assert stored == served
    assert conn.execute("SELECT COUNT(*) FROM frontier WHERE state = 0").fetchone() == (0,)
    titled = conn.execute("SELECT COUNT(*) FROM pages WHERE title IS NOT NULL").fetchone()[0]
    assert titled > 100
    conn.close()


async def test_max_depth_and_host_scope_limit_the_crawl(tmp_path: Path) -> None:
    async with world() as w:
        # One host alone is crawled in breadth-first order, so every URL is first
        # admitted at its least depth, which is what the truth counts.
        peer = await w.start_peer(
            w.config(tmp_path, bounds=BoundsConfig(max_depth=2, scope=Scope.HOST))
        )
        seed = w.web.url(3, "/")
        peer.crawler.seed([seed])
        await finish(peer)
        log = w.server.log
    truth = ground_truth(w.web, [seed], max_depth=2, scope="host")
    assert_perfect(log, w.web, truth, DELAY)
    assert {r.host for r in log} == {"h003.synth.test"}
    assert len(truth) < len(ground_truth(w.web, [seed], scope="host"))


async def test_graceful_stop_and_restart_fetch_nothing_twice(tmp_path: Path) -> None:
    async with world() as w:
        seed = w.web.seed_url()
        peer = await w.start_peer(w.config(tmp_path))
        first_id = peer.peer_id
        peer.crawler.seed([seed])
        with trio.fail_after(60):
            await w.server.log.wait_for_count(60)
        peer.stop()
        with trio.fail_after(60):
            await peer.finished.wait()  # its data directory is free again
        stopped_at = len(w.server.log)
        again = await w.start_peer(w.config(tmp_path))
        assert again.peer_id == first_id
        # No new seed: the restarted peer resumes from its shard.
        await finish(again)
        log = w.server.log
    truth = ground_truth(w.web, [seed])
    assert stopped_at < len(truth)
    assert_perfect(log, w.web, truth, DELAY)


def _is_robots(path: str, web: SyntheticWeb, host: str) -> bool:
    return path == "/robots.txt" or path in web.robots_paths(host)
