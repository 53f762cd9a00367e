"""The DNS stage and the per-IP rule in a running peer, judged from the web server's log:
names that do not resolve hold no request slot, each host costs one lookup, addresses
a crawler may not reach are not asked, and hosts sharing an address take turns."""

from __future__ import annotations

import dataclasses
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import trio
import trio.testing

from tests.cluster.harness import cluster, one_view
from ubipy.config import BoundsConfig, CrawlConfig, Scope
from ubipy.fetch import Resolver
from ubipy.fetch.dns import SystemLookup
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth
from ubipy.synthweb.log import Request
from ubipy.synthweb.render import Link
from ubipy.synthweb.spec import Page, Response
from ubipy.synthweb.specials import OUTSIDE_URL

ANY_SCOPE = BoundsConfig(scope=Scope.ANY)
DEAD_LOOKUP = 3600.0  # a name whose servers never answer


class WebWithExtraLinks(SyntheticWeb):
    """The synthetic web whose home page also links to ``extra`` URLs (not followed by
    the truth: none of them is a page of this web)."""

    def __init__(self, spec: WebSpec, extra: list[str]) -> None:
        super().__init__(spec)
        self.extra = extra

    def _page(self, url: str) -> Page | None:
        page = super()._page(url)
        if page is None or page.url != self.seed_url():
            return page
        links = tuple(Link("a", u, None, text="elsewhere") for u in self.extra)
        return dataclasses.replace(page, links=page.links + links)


def dns_of(addresses: dict[str, str]) -> SystemLookup:
    """A system lookup: ``addresses`` answer at once, other names do not exist."""

    async def lookup(name: str) -> list[str]:
        if name in addresses:
            return [addresses[name]]
        await trio.sleep(DEAD_LOOKUP)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    return lookup


def public_addresses(web: SyntheticWeb) -> dict[str, str]:
    """An address for each host of the web (its own and the outside one it links to).
    11.0.0.0/8 is globally routable: only a label here, the web is in process."""
    names = [*web.host_names(), urlsplit(OUTSIDE_URL).hostname or ""]
    return {name: f"11.0.0.{i + 1}" for i, name in enumerate(names)}


async def crawl_alone(
    tmp_path: Path,
    web: SyntheticWeb,
    addresses: dict[str, str],
    seeds: list[str],
    bounds: BoundsConfig | None = None,
) -> tuple[list[Request], dict[str, Any]]:
    """One peer, its names looked up in ``addresses``, crawls from ``seeds`` until idle:
    the server's log and the peer's status."""
    async with cluster(tmp_path, web, seed=3) as c:
        sim = await c.start(0, bounds=bounds, resolver=Resolver(lookup=dns_of(addresses)))
        sim.peer.seed_urls(seeds)
        with trio.fail_after(300):
            await sim.peer.crawler.wait_idle()
        status = (await c.status(sim))["peers"][0]
        assert await c.stop(sim)
    return list(c.server.log), status


async def crawl_time(
    tmp: Path, web: SyntheticWeb, resolver: Resolver
) -> tuple[float, dict[str, Any]]:
    """Virtual seconds until the live web is fetched whole, and the peer's figures once
    idle, with four request slots."""
    truth = ground_truth(web, [web.seed_url()], scope="any")
    async with cluster(tmp, web, seed=2) as c:
        sim = await c.start(0, bounds=ANY_SCOPE, resolver=resolver)
        started = trio.current_time()
        sim.peer.seed_urls([web.seed_url()])
        with trio.fail_after(300):
            await c.server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
        took = trio.current_time() - started
        with trio.fail_after(600):
            await sim.peer.crawler.wait_idle()
        status = (await c.status(sim))["peers"][0]
        assert await c.stop(sim)
    referee = Referee(c.server.log, web)
    assert referee.duplicates() == [] and referee.unexpected(truth) == set()
    assert not [r for r in c.server.log if r.host.endswith(".invalid")]
    return took, status


