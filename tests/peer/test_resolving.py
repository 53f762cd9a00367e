"""The DNS stage between the resolver and the scheduler: a host's lookups retried as
real lookups, and a resolver's outage not taken for the host's. On the autojump clock."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import trio
import trio.testing

from tests.fetch.test_dns import FakeDns, Outage
from ubipy.fetch import (
    DnsFailure,
    Entry,
    FetchOutcome,
    JobKind,
    Lookup,
    Resolver,
    Scheduler,
    host_key,
    normalize,
)
from ubipy.peer.resolving import ResolveStage
from ubipy.store import Shard


class Closed:
    """The commits' side the stage uses: hosts closed, and why."""

    def __init__(self) -> None:
        self.hosts: list[tuple[str, str]] = []

    def close_host(self, host: str, reason: str) -> None:
        self.hosts.append((host, reason))


async def crawl(dns: Outage, *, pages: int, retry_base: float, ttl: float) -> tuple[int, Closed]:
    """One host's pages, fetched in 0.1 s each, a second apart; its fetch count and
    the hosts closed."""
    resolver = Resolver(ttl=ttl, lookup=dns)
    scheduler = Scheduler(
        delay=1.0,
        window=10**6,
        loader=lambda host, queue, n: [],
        resolve=resolver.wanted,
        robots_retry_base=retry_base,
        robots_max_attempts=3,
    )
    closed = Closed()
    stage = ResolveStage(resolver, scheduler, closed, wake=(lambda: None, lambda: None))  # type: ignore[arg-type]
    for i in range(pages):
        scheduler.add("a.test", Entry(i, i, f"http://a.test/p{i}", 0))
    fetched = 0
    for _ in range(10 * pages):
        now = trio.current_time()
        job = scheduler.next_job(now)
        if job is None:
            wake = scheduler.next_wakeup()
            if wake is None:
                break
            await trio.sleep(max(wake - now, 0.001))
        elif job.kind is JobKind.RESOLVE:
            await stage._lookup(job.host)
        elif job.kind is JobKind.ROBOTS:
            await trio.sleep(0.1)
            scheduler.robots_answer(
                job.host, trio.current_time(), status=404, location=None, body=b""
            )
        else:
            assert job.kind is JobKind.PAGE
            await trio.sleep(0.1)
            scheduler.finished(job.host, trio.current_time())
            fetched += 1
    return fetched, closed


async def test_a_resolver_outage_after_the_answer_expired_gives_no_host_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The answer expires at 100 s, and the resolver is out for two minutes then:
    # three failed refreshes would give the host up, and close its 400 URLs.
    dns = Outage(100.0, 220.0)
    fetched, closed = await crawl(dns, pages=400, retry_base=30.0, ttl=100.0)
    assert (fetched, closed.hosts) == (400, [])
    assert sum(100.0 <= t < 220.0 for t in dns.asked) >= 3  # asked again meanwhile


