"""An owner tells a peer's runs apart by their start: an ask of a later run says the
peer restarted (its earlier run's leases end), and a late frame of an earlier run,
even one the owner never heard from, is refused and ends nothing (a review)."""

from __future__ import annotations

from ubipy.peer.leasetable import LeaseTable


def test_a_late_frame_of_an_earlier_run_never_seen_here_ends_nothing() -> None:
    table = LeaseTable(ip_delay=1.0, term=121.0)
    earlier, live = 1_000, 5_000  # runs are numbered by their start
    assert table.ask("10.0.0.1", ("A", 11), 0.0, live).granted  # its request runs
    # A frame the dead process sent (to this owner, for the first time) comes late.
    assert not table.ask("10.0.0.9", ("A", 7), 0.5, earlier).granted
    # The live run's lease stands, and the live run is granted what it asks.
    assert not table.ask("10.0.0.1", ("B", 1), 3.0, 77).granted
    asks = [table.ask(f"10.0.1.{i}", ("A", 20 + i), 10.0 + 10 * i, live) for i in range(5)]
    assert all(v.granted for v in asks)


def test_a_later_run_ends_the_earlier_runs_leases_and_a_lower_one_after_a_silent_term() -> None:
    table = LeaseTable(ip_delay=1.0, term=121.0)
    assert table.ask("10.0.0.1", ("A", 11), 0.0, 5_000).granted
    # Restarted: its earlier run's lease ends with it, the address free after its gap.
    assert table.ask("10.0.0.2", ("A", 12), 1.0, 6_000).granted
    assert table.ask("10.0.0.1", ("B", 1), 3.0, 77).granted
    # Restarted again with its clock stepped back (a lower run): once the latest run
    # has asked nothing for a term, it is over, and the lower one is the peer's now.
    assert not table.ask("10.0.0.3", ("A", 13), 60.0, 5_500).granted
    assert table.ask("10.0.0.3", ("A", 14), 1.0 + 122.0, 5_500).granted
