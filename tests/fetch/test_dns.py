"""The resolver of the DNS stage: answers cached for their TTL, failures for less,
lookups bounded in number and in time, fixed answers (--resolve), and addresses a
crawler may not reach refused unless allowed. On the autojump clock."""

from __future__ import annotations

import math
import socket
import threading
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from tests.fetch.test_transport import Server, keep_alive
from ubipy.config import DnsConfig
from ubipy.errors import ConfigError
from ubipy.fetch import FetchOutcome, dns, fetch, is_retryable
from ubipy.fetch.dns import (
    FAILURE_TTL,
    FIRST_TIMEOUT,
    STALE_LIMIT,
    DnsFailure,
    Lookup,
    Resolver,
    address_key,
    is_public,
    split_host,
)
from ubipy.fetch.transport import PooledTransport
from ubipy.fetch.urls import ip_literal


class FakeDns:
    """A system resolver: ``table`` names answer at once; others do not exist,
    after ``slow`` seconds."""

    def __init__(self, table: dict[str, list[str]], slow: float = 0.0) -> None:
        self.table = table
        self.slow = slow
        self.asked: list[str] = []
        self.at_once = 0
        self.most_at_once = 0

    async def __call__(self, name: str) -> list[str]:
        self.asked.append(name)
        self.at_once += 1
        self.most_at_once = max(self.most_at_once, self.at_once)
        try:
            if name in self.table:
                await trio.sleep(0.01)
                return self.table[name]
            await trio.sleep(self.slow)
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        finally:
            self.at_once -= 1


@pytest.mark.parametrize(
    ("address", "key"),
    [
        ("93.184.215.14", "93.184.215.14"),
        ("::ffff:93.184.215.14", "93.184.215.14"),
        ("::ffff:5db8:d70e", "93.184.215.14"),
        ("64:ff9b::5db8:d70e", "93.184.215.14"),
        ("2001:DB8:0:0::1", "2001:db8::1"),
        ("2002:5db8:d70e::1", "2002:5db8:d70e::1"),  # 6to4: a relay's address, not the host's
        ("::1", "::1"),
    ],
)
def test_an_addresss_per_ip_key_is_the_server_it_reaches(address: str, key: str) -> None:
    assert address_key(address) == key


def test_host_keys_give_their_names() -> None:
    assert split_host("example.com") == "example.com"
    assert split_host("example.com:8080") == "example.com"
    assert split_host("[2001:db8::1]:8080") == "2001:db8::1"


@pytest.mark.parametrize(
    ("name", "address"),
    [
        ("93.184.216.34", "93.184.216.34"),
        ("2001:db8:0::1", "2001:db8::1"),
        ("::ffff:127.0.0.1", "::ffff:7f00:1"),
        ("example.com", None),
        ("h1.synth.test", None),
        ("host1", None),  # ends in a digit: parsed, and not an address
        ("1.2.3", None),
        ("ff:gg", None),
        ("", None),
    ],
)
def test_an_ip_literal_is_told_from_a_name(name: str, address: str | None) -> None:
    assert ip_literal(name) == address


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("93.184.216.34", True),
        ("2606:4700::1111", True),
        ("127.0.0.1", False),
        ("10.1.2.3", False),
        ("172.16.0.9", False),
        ("192.168.1.1", False),
        ("169.254.169.254", False),  # a cloud's metadata service
        ("0.0.0.0", False),
        ("::1", False),
        ("fe80::1", False),
        ("fd00::1", False),
        ("::ffff:127.0.0.1", False),  # loopback mapped into IPv6
        ("224.0.0.1", False),
        # IPv6 forms that carry an IPv4 address, judged by it (a NAT64 gateway on an
        # IPv6-only network carries the first to the metadata service).
        ("64:ff9b::a9fe:a9fe", False),
        ("64:ff9b::a00:5", False),
        ("64:ff9b::7f00:1", False),
        ("64:ff9b::5db8:d822", True),  # 93.184.216.34 through NAT64
        ("64:ff9b:1::a00:5", False),  # local-use NAT64
        ("::ffff:0:a9fe:a9fe", False),  # SIIT's translated form
        ("::127.0.0.1", False),  # the deprecated compatible form
        ("::", False),
        ("2002:a9fe:a9fe::1", False),  # 6to4
        ("2002:5db8:d822::1", True),
        ("fec0::1", False),  # site-local, deprecated
        # Special-use ranges Python 3.11 counts as global: listed, whatever the version.
        ("192.0.0.8", False),  # IETF protocol assignments
        ("192.0.0.9", True),  # ... but its anycast services
        ("192.88.99.1", False),  # the 6to4 relay anycast
        ("5f00::1", False),  # SRv6 SIDs
        ("3fff::1", False),  # documentation
    ],
)
def test_only_globally_routable_addresses_are_public(address: str, public: bool) -> None:
    assert is_public(address) is public


