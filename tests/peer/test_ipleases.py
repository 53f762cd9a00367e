"""The per-IP rule across peers. The owner's lease table: one holder per address, a
denial says how long to wait, a release starts the address's delay, and a lease whose
holder died expires. The asker: a lease is given back when its request ends, a denied
host waits what it was told, a silent owner is waited for no longer than the patience,
and a grant that comes too late is given back."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import trio
import trio.testing

from tests.cluster.harness import peer_config
from ubipy.peer.ipleases import IpLeases, LeaseStats
from ubipy.peer.leasetable import LeaseTable, Verdict
from ubipy.wire import IpGrant, IpLease, IpRelease, Message

A = "11.1.1.1"
P, Q = ("p", 1), ("q", 1)


def table() -> LeaseTable:
    return LeaseTable(ip_delay=0.2, term=30.0)


def test_a_free_address_is_granted_and_then_denied_to_another_holder() -> None:
    leases = table()
    assert leases.ask(A, P, 10.0) == Verdict(True)
    denied = leases.ask(A, Q, 10.1)
    assert not denied.granted
    # Nothing known of how long requests last yet: at least the address's delay.
    assert denied.wait == pytest.approx(0.2)
    # Another address is another lease.
    assert leases.ask("11.1.1.2", Q, 10.1).granted


def test_the_same_request_asking_again_keeps_its_lease() -> None:
    leases = table()
    assert leases.ask(A, P, 1.0).granted
    assert leases.ask(A, P, 1.5).granted
    assert not leases.ask(A, ("p", 2), 1.5).granted  # the same peer's next request waits


def test_a_release_starts_the_address_delay() -> None:
    leases = table()
    leases.ask(A, P, 10.0)
    assert leases.release(A, P, 10.5)
    early = leases.ask(A, Q, 10.6)
    assert not early.granted and early.wait == pytest.approx(0.1)
    assert leases.ask(A, Q, 10.7).granted


def test_a_release_that_says_the_server_s_wait_holds_the_address_as_long() -> None:
    """The holder heard the server ask for more than the IP delay (its pace, a 503's
    back-off, a Retry-After): the owner denies the address to every peer as long."""
    leases = table()
    leases.ask(A, P, 10.0)
    assert leases.release(A, P, 10.5, wait=8.0)
    early = leases.ask(A, Q, 18.4)
    assert not early.granted and early.wait == pytest.approx(0.1)
    assert leases.ask(A, Q, 18.5).granted


def test_a_denial_while_held_counts_on_how_long_requests_last() -> None:
    leases = table()
    leases.ask(A, P, 0.0)
    leases.release(A, P, 1.0)  # a request lasts about a second here
    leases.ask(A, Q, 2.0)
    assert leases.ask(A, ("r", 1), 2.25).wait == pytest.approx(0.75 + 0.2)
    # Past the usual length: the delay, no less.
    assert leases.ask(A, ("r", 2), 4.0).wait == pytest.approx(0.2)


def test_only_the_holder_releases() -> None:
    leases = table()
    leases.ask(A, P, 0.0)
    assert not leases.release(A, Q, 0.1)
    assert not leases.release(A, ("p", 2), 0.1)  # not the request that holds it
    assert not leases.release("11.9.9.9", P, 0.1)
    assert not leases.ask(A, Q, 0.2).granted


def test_a_lease_whose_holder_died_expires_after_its_term() -> None:
    leases = table()
    leases.ask(A, P, 0.0)
    assert not leases.ask(A, Q, 29.9).granted
    # Expired at 30: it counts as ended then, and the address waits its delay.
    late = leases.ask(A, Q, 30.1)
    assert not late.granted and late.wait == pytest.approx(0.1)
    assert leases.ask(A, Q, 30.2).granted
    # The dead holder's release, should it come after all, changes nothing.
    assert not leases.release(A, P, 30.3)
    assert not leases.ask(A, ("r", 1), 30.3).granted


def test_idle_addresses_are_forgotten() -> None:
    leases = table()
    for i in range(3000):
        address = f"11.0.{i // 250}.{i % 250}"
        leases.ask(address, P, float(i))
        leases.release(address, P, float(i))
    # Each address is free a fifth of a second after its release: few are kept.
    assert len(leases) <= 1024 + 1
    # A held address survives a sweep.
    leases.ask(A, Q, 5000.0)
    for i in range(2000):
        leases.ask(f"12.0.{i // 250}.{i % 250}", P, 5000.0)
    assert not leases.ask(A, ("r", 1), 5000.0).granted


# --------------------------------------------------------------------------- the asker


class FakeScheduler:
    def __init__(self) -> None:
        self.not_before: dict[str, float] = {}
        self.address_not_before: dict[str, float] = {}
        # When this peer's own rule lets each address be asked again.
        self.free_at: dict[str, float] = {}

    def slot(self, host: str) -> SimpleNamespace | None:
        address = None if host == "noaddress.test" else A
        return SimpleNamespace(address=address, ip=address)

    def restore_host(self, host: str, *, not_before: float, pages: int) -> None:
        self.not_before[host] = not_before

    def defer_address(self, address: str, until: float) -> None:
        self.address_not_before[address] = until

    def address_free_at(self, address: str) -> float:
        return self.free_at.get(address, -math.inf)


class FakeCrawler:
    def __init__(self) -> None:
        self.scheduler = FakeScheduler()
        self.clear_to_fetch: Callable[[str], Awaitable[bool]] = self._yes
        self.on_request_end: Callable[[str], None] = lambda host: None

    async def _yes(self, host: str) -> bool:
        return True


class Owner:
    def __init__(self, owner: str) -> None:
        self.id = owner

    def owner(self, address: str) -> str:
        return self.id


class Wire:
    """Frames sent, and an owner answering as told (None: silence)."""

    def __init__(self, answer: IpGrant | None = None) -> None:
        self.sent: list[tuple[str, Message]] = []
        self.answer = answer
        self.leases: IpLeases | None = None

    async def send(self, address: str, message: Message) -> bool:
        self.sent.append((address, message))
        if isinstance(message, IpLease) and self.answer is not None and self.leases:
            grant = dataclasses.replace(self.answer, id=message.id)
            await self.leases.on_grant("q", grant, self.reply)
        return address != "gone:1"

    async def reply(self, message: Message) -> None:
        self.sent.append(("reply", message))


def asker(
    owner: str, answer: IpGrant | None = None, where: str = "q:1", grace: float = 0.0
) -> tuple[IpLeases, FakeCrawler, Wire]:
    """Peer "p", whose addresses ``owner`` owns (``grace``: "p"'s start's, as an owner)."""
    crawler, wire = FakeCrawler(), Wire(answer)
    config = peer_config(Path("/nonexistent"), "10.0.0.1:0")
    config = dataclasses.replace(
        config, politeness=dataclasses.replace(config.politeness, ip_delay=0.2)
    )
    leases = IpLeases("p", config, crawler, Owner(owner), patience=2.0, grace=grace)  # type: ignore[arg-type]
    wire.leases = leases

    def handle(kind: object, handler: object) -> None:
        pass

    leases.install(handle, wire.send, lambda peer: where, lambda fn, *args: None)
    return leases, crawler, wire


async def granted() -> tuple[IpLeases, FakeCrawler, Wire, IpLease]:
    """An asker granted the lease it asked q for, for h.test's request: and that ask."""
    leases, crawler, wire = asker("q", IpGrant(0, A, True))
    assert await crawler.clear_to_fetch("h.test")
    [(_, lease)] = wire.sent
    assert isinstance(lease, IpLease)
    return leases, crawler, wire, lease


