"""An address's lease across a quick restart, unit by unit. The owner's table: an ask
of a peer's new run ends the leases its earlier run held, an ask of an earlier run is
denied, a table made at a start grants nothing but renewals for its grace, and a
renewal is taken as the lease held unless another holds it. The asker: its asks name
its run, it renews each lease while its request runs, and a renewal's answer is no
late grant. The cluster's view (the web server's log) is
tests/cluster/test_ip_lease_restarts.py."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from tests.peer.test_ipleases import A, Q, asker
from ubipy.membership import Quorum
from ubipy.peer.ipleases import PATIENCE, RENEW_EVERY, START_GRACE, start_grace
from ubipy.peer.leasetable import LeaseTable, Verdict
from ubipy.wire import IpGrant, IpLease, IpRelease, Message

B = "11.1.1.2"
GAP = 0.2


def table(quiet_until: float = -1.0) -> LeaseTable:
    return LeaseTable(ip_delay=GAP, term=30.0, quiet_until=quiet_until)


def next_after_the_gap(verdict: Verdict) -> bool:
    """Denied, the address free a gap from now, and the asker's then."""
    return (verdict.granted, verdict.next) == (False, True) and verdict.wait == pytest.approx(GAP)


def test_an_ask_of_a_new_run_ends_the_leases_of_the_peer_s_earlier_run() -> None:
    """The peer restarted at once: its earlier process, and the requests it had under
    way, have ended. Its leases end, each address waiting its gap from when its
    request would have ended at the server."""
    leases = table()
    assert leases.ask(A, ("p", 1), 0.0, run=10).granted
    assert leases.ask(B, ("p", 2), 0.0, run=10).granted
    assert not leases.ask(A, ("p", 3), 0.5, run=10).granted  # its own next request waits
    # Restarted: its new run's first ask, for A. Free from 1.2 (nothing known of how
    # long requests last here: now, and the gap), and kept for it meanwhile.
    assert next_after_the_gap(leases.ask(A, ("p", 100), 1.0, run=11))
    assert leases.ask(A, ("p", 100), 1.2, run=11).granted
    assert leases.ask(B, Q, 1.2, run=20).granted  # B's lease ended as well
    # The earlier run's releases, should any come, free nothing.
    assert not leases.release(A, ("p", 1), 1.3)


def test_a_restarted_holder_s_lease_ends_when_its_request_would_have_at_the_server() -> None:
    leases = table()
    assert leases.ask(A, ("p", 1), 0.0, run=10).granted
    assert leases.release(A, ("p", 1), 3.0)  # requests here last 3 s
    assert leases.ask(A, ("p", 2), 3.2, run=10).granted
    verdict = leases.ask(A, ("p", 100), 4.0, run=11)  # restarted 0.8 s into it
    assert not verdict.granted and verdict.wait == pytest.approx(3.2 + 3.0 + GAP - 4.0)


def test_an_ask_of_an_earlier_run_is_denied_and_ends_nothing() -> None:
    """A frame of the ended process, late on its way: no one will answer it."""
    leases = table()
    assert leases.ask(A, ("p", 1), 0.0, run=10).granted
    assert leases.release(A, ("p", 1), 0.5)
    assert leases.ask(A, ("p", 100), 1.0, run=11).granted
    assert leases.ask(B, ("p", 2), 1.0, run=10) == Verdict(False, GAP)
    assert leases.renew(B, ("p", 2), 1.0, run=10) == Verdict(False, GAP)
    assert not leases.ask(A, Q, 1.1, run=20).granted  # run 11 holds A still


def test_a_peer_that_names_no_run_keeps_its_leases_as_before() -> None:
    """A peer of an earlier version: its leases end at their term, or the fence."""
    leases = table()
    assert leases.ask(A, ("p", 1), 0.0).granted
    assert not leases.ask(A, ("p", 2), 1.0).granted
    assert not leases.ask(A, Q, 29.0).granted
    # Its restart, now of this version: its first run ends the earlier process's lease.
    assert next_after_the_gap(leases.ask(A, ("p", 3), 29.0, run=11))