async def test_an_answer_is_kept_for_the_ttl_and_a_host_costs_one_lookup(
    autojump_clock: trio.testing.MockClock,
) -> None:
    dns = FakeDns({"a.test": ["93.184.216.34", "93.184.216.35"]})
    resolver = Resolver(ttl=100.0, lookup=dns)
    for _ in range(5):
        answer = await resolver.resolve("a.test")
        assert answer.address == "93.184.216.34" and answer.error is None
    assert await resolver.resolve("a.test:8080") == answer  # one name, whatever the port
    assert dns.asked == ["a.test"] and resolver.lookups["a.test"] == 1
    await trio.sleep(100.0)
    await resolver.resolve("a.test")
    assert resolver.lookups["a.test"] == 2


async def test_names_of_no_more_use_are_forgotten(autojump_clock: trio.testing.MockClock) -> None:
    # A crawl meets millions of names: those whose answers expired past serving them
    # stale go, with their counts, once the cache has grown enough to look.
    old = [f"old{i}.test" for i in range(5000)]
    new = [f"new{i}.test" for i in range(5000)]
    dns = FakeDns({name: ["93.184.216.34"] for name in old + new})
    resolver = Resolver(ttl=10.0, lookup=dns)
    for name in old:
        await resolver.resolve(name)
    await trio.sleep(10.0 + STALE_LIMIT + 1.0)
    for name in new:
        await resolver.resolve(name)
    assert set(resolver.lookups) == set(new)
    assert (resolver.total_lookups, resolver.most_lookups) == (10_000, 1)


async def test_a_name_asked_for_twice_at_once_is_looked_up_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A round-robin name answers each lookup with another address: two lookups at
    # once (two ports of the name) gave the per-IP rule one address and the
    # transport the other.
    rotation = iter(["192.0.2.10", "192.0.2.20"])

    async def round_robin(name: str) -> list[str]:
        await trio.sleep(0.05)
        return [next(rotation)]

    resolver = Resolver(lookup=round_robin, allow_private=True)
    answers: list[Lookup] = []

    async def ask(host: str) -> None:
        answers.append(await resolver.resolve(host))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask, "example.com")
        nursery.start_soon(ask, "example.com:8080")
    assert [a.address for a in answers] == ["192.0.2.10", "192.0.2.10"]
    assert resolver.total_lookups == 1
    pinned = resolver.pinned("example.com")
    assert pinned is not None and pinned.address == "192.0.2.10"


async def test_a_lookup_cancelled_leaves_the_others_to_look_up_themselves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    dns = FakeDns({"a.test": ["93.184.216.34"]})
    resolver = Resolver(lookup=dns)
    answers: list[Lookup] = []

    async def ask() -> None:
        answers.append(await resolver.resolve("a.test"))

    cut = trio.CancelScope()

    async def first() -> None:
        with cut:
            await resolver.resolve("a.test")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(first)
        await trio.testing.wait_all_tasks_blocked()  # its lookup under way
        nursery.start_soon(ask)  # waits for it
        await trio.testing.wait_all_tasks_blocked()
        cut.cancel()
    assert [a.address for a in answers] == ["93.184.216.34"]
    assert dns.asked == ["a.test", "a.test"]


async def test_names_that_only_time_out_are_forgotten_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A time-out is no answer and is not cached: the names a hostile page's dead
    # links give were kept in the counts for ever.
    async def lookup(name: str) -> list[str]:
        if name.startswith("dead"):
            await trio.sleep_forever()
        return ["93.184.216.34"]

    resolver = Resolver(lookup=lookup, concurrency=1000, ttl=60.0)
    async with trio.open_nursery() as nursery:
        for i in range(5000):
            nursery.start_soon(resolver.resolve, f"dead{i}.test")
    async with trio.open_nursery() as nursery:
        for i in range(5000):
            nursery.start_soon(resolver.resolve, f"live{i}.test")
    assert not any(name.startswith("dead") for name in resolver.lookups)
    assert resolver.total_lookups == 10_000


