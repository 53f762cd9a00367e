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

import trio
import trio.testing

from tests.cluster.harness import cluster
from ubipy.config import BoundsConfig, CrawlConfig, Scope
from ubipy.fetch import Resolver
from ubipy.fetch.dns import SystemLookup
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth
from ubipy.synthweb.log import Request
from ubipy.synthweb.render import Link
from ubipy.synthweb.spec import Page
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
    # A live name is looked up once; a dead one at each of its host's three attempts
    # (a time-out is not an answer, so it is not kept).
    assert {resolver.lookups[name] for name in names} == {1}
    assert status["dns_most_per_host"] == 3
    assert status["dns_lookups"] == 3 * 40 + len(names)


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
    resolver = Resolver(lookup=dns_of(addresses))
    async with cluster(tmp_path, web, seed=3) as c:
        sim = await c.start(0, bounds=ANY_SCOPE, resolver=resolver)
        sim.peer.seed_urls([web.seed_url()])
        with trio.fail_after(300):
            await sim.peer.crawler.wait_idle()
        status = (await c.status(sim))["peers"][0]
        assert await c.stop(sim)

    asked = {r.host for r in c.server.log}
    assert names[0] in asked
    assert not asked & {inside, "169.254.169.254", "127.0.0.1:7000", "127.0.0.1"}
    assert status["refused_addresses"] == 3 and status["pending"] == 0


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