def test_a_starting_owner_grants_nothing_but_renewals_for_its_grace() -> None:
    leases = table(quiet_until=4.0)
    denied = leases.ask(A, Q, 0.5, run=20)
    assert not denied.granted and denied.wait == pytest.approx(3.5)
    # A holder of its previous run renews its lease: held from now.
    assert leases.renew(A, ("p", 1), 1.0, run=10) == Verdict(True)
    assert leases.renew(A, ("p", 1), 2.0, run=10) == Verdict(True)
    assert leases.renew(A, ("r", 1), 2.0, run=30) == Verdict(False, GAP)  # not another's
    assert not leases.ask(A, Q, 4.0, run=20).granted  # past the grace, still held
    assert leases.release(A, ("p", 1), 5.0)
    assert leases.ask(A, Q, 5.2, run=20).granted
    # Another address, never renewed: the first to ask past the grace has it.
    assert not leases.ask(B, ("r", 1), 3.9, run=30).granted
    assert leases.ask(B, ("r", 2), 4.0, run=30).granted


def test_a_release_nobody_holds_within_the_grace_starts_the_address_delay() -> None:
    """A request under a lease of the owner's previous run ended without a renewal (a
    short one): the address waits its delay from its end, or the server's wait."""
    leases = table(quiet_until=4.0)
    assert not leases.release(A, ("p", 1), 3.9, wait=1.0)
    assert not leases.ask(A, Q, 4.5, run=20).granted
    assert leases.ask(A, Q, 4.9, run=20).granted
    # Past the grace, a release of nothing is a second copy, or a lease long ended.
    assert not leases.release(B, ("p", 2), 5.0, wait=1.0)
    assert leases.ask(B, Q, 5.0, run=20).granted


def test_a_renewal_of_a_lease_the_owner_holds_changes_nothing() -> None:
    leases = table()
    assert leases.ask(A, ("p", 1), 0.0, run=10).granted
    assert leases.renew(A, ("p", 1), 1.0, run=10) == Verdict(True)
    assert leases.renew(A, ("q", 1), 1.0, run=20) == Verdict(False, GAP)
    assert leases.release(A, ("p", 1), 2.0)
    assert leases.ask(A, ("q", 2), 2.2, run=20).granted


def test_the_grace_outlasts_the_renewals_a_lost_copy_and_the_patience() -> None:
    assert RENEW_EVERY * 3 <= START_GRACE == 2 * PATIENCE


# --------------------------------------------------------------------------- the peer


async def test_a_peer_s_asks_name_its_run(autojump_clock: trio.testing.MockClock) -> None:
    """Its run is when it started: a process started later, a later run."""
    leases, crawler, wire = asker("q", IpGrant(0, A, True))
    assert await crawler.clear_to_fetch("h.test")
    [(_, ask)] = wire.sent
    assert isinstance(ask, IpLease) and ask == IpLease(ask.id, A, leases.run)
    restarted, _, _ = asker("q")
    assert restarted.run > leases.run


async def test_a_holder_renews_its_lease_while_its_request_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leases, crawler, wire = asker("q", IpGrant(0, A, True))
    async with trio.open_nursery() as nursery:
        leases._start_soon = nursery.start_soon
        assert await crawler.clear_to_fetch("h.test")
        [(_, ask)] = wire.sent
        assert isinstance(ask, IpLease) and ask == IpLease(ask.id, A, leases.run)
        await trio.sleep(2.5 * RENEW_EVERY)
        renewal = IpLease(ask.id, A, leases.run, held=True)
        assert wire.sent == [("q:1", ask), ("q:1", renewal), ("q:1", renewal)]
        crawler.on_request_end("h.test")  # its release goes, answered at once
        await leases.on_grant("q", IpGrant(ask.id, A, False), wire.reply)
        await trio.sleep(3 * RENEW_EVERY)
    # The renewals' grants were no late grants (none given back): the release went
    # once, when the request ended, and no renewal after it.
    assert wire.sent[3:] == [("q:1", IpRelease(ask.id, A))]