async def test_a_failure_is_kept_a_shorter_while(autojump_clock: trio.testing.MockClock) -> None:
    dns = FakeDns({})
    resolver = Resolver(ttl=3600.0, lookup=dns)
    assert (await resolver.resolve("gone.test")).error is DnsFailure.NO_SUCH_NAME
    assert (await resolver.resolve("gone.test")).error is DnsFailure.NO_SUCH_NAME
    assert len(dns.asked) == 1
    await trio.sleep(FAILURE_TTL)
    await resolver.resolve("gone.test")
    assert len(dns.asked) == 2


async def test_lookups_are_bounded_in_number_and_in_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    dns = FakeDns({}, slow=60.0)
    resolver = Resolver(timeout=5.0, concurrency=4, lookup=dns)
    answers = []

    async def one(name: str) -> None:
        answers.append(await resolver.resolve(name))

    for patience in (FIRST_TIMEOUT, 5.0):  # a name's first lookup, then the next ones
        answers.clear()
        start = trio.current_time()
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(one, f"slow{i}.test")
        assert dns.most_at_once == 4
        assert {a.error for a in answers} == {DnsFailure.TIMEOUT}
        # 20 lookups, 4 at a time; a time-out is not an answer, so nothing is cached.
        assert trio.current_time() - start == pytest.approx(5 * patience)
    assert len(dns.asked) == 40


class Outage:
    """A resolver that answers a.test, except from ``start`` to ``end`` when it
    fails (EAI_AGAIN) or, with ``hang``, never answers."""

    def __init__(self, start: float, end: float, *, hang: bool = False) -> None:
        self.start, self.end, self.hang = start, end, hang
        self.asked: list[float] = []

    async def __call__(self, name: str) -> list[str]:
        now = trio.current_time()
        self.asked.append(now)
        if self.start <= now < self.end:
            if self.hang:
                await trio.sleep_forever()
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return ["93.184.216.34"]


@pytest.mark.parametrize("hang", [False, True], ids=["fails", "hangs"])
async def test_a_resolver_outage_serves_the_last_address_and_asks_again_meanwhile(
    autojump_clock: trio.testing.MockClock, hang: bool
) -> None:
    # RFC 8767's serve-stale: the resolver's outage is not the host's.
    dns = Outage(100.0, 1000.0, hang=hang)
    resolver = Resolver(ttl=100.0, lookup=dns)
    assert (await resolver.resolve("a.test")).address == "93.184.216.34"
    await trio.sleep(100.0)
    for _ in range(3):
        answer = await resolver.resolve("a.test")
        assert (answer.address, answer.error) == ("93.184.216.34", None)
        # Asked again after a failure's while, not the answer's whole TTL.
        assert resolver.fresh_until("a.test") <= trio.current_time() + FAILURE_TTL
        await trio.sleep(FAILURE_TTL)
    assert len(dns.asked) == 4 and resolver.served_stale == 3
    # Once it answers again, the answer is fresh for its TTL.
    await trio.sleep(1000.0 - trio.current_time())
    await resolver.resolve("a.test")
    assert resolver.fresh_until("a.test") == pytest.approx(trio.current_time() + 100.0)


async def test_a_stale_address_is_served_for_a_day_at_most(
    autojump_clock: trio.testing.MockClock,
) -> None:
    dns = Outage(100.0, math.inf)
    resolver = Resolver(ttl=100.0, lookup=dns)
    await resolver.resolve("a.test")
    await trio.sleep(100.0 + STALE_LIMIT - 1.0)
    assert (await resolver.resolve("a.test")).address == "93.184.216.34"
    await trio.sleep(FAILURE_TTL)
    assert (await resolver.resolve("a.test")).error is DnsFailure.TEMPORARY


