"""The resolver's threads: getaddrinfo cannot be cancelled, and a name whose servers
never answer keeps its thread for the system resolver's own time-outs. The names of
one domain hold a few threads at most."""

from __future__ import annotations

import socket
import threading
from typing import Any

import pytest
import trio
import trio.testing

from ubipy.fetch import dns
from ubipy.fetch.dns import DnsFailure, Lookup, Resolver


@pytest.fixture
def system_dns(monkeypatch: pytest.MonkeyPatch) -> Any:
    """getaddrinfo whose names under hostile.test hang until the test lets them go;
    the others answer at once. Gives the event that lets them go, and the names
    asked."""
    gate = threading.Event()
    asked: list[str] = []

    def getaddrinfo(name: str, *args: object, **kwargs: object) -> list[tuple[Any, ...]]:
        asked.append(name)
        if name.endswith("hostile.test"):
            gate.wait(10.0)  # a lame delegation: the system resolver's own time-outs
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("93.184.216.34", 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(dns, "FIRST_TIMEOUT", 0.5)
    yield gate, asked
    gate.set()


async def test_one_domains_dead_names_leave_threads_for_the_others(system_dns: Any) -> None:
    """A page's links to 64 names of one zone whose servers never answer held every
    thread: a live name asked after them was answered 12 s later (a review)."""
    gate, asked = system_dns
    resolver = Resolver(concurrency=4)  # eight threads, two for a domain's names
    dead: list[Lookup] = []

    async def one(name: str) -> None:
        dead.append(await resolver.resolve(name))

    async with trio.open_nursery() as nursery:
        for i in range(64):
            nursery.start_soon(one, f"n{i}.hostile.test")
        await trio.testing.wait_all_tasks_blocked()
        with trio.fail_after(5.0):  # a moment, not the dead names' time-outs
            live = await resolver.resolve("live.example")
            assert live.address == "93.184.216.34"
            # And another live domain's names, more than a domain's share at once.
            async with trio.open_nursery() as others:
                for i in range(6):
                    others.start_soon(resolver.resolve, f"w{i}.live.example")
        assert sum(name.endswith("hostile.test") for name in asked) <= 2
        gate.set()
    # None of them was answered: each timed out (or, let go, failed).
    assert len(dead) == 64
    assert {a.error for a in dead} <= {DnsFailure.TIMEOUT, DnsFailure.TEMPORARY}
    assert resolver.pinned("w5.live.example") is not None
    assert len(resolver._domains) <= 1  # hostile.test's, until its threads end: no more
