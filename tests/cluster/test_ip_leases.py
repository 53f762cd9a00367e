"""The per-IP rule across peers, judged from the web server's log: fifty hosts on one
address, crawled by four peers that each own some of them, get one request at a time
and a gap of at least the IP delay between two, as from one peer; an address whose
owner dies holds up nobody for longer than the lease's patience."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.cluster.harness import Cluster, SimPeer, cluster, one_view
from tests.cluster.test_dns import dns_of, overlaps
from ubipy.config import CrawlConfig
from ubipy.fetch import Resolver
from ubipy.peer.ipleases import PATIENCE, IpLeases
from ubipy.ring import Ring
from ubipy.synthweb import Referee, Request, SyntheticWeb, WebSpec, ground_truth

ADDRESS = "11.1.1.1"
IP_DELAY = 0.2
HOST_DELAY = 0.01  # the harness's --delay
PEERS = 4
WEB = SyntheticWeb(WebSpec(seed=8, hosts=50, pages_per_host=2, latency=0.05))
TRUTH = ground_truth(WEB, [WEB.seed_url()])


Tune = Callable[[CrawlConfig], CrawlConfig]


def one_address(config: CrawlConfig) -> CrawlConfig:
    politeness = dataclasses.replace(config.politeness, ip_delay=IP_DELAY)
    return dataclasses.replace(config, politeness=politeness)


def no_per_ip(config: CrawlConfig) -> CrawlConfig:
    return dataclasses.replace(
        config, politeness=dataclasses.replace(config.politeness, per_ip=False)
    )


async def start(
    c: Cluster,
    index: int,
    join: SimPeer | None = None,
    web: SyntheticWeb = WEB,
    tune: Tune = one_address,
) -> SimPeer:
    """Peer ``index``, to which every host of the web resolves to ADDRESS."""
    lookup: Callable[..., Any] = dns_of(dict.fromkeys(web.host_names(), ADDRESS))
    return await c.start(index, join=join, tune=tune, resolver=Resolver(lookup=lookup))


async def start_cluster(
    c: Cluster, n: int, web: SyntheticWeb = WEB, tune: Tune = one_address
) -> list[SimPeer]:
    first = await start(c, 0, web=web, tune=tune)
    peers = [first] + [await start(c, i, join=first, web=web, tune=tune) for i in range(1, n)]
    with trio.fail_after(60):
        await c.wait_until(lambda: one_view(peers))
    return peers


async def crawl(
    tmp: Path, n: int, web: SyntheticWeb = WEB, tune: Tune = one_address
) -> tuple[Referee, list[dict[str, Any]]]:
    """``n`` peers crawl the web whole: the referee and each peer's figures."""
    truth = TRUTH if web is WEB else ground_truth(web, [web.seed_url()])
    async with cluster(tmp, web, seed=11) as c:
        peers = await start_cluster(c, n, web, tune)
        peers[0].peer.seed_urls([web.seed_url()])
        with trio.fail_after(3600):
            await c.server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
            for p in peers:
                await p.peer.crawler.wait_idle()
        figures = (await c.status(peers[0]))["peers"]
        await c.stop_all()
    return Referee(c.server.log, web), figures