@pytest.mark.parametrize("hang", [False, True], ids=["fails", "hangs"])
async def test_a_stale_address_stops_a_day_after_its_expiry_however_often_asked(
    autojump_clock: trio.testing.MockClock, hang: bool
) -> None:
    # Asked every minute, as a host's retries do: each serving cached the answer
    # again, and a time-out's failure is not cached, so the day's limit started
    # afresh and a name whose servers stopped answering kept its address for ever
    # (a review found it).
    dns = Outage(100.0, math.inf, hang=hang)
    resolver = Resolver(ttl=100.0, lookup=dns)
    await resolver.resolve("a.test")
    errors = []
    for _ in range(int(3 * STALE_LIMIT / 60)):
        await trio.sleep(60.0)
        errors.append(((await resolver.resolve("a.test")).error, trio.current_time()))
    # Served its last address for a day past its expiry, then failing (asked for
    # nearly two days more).
    first = next(i for i, (error, _) in enumerate(errors) if error is not None)
    assert errors[first][1] == pytest.approx(100.0 + STALE_LIMIT, abs=120.0)
    assert all(error is not None for error, _ in errors[first:])


async def test_a_name_that_no_longer_exists_is_not_served_stale(
    autojump_clock: trio.testing.MockClock,
) -> None:
    dns = FakeDns({"a.test": ["93.184.216.34"]})
    resolver = Resolver(ttl=100.0, lookup=dns)
    await resolver.resolve("a.test")
    del dns.table["a.test"]
    await trio.sleep(100.0)
    assert (await resolver.resolve("a.test")).error is DnsFailure.NO_SUCH_NAME


