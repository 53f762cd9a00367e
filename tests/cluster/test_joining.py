"""Joining that never gives up (issue 14), on the in-memory network: peers started in
any order form one cluster, and a peer alone keeps trying its join addresses with a
back-off, saying why each try failed."""

from __future__ import annotations

import random
import re
from dataclasses import replace
from functools import partial
from itertools import pairwise
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.cluster.harness import Cluster, SimPeer, cluster, host_of, one_view
from tests.cluster.test_churn_memory import SEEDS
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth

WEB = SyntheticWeb(WebSpec(seed=3, hosts=4, pages_per_host=2))
PORT = 7000
SERVICE = f"svc:{PORT}"
PEERS = 4
ORDERS = 10


def _all_fetching(peers: list[SimPeer]) -> bool:
    return all(p.peer.crawler.paused is None for p in peers)


def _none_joining(peers: list[SimPeer]) -> bool:
    return all(p.peer.status().joining == 0 for p in peers)


def _one_base(peers: list[SimPeer], everyone: frozenset[str]) -> bool:
    return {p.peer.lease.quorum.base for p in peers} == {everyone}


def address_of(index: int) -> str:
    return f"{host_of(index)}:{PORT}"


async def test_peers_started_in_any_order_with_random_delays_form_one_cluster(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """4 peers start in a random order, 0-5 s apart; in even runs each names all 4 with
    --join (itself included), in odd runs all name peer 0 (a bootstrap, which names nobody), as a
    service manager would start them. Every run ends with one cluster within 35 s of the
    last start (a join tried once left the peers up before the bootstrap alone)."""
    waits: list[float] = []
    for run in range(ORDERS):
        rng = random.Random(run)
        order = rng.sample(range(PEERS), PEERS)
        async with cluster(tmp_path / f"run{run}", WEB, seed=run) as c:
            peers = []
            for index in order:
                await trio.sleep(rng.uniform(0, 5))
                if run % 2 == 0:  # one list for all, as a deployment tool writes it
                    others = [address_of(i) for i in range(PEERS)]
                else:
                    others = [address_of(0)] if index != 0 else []
                peers.append(await c.start(index, port=PORT, join_addresses=others))
            last_start = trio.current_time()
            with trio.fail_after(35):
                for sim in peers:
                    await sim.wait_count(r"member \w+ joined", PEERS - 1)
            waits.append(trio.current_time() - last_start)
            everyone = frozenset(p.peer_id for p in peers)
            assert all(p.peer.membership.alive_ids() == everyone for p in peers)
            # Joined once a join address has answered its ask too.
            with trio.fail_after(5):
                await c.wait_until(partial(_none_joining, peers))
            # And one majority base, which every peer holds the lease on: new peers
            # that all named each other found it, with no bootstrap to start from.
            # (Each holder admits a newcomer once it has answered its ping.)
            with trio.fail_after(10):
                await c.wait_until(partial(_all_fetching, peers))
                await c.wait_until(partial(_one_base, peers, everyone))
    waits.sort()
    print(f"\none cluster after the last start: p50 {waits[len(waits) // 2]:.1f} s, "
          f"max {waits[-1]:.1f} s over {ORDERS} orders")  # fmt: skip


async def test_a_peer_whose_join_list_names_only_itself_crawls_alone(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Its own address is skipped: it does not dial itself for ever, nor wait, as a new
    peer joining others would, to be counted in a base that nobody else holds."""
    async with cluster(tmp_path, WEB, seed=2) as c:
        alone = await c.start(0, port=PORT, join_addresses=[address_of(0)])
        alone.peer.seed_urls([WEB.seed_url()])
        with trio.fail_after(60):
            await c.server.log.wait_for_count(WEB.spec.hosts * WEB.spec.pages_per_host)
        assert alone.peer.crawler.paused is None and alone.peer.status().joining == 0
        assert alone.count("join attempt") == 0


def _listening(c: Cluster) -> list[str]:
    return sorted(h for (h, port) in c.net._listeners if port == PORT)


@pytest.mark.parametrize("seed", range(4))
async def test_a_join_name_that_reaches_any_peer_this_one_included_makes_one_cluster(
    seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A load balancer's address, or a Kubernetes service's: ``svc`` reaches any peer
    listening on the port, at random. Each peer names only it. The first, reaching only
    itself, starts a cluster; the second, if its try reaches itself too, crawls alone for
    a while, but goes on trying, and the two end as one cluster (a found-out name used
    to be dropped for good, leaving two)."""
    pick = random.Random(seed)
    async with cluster(tmp_path, WEB, seed=seed) as c:
        c.net.name("svc", lambda asker: [pick.choice(_listening(c))])
        first = await c.start(0, port=PORT, join_addresses=[SERVICE])
        with trio.fail_after(30):
            await c.wait_until(lambda: first.peer.crawler.paused is None)
        second = await c.start(1, port=PORT, join_addresses=[SERVICE])
        with trio.fail_after(120):
            await c.wait_until(lambda: one_view([first, second]))
            await c.wait_until(partial(_all_fetching, [first, second]))


@pytest.mark.parametrize("seed", range(3))
async def test_a_join_name_of_every_peer_this_one_first_makes_one_cluster_at_once(
    seed: int, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Round-robin DNS, or a headless Kubernetes service: ``svc`` resolves to every
    peer, and the system's resolver puts the asker's own address first (RFC 6724's
    longest matching prefix; glibc does so for IPv4 too), so a dial to the name reached
    the peer itself every time: each peer crawled as a cluster of its own, for good.
    Each address the name stands for is dialled now: the peers started one after
    another make one cluster, and none of the later ones ever fetches on its own."""
    rng = random.Random(seed)

    def own_first(asker: str) -> list[str]:
        hosts = _listening(c)
        rng.shuffle(hosts)
        return sorted(hosts, key=lambda h: h != asker)

    async with cluster(tmp_path, WEB, seed=seed) as c:
        c.net.name("svc", own_first)
        first = await c.start(0, port=PORT, join_addresses=[SERVICE])
        with trio.fail_after(30):
            await c.wait_until(lambda: first.peer.crawler.paused is None)
        others = []
        for i in range(1, 3):
            await trio.sleep(rng.uniform(0, 5))
            others.append(await c.start(i, port=PORT, join_addresses=[SERVICE]))
        peers = [first, *others]
        with trio.fail_after(60):
            await c.wait_until(lambda: one_view(peers) and _all_fetching(peers))
        assert all(p.count("a cluster of its own") == 0 for p in others)
        assert first.count("a cluster of its own") == 1


async def test_a_lone_peer_keeps_trying_backs_off_and_says_why(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Nobody at the join address: tries 1 s, 2 s, 4 s ... apart, capped at 30 s, each
    failure logged with its reason and the status saying "joining (attempt N)"; another
    secret there is named as such; the peer joins at the next try once the member is up."""
    async with cluster(tmp_path, WEB, seed=1) as c:
        there = address_of(1)
        lone = await c.start(0, join_addresses=[there])
        with trio.fail_after(100):
            await lone.wait_count(r"join attempt 7:", 1)
        tries = [
            float(line.split()[0]) for line in lone.lines if re.search(r"join attempt \d+:", line)
        ]
        gaps = [round(b - a) for a, b in pairwise(tries)]
        assert gaps == [2, 4, 8, 16, 30, 30]
        assert "cannot connect" in lone.lines[-1]
        assert lone.peer.status().joining in (7, 8)

        # Another secret at the address: refused at once, and said so, by each try;
        # the link's own warning only once (QA: twice a try).
        stranger = await c.start(1, port=PORT, secret="another secret")
        with trio.fail_after(70):
            await lone.wait_count(r"join attempt \d+: .*secrets differ", 2)
        told = [line for line in lone.lines if "refused our frames" in line]
        assert len([line for line in told if "join attempt" not in line]) == 1
        await c.kill(stranger)

        # The member comes up: joined at the next try, within the 30 s back-off.
        member = await c.start(1, port=PORT)
        with trio.fail_after(31):
            await lone.wait_count(r"member \w+ joined", 1)
        with trio.fail_after(5):
            await c.wait_until(partial(_none_joining, [lone]))
        assert member.peer.membership.alive_ids() == {lone.peer_id, member.peer_id}


async def test_a_new_peer_on_a_dead_peer_s_address_joins_at_once(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A machine replaced (or a data directory wiped) on the same HOST:PORT before the
    cluster saw the old peer dead: the new peer (a new id) is seen alive by all within
    seconds; once the others know it, none of their frames is refused as meant for the
    old one, and none of them is turned away as a stranger."""
    for seed in range(8):
        async with cluster(tmp_path / f"s{seed}", WEB, seed=seed) as c:
            await _replace_on_the_same_address(c, tmp_path / f"s{seed}" / "fresh")


async def _replace_on_the_same_address(c: Cluster, fresh: Path) -> None:
    sims = [await c.start(0, port=PORT)]
    for i in (1, 2):
        sims.append(await c.start(i, port=PORT, join=sims[0]))
    with trio.fail_after(60):
        await c.wait_until(lambda: one_view(sims))
        # The base of the three confirmed: killed while a joint base of two still
        # awaited the dead one's word, the smaller id of the two, nobody holds until it
        # is back (a two-peer cluster's rule), which a replacement never is.
        everyone = frozenset(s.peer_id for s in sims)
        await c.wait_until(partial(_one_base, sims, everyone))
        await c.wait_until(lambda: all(s.peer.lease.quorum.joint is None for s in sims))
    await c.kill(sims[2])
    new = await c.start(2, port=PORT, join=sims[0], tune=lambda cfg: replace(cfg, data_dir=fresh))
    assert new.peer_id != sims[2].peer_id and new.address == sims[2].address
    # Frames sent to the old one before the others heard of the new one are refused.
    c.misdirected_allowed.add(new.peer_id)
    with trio.fail_after(10):
        await c.wait_until(
            lambda: all(new.peer_id in s.peer.membership.alive_ids() for s in sims[:2])
        )
    refused = new.peer.links.stats.rejected["MISDIRECTED"]
    await trio.sleep(30)
    assert all(new.peer_id in s.peer.membership.alive_ids() for s in sims[:2])
    assert new.peer.crawler.paused is None
    assert new.peer.links.stats.rejected["MISDIRECTED"] == refused
    assert new.peer.links.stats.cut["barred"] == 0


@SEEDS
async def test_peers_that_join_one_not_up_yet_wait_for_it_and_make_one_cluster(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, seed: int
) -> None:
    """The README's recipe in another order: peer 1 names peer 0 (the first peer, not up
    yet), peer 2 names peer 1. The two made a cluster of their own and crawled; peer 0,
    started later, made a second; both crawled the same hosts until they met: pages
    fetched twice, and a host asked by two peers at once (QA). Now 1 and 2 wait for 0,
    fetching nothing, 1 saying it is joining; then one cluster crawls everything once."""
    truth = ground_truth(WEB, [WEB.seed_url()])
    async with cluster(tmp_path, WEB, seed=seed) as c:
        second = await c.start(1, port=PORT, join_addresses=[address_of(0)])
        third = await c.start(2, port=PORT, join_addresses=[address_of(1)])
        with trio.fail_after(60):
            await c.wait_until(lambda: one_view([second, third]))
        third.peer.seed_urls([WEB.seed_url()])
        await trio.sleep(40)  # virtual: what the two do meanwhile is the test
        assert len(c.server.log) == 0
        assert all(p.peer.crawler.paused is not None for p in (second, third))
        assert second.peer.status().joining > 0 and third.peer.status().joining == 0
        assert second.count("no --join address answered: it founds no cluster") == 1
        first = await c.start(0, port=PORT)
        peers = [first, second, third]
        with trio.fail_after(120):
            await c.wait_until(lambda: one_view(peers))
            await c.wait_until(partial(_all_fetching, peers))
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, WEB).missing(truth) == set())
        bases = {p.peer.lease.quorum.base for p in peers}
    referee = Referee(c.server.log, WEB)
    assert bases == {frozenset(p.peer_id for p in peers)}
    # Not even for a moment, as peer 0's answer came before its membership did (a
    # review: 1, the smaller id, founded {1, 2} and fetched before 0 was live there).
    assert [p.count("only new peers in sight: founding") for p in (second, third)] == [0, 0]
    assert referee.duplicates() == [] and referee.overlaps() == []
