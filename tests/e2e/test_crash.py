"""kill -9 at random moments, restart with the same data directory: nothing lost,
and nothing fetched twice but what was in flight (not yet committed) at a kill."""

from __future__ import annotations

import random
import signal
import sqlite3
from pathlib import Path

import trio

from tests.e2e.cluster import start_quiet_peer
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.synthweb.log import RequestLog
from ubipy.synthweb.referee import Referee
from ubipy.synthweb.server import serve
from ubipy.synthweb.truth import ground_truth

KILLS = 6


def _stored_urls(data: Path) -> set[str]:
    conn = sqlite3.connect(data / "shard.sqlite3")
    try:
        return {url for (url,) in conn.execute("SELECT url FROM pages")}
    finally:
        conn.close()


def _page_urls(log: RequestLog, web: SyntheticWeb) -> list[str]:
    return [r.url for r in log if r.target_path not in web.robots_paths(r.host)]


def _asked_again(log: RequestLog, since: dict[str, int]) -> bool:
    """Whether each URL has been answered whole at or after its log position."""
    last_answer = {r.url: i for i, r in enumerate(log.entries) if r.complete}
    return all(last_answer.get(url, -1) >= at for url, at in since.items())


async def test_kill_9_at_random_moments_loses_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261129)
    web = SyntheticWeb(WebSpec(seed=11, pages_per_host=40, latency=0.01, crawl_delay=0.05))
    truth = ground_truth(web, [web.seed_url()])
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(web.seed_url() + "\n")
    data = tmp_path / "peer"
    lost_at_kills: set[str] = set()
    # A page lost at a kill is asked again after it, but perhaps last of all (a
    # sitemap ranks low): the crawl is over only once each is answered again.
    asked_again_after: dict[str, int] = {}
    lost_count = 0
    kills = 0
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        log = server.log
        proc = await start_quiet_peer(server.proxy_url, data, seeds)
        try:
            while kills < KILLS:
                # Kill after a random number of further requests, anywhere in a
                # page's life: mid-request, mid-parse, mid-commit.
                target = len(log) + rng.randint(3, 40)
                with trio.fail_after(60):
                    await log.wait_for(lambda lg, t=target: len(lg) >= t)
                proc.send_signal(signal.SIGKILL)
                with trio.fail_after(30):
                    await proc.wait()
                with trio.fail_after(10):
                    await server.wait_idle()
                kills += 1
                # What the server answered but the shard does not hold was in
                # flight for the crawler: the only pages it may ask for again.
                lost = set(_page_urls(log, web)) - _stored_urls(data)
                lost_at_kills |= lost
                asked_again_after |= dict.fromkeys(lost, len(log))
                lost_count += len(lost)
                proc = await start_quiet_peer(server.proxy_url, data, None)
            with trio.fail_after(120):
                await log.wait_for(
                    lambda lg: (
                        Referee(lg, web).requested() >= truth
                        and _asked_again(lg, asked_again_after)
                    )
                )
            proc.send_signal(signal.SIGINT)
            with trio.fail_after(30):
                assert await proc.wait() == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        with trio.fail_after(10):
            await server.wait_idle()
        nursery.cancel_scope.cancel()
    referee = Referee(log, web)
    assert kills == KILLS
    assert referee.missing(truth) == set()
    assert referee.unexpected(truth) == set()
    duplicates = referee.duplicates()
    assert len(duplicates) <= lost_count
    assert {r.url for r in duplicates} <= lost_at_kills
    # Every page the server served is in the shard exactly once.
    assert _stored_urls(data) == set(_page_urls(log, web))