async def test_names_that_do_not_resolve_hold_no_request_slot(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    spec = WebSpec(seed=5, hosts=6, pages_per_host=8, latency=0.05)
    web = SyntheticWeb(spec)
    names = public_addresses(web)
    alone, _ = await crawl_time(tmp_path / "alone", web, Resolver(lookup=dns_of(names)))
    # Forty names whose servers never answer, and four request slots: had the lookups
    # held the slots, the live web would have waited for their time-outs.
    web = SyntheticWeb(dataclasses.replace(spec, dead_links=40))
    resolver = Resolver(lookup=dns_of(names))
    took, status = await crawl_time(tmp_path / "dead", web, resolver)
    assert took <= 1.2 * alone
    assert status["dns_hosts_given_up"] == 40 and status["pending"] == 0
    # A live name is looked up once; a dead one at each of its host's six attempts
    # (a time-out is not an answer, so it is not kept; the resolver's failure, not
    # the name's, is tried three times more than a robots.txt).
    assert {resolver.lookups[name] for name in names} == {1}
    assert status["dns_most_per_host"] == 6
    assert status["dns_lookups"] == 6 * 40 + len(names)


async def test_addresses_a_crawler_may_not_reach_are_not_asked(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    web0 = SyntheticWeb(WebSpec(seed=6, hosts=4, pages_per_host=5, latency=0.05))
    names = web0.host_names()
    inside = names[1]  # a linked host on a private address
    extra = ["http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:7000/status"]
    web = WebWithExtraLinks(web0.spec, extra)
    addresses = public_addresses(web)
    # The seed's own host is on a private address too: the user named it, so it is crawled.
    addresses[names[0]], addresses[inside] = "10.9.9.8", "10.9.9.9"
    log, status = await crawl_alone(tmp_path, web, addresses, [web.seed_url()], ANY_SCOPE)
    asked = {r.host for r in log}
    assert names[0] in asked
    assert not asked & {inside, "169.254.169.254", "127.0.0.1:7000", "127.0.0.1"}
    assert status["refused_addresses"] == 3 and status["pending"] == 0
    # Their names resolved: not said to be names that did not (QA), nor failed lookups.
    assert status["dns_hosts_given_up"] == status["dns_failures"] == 0


def overlaps(requests: list[Request], gap: float) -> tuple[int, int]:
    """Requests that began while another was in flight, and requests that began
    sooner than ``gap`` after the one before ended."""
    ordered = sorted(requests, key=lambda r: r.start)
    overlapping = too_soon = 0
    last_end = -1e9
    for r in ordered:
        if r.start < last_end - 1e-9:
            overlapping += 1
        elif r.start < last_end + gap - 1e-6:
            too_soon += 1
        last_end = max(last_end, r.end)
    return overlapping, too_soon


def on_one_address(ip_delay: float) -> Callable[[CrawlConfig], CrawlConfig]:
    def tune(config: CrawlConfig) -> CrawlConfig:
        politeness = dataclasses.replace(config.politeness, ip_delay=ip_delay)
        return dataclasses.replace(config, politeness=politeness)

    return tune


async def test_hosts_sharing_an_address_take_turns(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    web = SyntheticWeb(WebSpec(seed=7, hosts=12, pages_per_host=6, latency=0.05))
    truth = ground_truth(web, [web.seed_url()])
    shared = {name: "11.1.1.1" for name in web.host_names()}
    resolver = Resolver(lookup=dns_of(shared))
    async with cluster(tmp_path, web, seed=4) as c:
        sim = await c.start(0, resolver=resolver, tune=on_one_address(0.2))
        sim.peer.seed_urls([web.seed_url()])
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
            await sim.peer.crawler.wait_idle()
        assert await c.stop(sim)

    referee = Referee(c.server.log, web)
    assert referee.duplicates() == [] and referee.unexpected(truth) == set()
    assert overlaps(list(c.server.log), 0.2) == (0, 0)


async def test_a_seeds_private_host_stays_allowed_after_a_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The exemption comes from the shard (a URL admitted at depth 0), not from memory:
    a peer restarted after its seed page was fetched still crawls the rest of that host."""
    web = SyntheticWeb(WebSpec(seed=10, hosts=2, pages_per_host=6, latency=0.05))
    truth = ground_truth(web, [web.seed_url()])
    home = web.host_names()[0]
    addresses = {**public_addresses(web), home: "10.9.9.8"}
    async with cluster(tmp_path, web, seed=5) as c:
        sim = await c.start(0, delay=1.0, resolver=Resolver(lookup=dns_of(addresses)))
        sim.peer.seed_urls([web.seed_url()])
        with trio.fail_after(60):
            await c.server.log.wait_for(lambda log: any(r.host == home for r in log))
        assert await c.stop(sim)
        fetched_before = {r.url for r in c.server.log}
        assert {u for u in truth if home in u} - fetched_before  # some of it is left
        sim = await c.start(0, delay=1.0, resolver=Resolver(lookup=dns_of(addresses)))
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
            await sim.peer.crawler.wait_idle()
        status = (await c.status(sim))["peers"][0]
        assert await c.stop(sim)
    assert status["refused_addresses"] == 0
    assert Referee(c.server.log, web).duplicates() == []


class Answering(SyntheticWeb):
    """The synthetic web with some URLs answered as ``special`` says."""

    def __init__(self, spec: WebSpec, special: dict[str, Response]) -> None:
        super().__init__(spec)
        self.special = special

    def respond(self, host: str, target: str, **kw: Any) -> Response:
        url = f"http://{host}{target}"
        if url in self.special:
            return self.special[url]
        return super().respond(host, target, **kw)


def moved(location: str) -> Response:
    return Response(301, (("Location", location), ("Content-Type", "text/plain")), b"")


@pytest.mark.parametrize(
    ("bounds", "target"),
    [
        (ANY_SCOPE, "http://169.254.169.254/latest/meta-data/"),
        (None, "http://{inside}/secret"),  # a name of the seed's domain, on 10.0.0.5
    ],
)
async def test_a_url_a_seed_redirects_to_gets_no_seed_s_allowance(
    bounds: BoundsConfig | None,
    target: str,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Only a host the user named may be on an address a crawler is otherwise refused:
    a public seed whose page redirects to the metadata service, or to a name of its
    domain that resolves to a private address, used to have the target fetched (it
    took the seed's depth 0, which stood for 'a seed was here')."""
    spec = WebSpec(seed=6, hosts=2, pages_per_host=3, latency=0.05)
    plain = SyntheticWeb(spec)
    inside = "internal." + plain.host_names()[0].split(".", 1)[1]
    target = target.format(inside=inside)
    web = Answering(spec, {plain.seed_url(): moved(target)})
    addresses = {**public_addresses(web), inside: "10.0.0.5"}
    log, status = await crawl_alone(tmp_path, web, addresses, [web.seed_url()], bounds)
    asked = {r.host for r in log}
    assert plain.host_names()[0] in asked  # the seed, and its redirect, were asked
    assert not asked & {"169.254.169.254", inside}
    assert status["refused_addresses"] == 1


async def test_a_seed_allows_its_own_port_of_a_private_address_only(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A seed on 127.0.0.1:8080 linking to the peer's own endpoint on 127.0.0.1:7000
    (the issue's example of what must not be reached): each port is a service of its
    own, and only the seed's is the user's."""
    home = "http://127.0.0.1:8080/"
    page = (
        b'<html><body><a href="/more">more</a><a href="http://127.0.0.1:7000/status">peer</a>'
        b'<a href="http://127.0.0.1:7001/control">control</a></body></html>'
    )
    spec = WebSpec(seed=6, hosts=1, pages_per_host=2, latency=0.05)
    html = (("Content-Type", "text/html"),)
    web = Answering(
        spec,
        {home: Response(200, html, page), home + "more": Response(200, html, b"<p>more</p>")},
    )
    log, status = await crawl_alone(tmp_path, web, public_addresses(web), [home])
    asked = {(r.host, r.target_path) for r in log}
    assert ("127.0.0.1:8080", "/more") in asked
    assert {h for h, _ in asked} == {"127.0.0.1:8080"}
    assert status["refused_addresses"] == 2


async def test_seeds_on_private_hosts_that_other_peers_own_are_crawled_there(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The seeds' hosts travel to every member with the scope: a seed given to one peer
    on a private host another peer owns is crawled by that peer."""
    web = SyntheticWeb(WebSpec(seed=12, hosts=6, pages_per_host=3, latency=0.05))
    homes = [f"http://{name}/" for name in web.host_names()]
    truth = ground_truth(web, homes)
    addresses = {name: f"10.9.9.{i + 1}" for i, name in enumerate(web.host_names())}
    async with cluster(tmp_path, web, seed=4) as c:
        first = await c.start(0, resolver=Resolver(lookup=dns_of(addresses)))
        second = await c.start(1, join=first, resolver=Resolver(lookup=dns_of(addresses)))
        with trio.fail_after(60):
            await c.wait_until(lambda: one_view([first, second]))
        first.peer.seed_urls(homes)
        with trio.fail_after(600):
            await c.server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
        statuses = (await c.status(first))["peers"]
        assert await c.stop(first) and await c.stop(second)
    by = {r.peer for r in c.server.log}
    assert by == {first.peer.peer_id, second.peer.peer_id}  # each crawled some
    assert [s["refused_addresses"] for s in statuses] == [0, 0]
