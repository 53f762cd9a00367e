"""A seeded host handed to its new owner takes its first lookup with it: looked up
afresh there, a seeded name of public address rebound to 127.0.0.1 meanwhile was taken
for the seed's own address, and allowed (a review)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from tests.fetch.test_dns import FakeDns
from tests.peer.test_handoff_revisits import HOST, crawler_at, hand_over
from ubipy.fetch import DnsFailure, Resolver


def _on(table: dict[str, list[str]]) -> Resolver:
    return Resolver(lookup=FakeDns(table))


async def test_a_seeded_hosts_first_lookup_goes_with_it(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    name = HOST.partition(":")[0]
    async with (
        crawler_at(tmp_path / "a", recrawl=False, resolver=_on({name: ["93.184.216.34"]})) as a,
        crawler_at(tmp_path / "b", recrawl=False, resolver=_on({name: ["127.0.0.1"]})) as b,
    ):
        assert a.dns is not None and b.dns is not None
        first = await a.dns.resolver.resolve(HOST)  # a seed's host, public: nothing allowed
        assert not a.dns.resolver.exempt(HOST, first) and a.seed_lookup_of(HOST) == frozenset()
        a._shard.take_done(HOST, [1, 2])
        b.scope.add_seed(f"http://{HOST}/")  # the seeds are every peer's (SCOPE frames)
        frames, _ = await hand_over(a, b)
        assert frames and all(f.seed_lookup == () for f in frames)
        # b's first lookup of it is not the first: 127.0.0.1 stays refused.
        answer = await b.dns.resolver.resolve(HOST)
        assert answer.error is DnsFailure.REFUSED and not b.dns.resolver.exempt(HOST, answer)
        assert b._shard.seed_lookups() == {HOST: frozenset()}  # across a restart too


async def test_a_lookup_handed_over_allows_no_more_than_the_receiver_s_own(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A host handed back by a peer that looked it up after a rebinding (or by a buggy
    peer): what it says allows nothing this peer's own first lookup refused, no metadata
    service for a name, and nothing at all for a host no seed here is on (a review)."""
    name = HOST.partition(":")[0]
    async with crawler_at(tmp_path, recrawl=False, resolver=_on({name: ["127.0.0.1"]})) as b:
        assert b.dns is not None
        resolver = b.dns.resolver
        b.adopt_seed_lookup(HOST, frozenset({"127.0.0.1"}))  # not a seed's here: ignored
        assert resolver.first_lookup(HOST) is None and b._shard.seed_lookups() == {}
        b.scope.add_seed(f"http://{HOST}/")
        resolver.remember({HOST: frozenset()})  # its first lookup here: public
        b.adopt_seed_lookup(HOST, frozenset({"127.0.0.1", "169.254.169.254"}))
        assert resolver.first_lookup(HOST) == frozenset()
        assert (await resolver.resolve(HOST)).error is DnsFailure.REFUSED
        assert b._shard.seed_lookups() == {HOST: frozenset()}
        other = "intranet.test"
        b.scope.add_seed(f"http://{other}/")
        b.adopt_seed_lookup(other, frozenset({"10.0.0.5", "169.254.169.254"}))
        assert resolver.first_lookup(other) == frozenset({"10.0.0.5"})  # no metadata