async def test_a_hosts_retries_are_real_lookups_not_the_cached_failure(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The resolver fails for the first 20 s; the host's retries (5 s, then 10 s)
    # come before its failure's cache ends, and used to be answered from it.
    dns = Outage(0.0, 20.0)
    fetched, closed = await crawl(dns, pages=10, retry_base=5.0, ttl=3600.0)
    assert (fetched, closed.hosts) == (10, [])
    assert len(dns.asked) == 2 and dns.asked[1] >= 20.0


async def test_a_host_whose_resolver_never_answers_is_given_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    dns = Outage(0.0, math.inf)
    fetched, closed = await crawl(dns, pages=3, retry_base=5.0, ttl=3600.0)
    assert (fetched, closed.hosts) == (0, [("a.test", "dns: temporary failure")])
    # The resolver's failure, not the name's: three lookups more than a name that
    # does not exist gets.
    assert len(dns.asked) == 6


async def test_a_resolver_outage_of_minutes_gives_no_new_host_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # a.test is met during an outage of 150 s: with no answer to serve stale, its
    # three lookups at 0, 30 and 90 s failed, and its URLs were closed for good (a
    # review found). The resolver's failures give a host more time than a name's.
    dns = Outage(0.0, 150.0)
    fetched, closed = await crawl(dns, pages=10, retry_base=30.0, ttl=3600.0)
    assert (fetched, closed.hosts) == (10, [])


@pytest.mark.parametrize(
    "other", ["[::ffff:93.184.215.14]", "[64:ff9b::93.184.215.14]", "[::ffff:5db8:d70e]"]
)
async def test_an_address_written_two_ways_is_one_to_the_per_ip_rule(
    other: str, autojump_clock: trio.testing.MockClock
) -> None:
    # An IPv6 form that carries the IPv4 address reaches the same server.
    resolver = Resolver()
    scheduler = Scheduler(
        delay=1.0, window=10, loader=lambda host, queue, n: [], resolve=resolver.wanted
    )
    stage = ResolveStage(resolver, scheduler, Closed(), wake=(lambda: None, lambda: None))  # type: ignore[arg-type]
    for i, url in enumerate(["http://93.184.215.14/a", f"http://{other}/a"]):
        url = normalize(url)
        scheduler.add(host_key(url), Entry(i, i, url, 0))
    in_flight = []
    for now in (0.0, 10.0, 20.0):
        while (job := scheduler.next_job(now)) is not None:
            if job.kind is JobKind.RESOLVE:
                await stage._lookup(job.host)
            elif job.kind is JobKind.ROBOTS:
                scheduler.robots_answer(job.host, now, status=404, location=None, body=b"")
            else:
                in_flight.append(job.url)  # left in flight
    assert len(in_flight) == 1


async def test_a_lookup_that_raises_is_a_failed_lookup_not_the_peers_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Out of threads, the lookup raises RuntimeError: it crashed the stage's nursery,
    # the peer with it. Now the host's lookup failed, and it is tried again.
    resolver = Resolver(ttl=3600.0, lookup=Outage(0.0, 0.0))

    async def no_thread(host: str) -> Lookup:
        raise RuntimeError("can't start new thread")

    resolver.resolve = no_thread  # type: ignore[method-assign]
    scheduler = Scheduler(delay=1.0, window=10, loader=lambda host, queue, n: [],
                          resolve=resolver.wanted, robots_retry_base=5.0)  # fmt: skip
    scheduler.add("a.test", Entry(1, 1, "http://a.test/", 0))
    stage = ResolveStage(resolver, scheduler, Closed(), wake=(lambda: None, lambda: None))  # type: ignore[arg-type]
    job = scheduler.next_job(trio.current_time())
    assert job is not None and job.kind is JobKind.RESOLVE
    await stage._lookup(job.host)
    assert stage.stats.failures == 1 and scheduler.in_flight == 0
    assert scheduler.next_wakeup() == 5.0  # tried again after the back-off


async def test_a_host_whose_name_was_demoted_by_another_hosts_request_is_filed_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """b.test's first address did not answer a request of a.test's (its robots.txt
    redirected to b.test): b.test goes to its next address's key before its next
    request, as a.test would after its own. Left filed under the dead one, its requests
    went to the next while the per-IP rule held the dead one."""
    table = {"a.test": ["11.0.0.1"], "b.test": ["11.0.0.2", "11.0.0.3"]}

    async def lookup(name: str) -> list[str]:
        return table[name]

    resolver = Resolver(lookup=lookup)
    scheduler = Scheduler(
        delay=1.0, window=10, loader=lambda host, queue, n: [], resolve=resolver.wanted
    )
    stage = ResolveStage(resolver, scheduler, Closed(), wake=(lambda: None, lambda: None))  # type: ignore[arg-type]
    for i, host in enumerate(["a.test", "b.test"]):
        scheduler.add(host, Entry(i, i, f"http://{host}/", 0))
    for _ in range(2):
        job = scheduler.next_job(0.0)
        assert job is not None and job.kind is JobKind.RESOLVE
        await stage._lookup(job.host)
    addressed = {h: s.address for h in table if (s := scheduler.slot(h)) is not None}
    assert addressed == {"a.test": "11.0.0.1", "b.test": "11.0.0.2"}
    resolver.demote("b.test", ["11.0.0.2"])  # the transport, for a.test's request
    stage.ended("a.test", FetchOutcome.CONNECT_ERROR)
    stage.ended("a.test", FetchOutcome.OK)  # not looked up again for nothing
    kinds = []
    while (job := scheduler.next_job(1.0)) is not None:
        kinds.append((job.kind, job.host))
        if job.kind is JobKind.RESOLVE:
            await stage._lookup(job.host)
    assert (JobKind.RESOLVE, "b.test") in kinds and (JobKind.RESOLVE, "a.test") not in kinds
    slot = scheduler.slot("b.test")
    assert slot is not None and slot.address == "11.0.0.3"
    assert resolver.total_lookups == 2  # from the cache


async def test_a_seeds_first_lookup_is_kept_across_a_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A seeded name's first lookup says which private addresses its crawl may reach:
    none for a public name, those it gave for an intranet's. Kept in memory only, the
    first lookup after a restart was taken for the first: a public name rebound to
    127.0.0.1 meanwhile was allowed there (found by a review)."""
    dns = FakeDns({"seed.test": ["93.184.216.34"], "intranet.test": ["10.0.0.5"]})
    seeded = {"seed.test", "intranet.test"}.__contains__

    def stage_on(shard: Shard) -> ResolveStage:
        resolver = Resolver(lookup=dns)
        scheduler = Scheduler(delay=1.0, window=10, loader=lambda h, q, n: [])
        for i, host in enumerate(("seed.test", "intranet.test")):
            scheduler.add(host, Entry(i, i, f"http://{host}/", 0))
        return ResolveStage(
            resolver, scheduler, Closed(), wake=(lambda: None, lambda: None),  # type: ignore[arg-type]
            seeded=seeded, kept=shard,
        )  # fmt: skip

    shard = Shard.open(tmp_path)
    first = stage_on(shard)
    for host in ("seed.test", "intranet.test"):
        await first._lookup(host)
    assert (await first.resolver.resolve("intranet.test")).address == "10.0.0.5"
    shard.close()
    dns.table.update({"seed.test": ["127.0.0.1"], "intranet.test": ["10.0.0.9"]})
    shard = Shard.open(tmp_path)  # a restart
    again = stage_on(shard)
    for host in ("seed.test", "intranet.test"):
        await again._lookup(host)
        answer = await again.resolver.resolve(host)
        assert answer.error is DnsFailure.REFUSED, host
    dns.table["intranet.test"] = ["10.0.0.5"]  # back on the address it had: allowed
    await trio.sleep(3601)
    assert (await again.resolver.resolve("intranet.test")).address == "10.0.0.5"
    shard.close()
