"""A host told to wait longer than a day (``--max-retry-after inf`` lets a server's
Retry-After stand) travels with a mark of at most a day, as the wire allows: since a
host's mark holds the wait until its next request (c5f81e7), a REPLICA frame or a
graceful stop's hand-off with such a mark raised on the sender, and the peer died."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

import tests.cluster.harness as harness
from tests.cluster.harness import SimPeer, cluster
from ubipy.config import CrawlConfig
from ubipy.synthweb import SyntheticWeb, WebSpec

HOSTS = 8


class Busy:
    """Every page answers 503 with a Retry-After of 2.3 days; ``all_asked`` is set once
    each host's page has been asked."""

    def __init__(self) -> None:
        self.pages = 0
        self.all_asked = trio.Event()

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        self.pages += 1
        if self.pages >= HOSTS:
            self.all_asked.set()
        return httpx2.Response(503, headers={"Retry-After": "200000"}, text="busy")


def _patient(config: CrawlConfig) -> CrawlConfig:
    return dataclasses.replace(
        config, fetch=dataclasses.replace(config.fetch, max_retry_after=float("inf"))
    )


def _count_marks(sims: list[SimPeer]) -> trio.Event:
    """Set once the peers' commits have taken a mark for every host."""
    every = trio.Event()
    hosts: set[str] = set()
    for sim in sims:
        crawler = sim.peer.crawler
        then = crawler.on_commit

        def on_commit(rows: Any, done: Any, marks: Any, then: Any = then) -> None:
            then(rows, done, marks)
            hosts.update(marks)
            if len(hosts) >= HOSTS:
                every.set()

        crawler.on_commit = on_commit
    return every


@pytest.mark.parametrize("replicas", [1, 2])
async def test_a_wait_over_a_day_is_replicated_and_handed_over(
    replicas: int,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    busy = Busy()
    transport = httpx2.MockTransport(busy)
    monkeypatch.setattr(harness, "SynthTransport", lambda server, client: transport)
    web = SyntheticWeb(WebSpec(seed=1, hosts=1, pages_per_host=1))
    async with cluster(tmp_path, web, seed=1) as c:
        a, b = await c.start_joined(2, tune=_patient, replicas=replicas)
        a.peer.seed_urls([f"http://h{i}.test/p" for i in range(HOSTS)])
        marked = _count_marks([a, b])
        with trio.fail_after(120):
            await busy.all_asked.wait()
            await marked.wait()  # committed (and with --replicas 2, copied from there)
        assert await c.stop(a)  # a graceful stop hands a's hosts, with their marks, to b
        await c.stop_all()
    assert a.troubles == b.troubles == []
    assert a.exit == b.exit == "stopped"