@pytest.mark.parametrize("n", [1, PEERS])
async def test_hosts_of_one_address_on_several_peers_take_turns(
    n: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    referee, figures = await crawl(tmp_path, n)
    assert referee.missing(TRUTH) == set() and referee.duplicates() == []
    assert referee.unexpected(TRUTH) == set()
    requests = list(referee.requests)
    assert len({r.peer for r in requests}) == n  # every peer fetched some of them
    assert overlaps(requests, IP_DELAY) == (0, 0)
    assert sum(f["ip_lease_timeouts"] for f in figures) == 0
    # Every request went under a lease (robots.txt's included).
    assert sum(f["ip_leases_granted"] for f in figures) == len(requests)


@pytest.mark.parametrize("n", [1, PEERS])
async def test_without_the_per_ip_rule_hosts_of_one_address_are_asked_at_once(
    n: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """--no-per-ip (sites behind a CDN): no address holds its hosts to one request at a
    time, and no peer asks another for an address's lease; each host's own rule
    holds (one request in flight, the delay between two)."""
    referee, figures = await crawl(tmp_path, n, tune=no_per_ip)
    assert referee.missing(TRUTH) == set() and referee.duplicates() == []
    requests = list(referee.requests)
    assert len({r.peer for r in requests}) == n
    assert overlaps(requests, 0)[0] > 0
    assert sum(f["ip_leases_granted"] for f in figures) == 0
    by_host = itertools.groupby(sorted(requests, key=lambda r: r.host), key=lambda r: r.host)
    assert all(overlaps(list(asked), HOST_DELAY) == (0, 0) for _, asked in by_host)


SLOW = SyntheticWeb(WebSpec(seed=8, hosts=12, pages_per_host=2, latency=1.0))


@pytest.mark.parametrize("n", [1, PEERS])
async def test_a_slow_server_is_paced_by_several_peers_as_by_one(
    n: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A server that takes a second to answer each request is given a second between
    two (--delay-factor 1), whichever peer asks: the holder of the address's lease
    tells its owner what the server's pace asks. Before, four peers gave it the IP
    delay alone (0.2 s) between requests from different peers."""
    referee, _ = await crawl(tmp_path, n, SLOW)
    requests = sorted(referee.requests, key=lambda r: r.start)
    assert len({r.peer for r in requests}) == n
    gaps = sorted(b.start - a.end for a, b in itertools.pairwise(requests))
    # Each peer's first request to the server knows no pace yet: those go sooner.
    assert gaps[len(gaps) // 4] >= 0.9 * SLOW.spec.latency


async def test_without_leases_four_peers_overlap_on_the_address(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the leases are for: each peer keeps the rule for its own hosts only."""
    monkeypatch.setattr(IpLeases, "install", lambda self, *args: None)
    referee, _ = await crawl(tmp_path, PEERS)
    assert referee.missing(TRUTH) == set() and referee.duplicates() == []
    overlapping, too_soon = overlaps(list(referee.requests), IP_DELAY)
    print(f"without leases, {PEERS} peers: {overlapping} overlapping, {too_soon} too soon")
    assert overlapping > 0


async def test_a_dead_address_owner_holds_up_nobody(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Kill the address's owner mid-crawl: the others go on after the lease's patience
    (counted as time-outs), keep the per-IP rule again once their ring has dropped it
    (a survivor owns the address then), and the crawl ends whole once it is back."""
    async with cluster(tmp_path, WEB, seed=12) as c:
        peers = await start_cluster(c, PEERS)
        peers[0].peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(120):
            await c.server.log.wait_for_count(len(TRUTH) // 4)
        owner_id = Ring([p.peer_id for p in peers]).owner(ADDRESS)
        owner = next(p for p in peers if p.peer_id == owner_id)
        others = [p for p in peers if p is not owner]
        await c.kill(owner)
        killed_at = trio.current_time()
        with trio.fail_after(PATIENCE + 1):
            await c.server.log.wait_for(lambda log: log.entries[-1].start > killed_at)
        assert sum(p.peer.status().ip_lease_timeouts for p in others) > 0
        left = {p.peer_id for p in others}
        with trio.fail_after(60):
            await c.wait_until(lambda: all(p.peer.membership.alive_ids() == left for p in others))
        dropped_at = trio.current_time()
        timeouts = sum(p.peer.status().ip_lease_timeouts for p in others)

        def settled(log: Iterable[Request]) -> list[Request]:
            return [r for r in log if dropped_at + PATIENCE + 1 <= r.start]

        # 15 s, and a dozen requests: fewer come in that time when the survivors have
        # little ready then (a host's 503 back-off spacing one peer's requests 2 to 4 s).
        with trio.fail_after(120):
            await c.server.log.wait_for(
                lambda log: log.entries[-1].start > dropped_at + 15 and len(settled(log)) > 10
            )
        back_at = trio.current_time()
        # A survivor owns the address now: no more time-outs, and the rule holds.
        assert sum(p.peer.status().ip_lease_timeouts for p in others) == timeouts
        window = [r for r in settled(c.server.log) if r.end <= back_at]
        assert len(window) > 10 and overlaps(window, IP_DELAY) == (0, 0)
        await start(c, owner.index, join=others[0])
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(TRUTH) == set())
