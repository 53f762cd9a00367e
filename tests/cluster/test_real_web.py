"""Issue #16's acceptance in one crawl: the synthetic web with every case a real crawl
meets at once (sitemap-only pages, hosts in legacy encodings and an internationalised
name, a slow host, a host that answers 503 for a minute, names that do not resolve,
and half the hosts on one shared address), crawled by one peer and by four, judged
from the web server's log."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import trio
import trio.testing

from tests.cluster.harness import SimPeer, cluster, one_view
from tests.cluster.test_dns import dns_of, overlaps
from ubipy.config import BoundsConfig, CrawlConfig, Scope
from ubipy.fetch import Resolver
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth
from ubipy.synthweb.pace import pace_of

SPEC = WebSpec(
    seed=9,
    hosts=12,
    pages_per_host=6,
    latency=0.02,
    encodings=True,
    paced=True,
    dead_links=10,
    unavailable_for=60.0,
)
WEB = SyntheticWeb(SPEC)
# Any scope: the dead names are on other domains, and a real crawl follows them too.
TRUTH = ground_truth(WEB, [WEB.seed_url()], scope="any")
ANY = BoundsConfig(scope=Scope.ANY)
SHARED = "11.2.2.2"
IP_DELAY = 0.1
LIVE = sorted({urlsplit(u).hostname or "" for u in TRUTH})
# Half the synthetic hosts share one address (shared hosting); the others have their own.
ADDRESSES = {
    name: SHARED if i % 2 == 0 and name.startswith("h0") else f"11.3.0.{i + 1}"
    for i, name in enumerate(LIVE)
}


def tune(config: CrawlConfig) -> CrawlConfig:
    # Enough retries to outlast the busy host's minute of 503s (the host backs off,
    # doubling, meanwhile).
    fetch = dataclasses.replace(config.fetch, max_retries=6)
    politeness = dataclasses.replace(config.politeness, ip_delay=IP_DELAY)
    return dataclasses.replace(config, fetch=fetch, politeness=politeness)


@pytest.mark.parametrize("n", [1, 4])
async def test_a_real_web_crawled_whole_politely(
    n: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    resolvers = [Resolver(lookup=dns_of(ADDRESSES)) for _ in range(n)]
    async with cluster(tmp_path, WEB, seed=13) as c:
        first = await c.start(0, tune=tune, resolver=resolvers[0], bounds=ANY)
        peers: list[SimPeer] = [first]
        for i in range(1, n):
            peers.append(await c.start(i, join=first, tune=tune, resolver=resolvers[i], bounds=ANY))
        with trio.fail_after(60):
            await c.wait_until(lambda: one_view(peers))
        first.peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(1800):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
            for p in peers:
                await p.peer.crawler.wait_idle()
        figures = (await c.status(first))["peers"]
        await c.stop_all()

    referee = Referee(c.server.log, WEB)
    requests = list(c.server.log)
    assert referee.missing(TRUTH) == set()  # sitemap-only and encoded pages included
    assert referee.duplicates() == [] and referee.unexpected(TRUTH) == set()
    assert len({r.peer for r in requests}) == n
    shared = [r for r in requests if ADDRESSES.get(r.host) == SHARED]
    assert len(shared) > 50 and overlaps(shared, IP_DELAY) == (0, 0)
    # Each live name looked up once by the peer that crawled it; the dead ones given up.
    assert all(r.lookups[name] <= 1 for r in resolvers for name in LIVE)
    assert sum(f["dns_hosts_given_up"] for f in figures) == SPEC.dead_links
    assert all("dns_most_per_host" in f for f in figures)
    slow = pace_of(requests, f"pace-slow.{SPEC.domain}")
    fast = pace_of(requests, f"pace-fast.{SPEC.domain}")
    assert slow.rate < fast.rate / 2
    busy = pace_of(requests, f"pace-busy.{SPEC.domain}")
    # Its 503s ended, and the pages were fetched after them (in the crawl order's order).
    last_503 = max(i for i, status in enumerate(busy.statuses) if status == 503)
    assert 200 in busy.statuses[last_503 + 1 :]
