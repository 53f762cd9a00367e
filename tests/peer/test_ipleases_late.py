"""A grant that comes after its asker went ahead without it (the owner slow to answer:
a slow dial, a busy owner) while that asker's request still runs: kept, and given back
when the request ends. Given back at once, it let the owner grant the address to
another peer while the request still ran.

Judged as the web server would: each peer's requests to the address, as spans of
time, never overlap. Two askers and the address's owner, on a wire whose delay is set
per asker."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio
import trio.testing

from tests.cluster.harness import peer_config
from tests.peer.test_ipleases import FakeCrawler, Owner
from ubipy.peer.ipleases import PATIENCE, IpLeases
from ubipy.wire import IpGrant, IpLease, IpRelease, Message

IP_DELAY = 0.2


def leases(peer: str) -> tuple[IpLeases, FakeCrawler]:
    config = peer_config(Path("/nonexistent"), "10.0.0.1:0")
    politeness = dataclasses.replace(config.politeness, ip_delay=IP_DELAY)
    crawler = FakeCrawler()
    ip_leases = IpLeases(
        peer,
        dataclasses.replace(config, politeness=politeness),
        crawler,  # type: ignore[arg-type]
        Owner("o"),  # type: ignore[arg-type]
        patience=PATIENCE,
        grace=0.0,  # the owner's start is long past
    )
    return ip_leases, crawler


class World:
    """The owner ``o`` and askers on a wire: an asker's asks reach the owner after its
    delay, its releases and the owner's answers at once. Each request to the address is
    a span of time in ``requests``."""

    def __init__(self, nursery: trio.Nursery, delays: dict[str, float]) -> None:
        self.nursery = nursery
        self.owner, _ = leases("o")
        self.owner.install(
            lambda kind, handler: None, self._unused, lambda p: None, nursery.start_soon
        )
        self.delays = delays
        self.askers: dict[str, tuple[IpLeases, FakeCrawler]] = {}
        self.requests: list[tuple[float, float, str]] = []
        for peer in delays:
            asker, crawler = leases(peer)
            asker.install(
                lambda kind, handler: None,
                self._sender(peer),
                lambda peer_id: "o:1",
                nursery.start_soon,
            )
            self.askers[peer] = (asker, crawler)

    async def _unused(self, where: str, message: Message) -> bool:
        raise AssertionError("the owner sends nothing here but answers")

    def _sender(self, peer: str) -> Callable[[str, Message], Awaitable[bool]]:
        async def send(where: str, message: Message) -> bool:
            self.nursery.start_soon(self._deliver, peer, message)
            return True

        return send

    async def _deliver(self, peer: str, message: Message) -> None:
        # The delay is the first frame's (a slow dial); the connection is quick then.
        await trio.sleep(self.delays[peer] if isinstance(message, IpLease) else 0.001)
        asker, _ = self.askers[peer]

        async def answer(reply: Message) -> None:
            if isinstance(reply, IpGrant):
                await asker.on_grant("o", reply, back)

        async def back(reply: Message) -> None:
            self.nursery.start_soon(self._deliver, peer, reply)

        if isinstance(message, IpLease):
            await self.owner.on_lease(peer, message, answer)
        elif isinstance(message, IpRelease):
            await self.owner.on_release(peer, message, answer)

    async def request(self, peer: str, host: str, length: float) -> bool:
        """One request of ``peer`` to ``host`` on the address, ``length`` long, if it
        is cleared to go."""
        _, crawler = self.askers[peer]
        cleared = await crawler.clear_to_fetch(host)
        if cleared:
            start = trio.current_time()
            await trio.sleep(length)
            self.requests.append((start, trio.current_time(), peer))
        crawler.on_request_end(host)
        return cleared

    def overlapping(self) -> list[tuple[str, str]]:
        spans = sorted(self.requests)
        return [(a[2], b[2]) for a, b in itertools.pairwise(spans) if b[0] < a[1]]


async def test_a_late_grant_is_held_while_its_request_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A's asks take 4.5 s to reach the owner: A goes ahead at 4 s (its patience,
    twice), unleased, for 5 s; the grant comes at 4.5 s. B asks at 5 s: before, A gave
    the grant back at once and B was granted the address while A's request ran."""
    async with trio.open_nursery() as nursery:
        world = World(nursery, {"a": 2 * PATIENCE + 0.5, "b": 0.001})
        start = trio.current_time()
        nursery.start_soon(world.request, "a", "a.test", 5.0)
        await trio.sleep_until(start + 2 * PATIENCE + 1.0)
        assert not await world.request("b", "b.test", 0.05)  # A's request holds it
        await trio.sleep_until(start + 2 * PATIENCE + 5.0 + 0.01)  # A's request is over
        assert await world.request("b", "b.test", 0.05)
    a, b = sorted(world.requests, key=lambda r: r[2])
    assert world.askers["a"][0].stats.timeouts == 1  # it went ahead unleased
    assert world.overlapping() == []
    assert b[0] >= a[1] + IP_DELAY  # the address's delay after A's request, as leased


async def test_a_grant_that_comes_after_its_request_ended_is_given_back_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A's request (1 s) is over when the grant comes: nothing to hold it for."""
    async with trio.open_nursery() as nursery:
        world = World(nursery, {"a": 2 * PATIENCE + 1.5, "b": 0.001})
        start = trio.current_time()
        nursery.start_soon(world.request, "a", "a.test", 1.0)
        await trio.sleep_until(start + 5.6)  # A's grant came at 5.5 and went back
        assert await world.request("b", "b.test", 0.05)
    assert world.overlapping() == []