async def test_a_live_name_waits_for_a_thread_rather_than_time_out_behind_dead_ones(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """getaddrinfo cannot be cancelled: a dead name's thread, abandoned at its
    time-out, keeps its place until the system resolver gives up. A live name that
    found every place taken used to spend its patience waiting for one, and failed
    without being looked up; the wait is no longer timed."""
    gate = threading.Event()
    called: list[str] = []

    def getaddrinfo(name: str, *args: object, **kwargs: object) -> list[tuple[Any, ...]]:
        called.append(name)
        if name.startswith("dead"):
            gate.wait(10.0)  # a lame delegation: the system resolver's own time-outs
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(dns, "FIRST_TIMEOUT", 0.05)
    resolver = Resolver(concurrency=2)  # four threads
    answers: list[Lookup] = []

    async def live() -> None:
        answers.append(await resolver.resolve("live.test"))

    try:
        for i in range(4):
            assert (await resolver.resolve(f"dead{i}.test")).error is DnsFailure.TIMEOUT
        async with trio.open_nursery() as nursery:
            nursery.start_soon(live)
            await trio.sleep(0.2)  # the dead names take longer than the live one's patience
            assert "live.test" not in called  # every thread is taken
            gate.set()
    finally:
        gate.set()
    assert [a.address for a in answers] == ["93.184.216.34"]


async def test_temporary_failures_are_told_apart() -> None:
    async def again(name: str) -> list[str]:
        raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")

    resolver = Resolver(lookup=again)
    assert (await resolver.resolve("flaky.test")).error is DnsFailure.TEMPORARY


async def test_fixed_answers_win_and_without_the_system_only_they_answer() -> None:
    dns = FakeDns({"a.test": ["93.184.216.34"]})
    overrides = DnsConfig(resolve=("a.test:203.0.113.9,2001:db8::9",)).overrides()
    resolver = Resolver(system=False, overrides=overrides, allow_private=True, lookup=dns)
    assert (await resolver.resolve("a.test")).addresses == ("203.0.113.9", "2001:db8::9")
    assert (await resolver.resolve("b.test")).error is DnsFailure.NO_SUCH_NAME
    assert dns.asked == []
    assert resolver.wanted("a.test") and not resolver.wanted("b.test")
    assert resolver.wanted("192.0.2.1:80") and resolver.wanted("[::1]:8080")


async def test_a_fixed_answer_for_an_internationalised_name_applies_in_either_form() -> None:
    # Hosts are punycode once normalised: given in Unicode, it matched none (a review).
    overrides = DnsConfig(
        resolve=("bücher.test:203.0.113.9", "XN--P0XP4Y9JAO6V.test:203.0.113.7")
    ).overrides()
    resolver = Resolver(system=False, overrides=overrides, allow_private=True)
    assert (await resolver.resolve("xn--bcher-kva.test")).addresses == ("203.0.113.9",)
    assert (await resolver.resolve("xn--p0xp4y9jao6v.test")).addresses == ("203.0.113.7",)


async def test_addresses_that_may_not_be_reached_are_refused_unless_allowed() -> None:
    dns = FakeDns({"inside.test": ["10.0.0.5"], "outside.test": ["93.184.216.34"]})
    resolver = Resolver(lookup=dns)
    for host in ("169.254.169.254", "127.0.0.1:7000", "[::1]:8080", "inside.test"):
        assert (await resolver.resolve(host)).error is DnsFailure.REFUSED, host
    assert (await resolver.resolve("outside.test")).error is None
    assert resolver.refused["169.254.169.254"] == 1
    # A seed was there: its first lookup was refused, so what it answered is allowed.
    assert resolver.exempt("inside.test:8080", await resolver.resolve("inside.test:8080"))
    assert (await resolver.resolve("inside.test:8080")).address == "10.0.0.5"
    # That port only: not every service of the address (a peer's own port, say).
    assert (await resolver.resolve("inside.test")).error is DnsFailure.REFUSED
    assert (await resolver.resolve("inside.test:7000")).error is DnsFailure.REFUSED
    allowing = Resolver(lookup=dns, allow_private=True)
    assert (await allowing.resolve("127.0.0.1:7000")).address == "127.0.0.1"


async def test_a_seeds_allowance_is_the_addresses_of_its_first_lookup_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A seed on a name is allowed the private addresses its first lookup gave, and no
    other: allowed whatever it resolved to, a seeded name of public address rebound to
    127.0.0.1 (DNS rebinding) was fetched, and its answer stored (found by a review)."""
    dns = FakeDns({"seed.test": ["93.184.216.34"]})
    resolver = Resolver(lookup=dns, ttl=60)
    # A lookup that found no address is not the first: it showed nothing.
    missing = await resolver.resolve("intranet.test")
    assert missing.error is DnsFailure.NO_SUCH_NAME
    assert not resolver.exempt("intranet.test", missing)
    await trio.sleep(3600)
    dns.table["intranet.test"] = ["10.0.0.5"]
    public = await resolver.resolve("seed.test")
    assert public.address == "93.184.216.34"
    assert not resolver.exempt("seed.test", public)  # nothing to allow
    first = await resolver.resolve("intranet.test")
    assert resolver.exempt("intranet.test", first)
    await trio.sleep(61)
    dns.table.update({"seed.test": ["127.0.0.1"], "intranet.test": ["10.0.0.9"]})
    for host in ("seed.test", "intranet.test"):
        answer = await resolver.resolve(host)
        assert answer.error is DnsFailure.REFUSED, host
        assert not resolver.exempt(host, answer), host  # asked again: not a first lookup
        assert (await resolver.resolve(host)).error is DnsFailure.REFUSED, host
    # Back on the address it had: allowed again.
    dns.table["intranet.test"] = ["10.0.0.5"]
    await trio.sleep(61)
    assert (await resolver.resolve("intranet.test")).address == "10.0.0.5"


async def test_a_cloud_metadata_address_is_a_seeds_only_when_the_seed_is_on_it() -> None:
    dns = FakeDns(
        {
            "metadata.test": ["169.254.169.254"],
            "v6.test": ["fd00:ec2::254"],
            "alibaba.test": ["100.100.100.200"],
            "oracle.test": ["192.0.0.192"],
        }
    )
    resolver = Resolver(lookup=dns)
    for host in ("metadata.test", "v6.test", "alibaba.test", "oracle.test"):
        answer = await resolver.resolve(host)
        assert not resolver.exempt(host, answer), host
        assert (await resolver.resolve(host)).error is DnsFailure.REFUSED, host
    # A seed typed as the address itself: the user asked for it.
    literal = await resolver.resolve("169.254.169.254")
    assert resolver.exempt("169.254.169.254", literal)
    assert (await resolver.resolve("169.254.169.254")).address == "169.254.169.254"


@pytest.mark.parametrize(
    "entry", ["a.test", "a.test:", ":1.2.3.4", "a.test:not-an-address", "a.test:1.2.3.4,x"]
)
def test_a_bad_resolve_entry_is_a_config_error(entry: str) -> None:
    with pytest.raises(ConfigError, match="resolve"):
        DnsConfig(resolve=(entry,))


async def test_the_transport_connects_to_the_checked_address_and_nowhere_else(
    nursery: trio.Nursery,
) -> None:
    """A name only --resolve knows reaches the server through the pinned address;
    the same name refused (a private address, not allowed) reaches nothing."""
    server = Server(keep_alive)
    await nursery.start(server.serve)
    url = f"http://only-here.test:{server.port}/x"
    overrides = {"only-here.test": ("127.0.0.1",)}
    nowhere = FakeDns({})
    allowing = Resolver(overrides=overrides, allow_private=True, lookup=nowhere)
    transport = PooledTransport(resolver=allowing)
    async with httpx2.AsyncClient(transport=transport) as client:
        result = await fetch(client, url, max_bytes=1000)
    assert result.status == 200 and result.body == b"hello"
    assert server.connections == 1 and nowhere.asked == []

    refusing = Resolver(overrides=overrides, lookup=nowhere)
    async with httpx2.AsyncClient(transport=PooledTransport(resolver=refusing)) as client:
        result = await fetch(client, url, max_bytes=1000)
    assert result.outcome is FetchOutcome.REFUSED
    assert "not a public address" in (result.detail or "")
    assert not is_retryable(result)
    assert server.connections == 1  # nothing more reached the server


async def test_behind_a_proxy_ip_literals_and_pinned_names_are_still_checked(
    nursery: trio.Nursery,
) -> None:
    """The proxy looks names up itself, so a name is passed on; but an IP literal (a
    robots.txt redirected to 127.0.0.1:7000, say, which reaches the transport without
    the DNS stage), a --resolve name and localhost are checked before the proxy is
    asked."""
    proxy = Server(keep_alive)
    await nursery.start(proxy.serve)
    nowhere = FakeDns({})
    resolver = Resolver(system=False, overrides={"inside.test": ("10.0.0.5",)}, lookup=nowhere)
    transport = PooledTransport(proxy=f"http://127.0.0.1:{proxy.port}", resolver=resolver)
    async with httpx2.AsyncClient(transport=transport) as client:
        # localhost and the names under it are loopback by definition (RFC 6761): the
        # proxy, on this machine as a forward proxy often is, would reach its own.
        for url in (
            "http://127.0.0.1:7000/robots.txt",
            "http://[::1]/",
            "http://inside.test/",
            "http://localhost:8080/",
            "http://api.localhost/",
        ):
            result = await fetch(client, url, max_bytes=1000)
            assert result.outcome is FetchOutcome.REFUSED, url
        assert proxy.connections == 0
        result = await fetch(client, "http://a-name.test/x", max_bytes=1000)
    assert result.status == 200 and proxy.connections == 1 and nowhere.asked == []


async def test_the_first_address_that_may_be_reached_is_the_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A private address first (a stray internal record, a ULA sorted first), a public
    # one after it: the host was refused and given up (a review found).
    resolver = Resolver(lookup=FakeDns({"a.test": ["fd12:3456::1", "10.0.0.1", "93.184.215.14"]}))
    answer = await resolver.resolve("a.test")
    assert (answer.address, answer.error) == ("93.184.215.14", None)
    assert not resolver.refused
    only_private = Resolver(lookup=FakeDns({"b.test": ["fd12:3456::1", "10.0.0.1"]}))
    assert (await only_private.resolve("b.test")).error is DnsFailure.REFUSED


async def test_the_answers_kept_are_bounded_the_soonest_expired_going_first(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Answers were kept a day past their expiry whatever their number: a broad crawl
    # meeting 50 names a second held 4 million, 1.7 GB (a review found).
    monkeypatch.setattr(dns, "MAX_NAMES", 200)
    monkeypatch.setattr(dns, "_SWEEP_AT", 16)
    names = [f"n{i}.test" for i in range(1_000)]
    resolver = Resolver(ttl=60.0, lookup=FakeDns({name: ["93.184.215.14"] for name in names}))
    for name in names:
        assert (await resolver.resolve(name)).address == "93.184.215.14"
        await trio.sleep(1.0)
        assert len(resolver._cache) <= 200
    # The names met last are still answered from the cache; the first ones were let go.
    assert resolver.fresh_until(names[-1]) > trio.current_time()
    assert resolver.fresh_until(names[0]) == -math.inf