async def test_a_granted_lease_is_given_back_when_the_request_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leases, crawler, _, lease = await granted()
    started: list[object] = []
    leases._start_soon = lambda fn, *args: started.append(args)
    # The request's answer made this peer's rule hold the address 6 s (a slow server):
    # the release says so, for the owner to hold it as long for the other peers.
    crawler.scheduler.free_at[A] = trio.current_time() + 6.0
    crawler.on_request_end("h.test")
    assert started == [(IpRelease(lease.id, A, 6.0),)]
    assert (leases.stats.granted, leases.stats.denied, leases.stats.timeouts) == (1, 0, 0)


async def test_a_denied_host_waits_what_the_owner_said_and_so_does_its_address(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leases, crawler, _ = asker("q", IpGrant(0, A, False, 1.5))
    assert not await crawler.clear_to_fetch("h.test")
    crawler.on_request_end("h.test")
    assert crawler.scheduler.not_before == {"h.test": trio.current_time() + 1.5}
    # The other hosts of the address would be denied too: they wait as long.
    assert crawler.scheduler.address_not_before == {A: trio.current_time() + 1.5}
    assert leases.stats.denied == 1


async def test_a_silent_or_unreachable_owner_is_not_waited_for_long(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leases, crawler, wire = asker("q", None)
    before = trio.current_time()
    assert await crawler.clear_to_fetch("h.test")
    # Asked twice (an owner restarted at once lost the first ask), 2 s each.
    assert trio.current_time() - before == pytest.approx(4.0)
    [(_, first), (_, second)] = wire.sent
    assert first == second and isinstance(first, IpLease)
    leases, crawler, _ = asker("q", None, where="gone:1")
    assert await crawler.clear_to_fetch("h.test")
    # Refused: the first ask waited out (an owner killed that instant may have granted
    # the address to a request still running: going ahead at once overlapped it), the
    # second not.
    assert trio.current_time() - before == pytest.approx(6.0)
    assert leases.stats.timeouts == 1


async def test_a_grant_that_comes_too_late_is_given_back_at_once() -> None:
    leases, _, wire = asker("q")
    await leases.on_grant("q", IpGrant(7, A, True), wire.reply)
    await leases.on_grant("q", IpGrant(8, A, False, 1.0), wire.reply)
    assert wire.sent == [("reply", IpRelease(7, A))]


async def test_the_owner_answers_from_its_table_and_denies_what_is_not_its_own() -> None:
    leases, _, wire = asker("p")
    await leases.on_lease("q", IpLease(1, A), wire.reply)
    await leases.on_lease("r", IpLease(1, A), wire.reply)
    granted, denied = (m for _, m in wire.sent)
    assert isinstance(granted, IpGrant) and granted.granted
    assert isinstance(denied, IpGrant) and not denied.granted
    await leases.on_release("q", IpRelease(1, A), wire.reply)
    assert not leases.table.ask(A, ("r", 2), trio.current_time()).granted  # the delay
    elsewhere, _, wire = asker("z")
    await elsewhere.on_lease("q", IpLease(1, A), wire.reply)
    assert wire.sent == [("reply", IpGrant(1, A, False, 0.2))]


async def test_a_host_without_an_address_asks_nothing() -> None:
    leases, crawler, wire = asker("q", IpGrant(0, A, True))
    assert await crawler.clear_to_fetch("noaddress.test")
    assert wire.sent == [] and leases.stats == LeaseStats()
