"""The owner's lease table for the per-IP rule across peers: one holder per address,
a denial says how long to wait, a release starts the address's delay, and a lease
whose holder died expires."""

from __future__ import annotations

import pytest

from ubipy.peer.ipleases import LeaseTable, Verdict

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
