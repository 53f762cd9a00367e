"""An address's lease across a quick restart, unit by unit. The owner's table: an ask
of a peer's new run ends the leases its earlier run held, and an ask of an earlier run
is denied. The asker: its asks name its run. The cluster's view (the web server's log)
is tests/cluster/test_ip_lease_restarts.py."""

from __future__ import annotations

import pytest
import trio
import trio.testing

from tests.peer.test_ipleases import A, Q, asker
from ubipy.peer.leasetable import LeaseTable, Verdict
from ubipy.wire import IpGrant, IpLease

B = "11.1.1.2"
GAP = 0.2


def table() -> LeaseTable:
    return LeaseTable(ip_delay=GAP, term=30.0)


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
    assert not leases.ask(A, Q, 1.1, run=20).granted  # run 11 holds A still


def test_a_peer_that_names_no_run_keeps_its_leases_as_before() -> None:
    """A peer of an earlier version: its leases end at their term, or the fence."""
    leases = table()
    assert leases.ask(A, ("p", 1), 0.0).granted
    assert not leases.ask(A, ("p", 2), 1.0).granted
    assert not leases.ask(A, Q, 29.0).granted
    # Its restart, now of this version: its first run ends the earlier process's lease.
    assert next_after_the_gap(leases.ask(A, ("p", 3), 29.0, run=11))


# --------------------------------------------------------------------------- the peer


async def test_a_peer_s_asks_name_its_run(autojump_clock: trio.testing.MockClock) -> None:
    """Its run is the random start of its lease ids: another process, another run."""
    leases, crawler, wire = asker("q", IpGrant(0, A, True))
    assert await crawler.clear_to_fetch("h.test")
    [(_, ask)] = wire.sent
    assert isinstance(ask, IpLease) and ask == IpLease(ask.id, A, leases.run)
    assert ask.id == leases.run + 1
    restarted, _, _ = asker("q")
    assert restarted.run != leases.run