async def test_a_request_gone_ahead_unleased_renews_and_a_grant_makes_it_held(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Its owner silent past the patience (dead, restarting): the request goes ahead,
    and renews its lease; the restarted owner takes it as held, and it is given back
    when the request ends."""
    leases, crawler, wire = asker("q", None)
    async with trio.open_nursery() as nursery:
        leases._start_soon = nursery.start_soon
        assert await crawler.clear_to_fetch("h.test")
        [(_, ask), (_, again)] = wire.sent  # asked twice
        assert isinstance(ask, IpLease) and again == ask and leases.stats.timeouts == 1
        await trio.sleep(RENEW_EVERY + 0.01)
        assert wire.sent[-1] == ("q:1", IpLease(ask.id, A, leases.run, held=True))
        await leases.on_grant("q", IpGrant(ask.id, A, True), wire.reply)
        crawler.on_request_end("h.test")
        await leases.on_grant("q", IpGrant(ask.id, A, False), wire.reply)  # taken
    assert IpRelease(ask.id, A) in [m for _, m in wire.sent]


async def test_an_ask_lost_with_an_owner_s_old_process_is_asked_of_its_new_run(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The owner killed as it was asked and restarted at once (the ring kept it): the
    first ask is never answered; the second reaches the new run, which, in its
    grace, denies. Going ahead after the first, the request overlapped another
    peer's, under the old process's lease (seen in tests/cluster)."""
    leases, crawler, wire = asker("q", None)
    asks: list[IpLease] = []

    async def send(address: str, message: Message) -> bool:
        if isinstance(message, IpLease):
            asks.append(message)
            if len(asks) == 2:  # the new run answers
                denied = IpGrant(message.id, A, False, START_GRACE)
                await leases.on_grant("q", denied, wire.reply)
        return True

    leases._send = send
    before = trio.current_time()
    assert not await crawler.clear_to_fetch("h.test")
    assert trio.current_time() - before == pytest.approx(PATIENCE)
    assert asks[0] == asks[1]  # the same request's
    assert leases.stats.timeouts == 0 and leases.stats.denied == 1


async def test_a_starting_owner_denies_asks_and_takes_renewals(
    autojump_clock: trio.testing.MockClock,
) -> None:
    owner, crawler, wire = asker("p", grace=START_GRACE)  # "p" owns the address
    await owner.on_lease("q", IpLease(1, A, 20), wire.reply)
    await owner.on_lease("r", IpLease(7, A, 30, held=True), wire.reply)
    assert not await crawler.clear_to_fetch("h.test")  # its own ask too
    assert wire.sent == [
        ("reply", IpGrant(1, A, False, START_GRACE)),
        ("reply", IpGrant(7, A, True)),
    ]
    autojump_clock.jump(START_GRACE)
    await owner.on_lease("q", IpLease(2, A, 20), wire.reply)
    _, denied = wire.sent[-1]  # r holds it
    assert isinstance(denied, IpGrant) and (denied.id, denied.granted) == (2, False)
    await owner.on_release("r", IpRelease(7, A), wire.reply)
    autojump_clock.jump(GAP)
    await owner.on_lease("q", IpLease(3, A, 20), wire.reply)
    assert wire.sent[-1] == ("reply", IpGrant(3, A, True))


async def test_a_renewal_denied_is_counted(autojump_clock: trio.testing.MockClock) -> None:
    """The owner restarted and took none of the renewals within its grace: another peer
    holds the address while this request runs, the overlap the renewals are there to
    prevent. The request goes on (it is made); the status says it happened."""
    leases, crawler, wire = asker("q", IpGrant(0, A, True))
    async with trio.open_nursery() as nursery:
        leases._start_soon = nursery.start_soon
        assert await crawler.clear_to_fetch("h.test")
        [(_, ask)] = wire.sent
        assert isinstance(ask, IpLease)
        await trio.sleep(RENEW_EVERY + 0.01)
        await leases.on_grant("q", IpGrant(ask.id, A, True), wire.reply)  # taken
        await leases.on_grant("q", IpGrant(ask.id, A, False), wire.reply)  # denied
        assert leases.stats.renewals_denied == 1
        crawler.on_request_end("h.test")
        await leases.on_grant("q", IpGrant(ask.id, A, False), wire.reply)  # the release's
    assert leases.stats.renewals_denied == 1 and leases.stats.denied == 0


def test_a_peer_alone_in_the_base_it_starts_with_grants_at_once() -> None:
    """Nobody else held its leases: the first of a cluster, or one alone when it
    stopped, waited the grace (4 s) before its first request all the same (QA). A peer
    that joins others, or comes back to a base of several, still waits it."""
    assert start_grace(Quorum("a", (), lease=3.0)) == 0.0
    assert start_grace(Quorum("a", "a", lease=3.0, restored=True)) == 0.0
    assert start_grace(Quorum("a", (), lease=3.0, newcomer=True)) == START_GRACE
    assert start_grace(Quorum("a", "ab", lease=3.0, restored=True)) == START_GRACE
    assert start_grace(Quorum("a", "ab", lease=3.0)) == START_GRACE
    # Back alone after leaving a cluster: others may hold leases it granted (a review).
    assert start_grace(Quorum("a", (), lease=3.0, returned=True)) == START_GRACE
