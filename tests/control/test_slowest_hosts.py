"""Each peer's slowest hosts: reported in its figures as one flat string, read by the
control centre into its rows (the dashboard's "slowest host" column) and shown by
``ubipy status`` under the table."""

from __future__ import annotations

import json
from typing import Any

from ubipy.control import FiguresBook, snapshot
from ubipy.control.figures import MAX_SLOW_HOSTS, describe_slow_host, slow_hosts
from ubipy.control.page import COLUMNS, PAGE
from ubipy.fetch import SlowHost
from ubipy.peer.status import slow_hosts_figure
from ubipy.statustable import format_cluster

SLOW = "pace-slow.synth.test 0.285 0.264 0 0; pace-busy.synth.test 0.001 32.000 5 0"


def _figures(**more: Any) -> dict[str, Any]:
    return {"address": "127.0.0.1:1", "state": "alive", "uptime": 3.0, "pages": 9, **more}


def test_the_figure_is_read_into_rows() -> None:
    assert slow_hosts(SLOW) == (
        ("pace-slow.synth.test", 0.285, 0.264, 0, 0),
        ("pace-busy.synth.test", 0.001, 32.0, 5, 0),
    )
    assert slow_hosts("") == () == slow_hosts(None) == slow_hosts(42)
    # An earlier version's rows, without the robots.txt tries.
    assert slow_hosts("a.test 0.5 1.0 2") == (("a.test", 0.5, 1.0, 2, 0),)
    assert slow_hosts("b.test -1.000 29.000 0 1") == (("b.test", -1.0, 29.0, 0, 1),)


def test_a_peer_writes_the_figure_the_control_centre_reads_and_the_one_before_too() -> None:
    hosts = [SlowHost("a.test", 0.5, 1.0, 2), SlowHost("b.test", -1.0, 29.0, 0, robots_tries=1)]
    figure = slow_hosts_figure(hosts)
    assert slow_hosts(figure) == (("a.test", 0.5, 1.0, 2, 0), ("b.test", -1.0, 29.0, 0, 1))
    # A control centre of the version before reads four fields: it still has the rows
    # without robots.txt tries (it dropped every row of five, a review).
    assert figure.split("; ")[0].split() == ["a.test", "0.500", "1.000", "2"]


def test_what_does_not_read_is_left_out_never_fatal() -> None:
    bad = "a.test 1 2; b.test x 2 0; c.test nan 1 0; d.test 0.5 inf 0; e.test 1 1 0 x 1; ;"
    assert slow_hosts(bad + "ok.test 0.5 1.0 -3 -1") == (("ok.test", 0.5, 1.0, 0, 0),)
    many = "; ".join(f"h{i}.test 1.0 1.0 0" for i in range(50))
    assert len(slow_hosts(many)) == MAX_SLOW_HOSTS
    assert slow_hosts("x" * 300 + " 1 1 0") == ()


def test_the_book_keeps_them_per_peer_and_the_snapshot_is_json() -> None:
    book = FiguresBook()
    book.update({"a": _figures(slowest_hosts=SLOW), "b": _figures()}, 0.0)
    rows = {row.peer_id: row for row in book.rows(0.0)}
    assert rows["a"].slowest[0] == ("pace-slow.synth.test", 0.285, 0.264, 0, 0)
    assert rows["b"].slowest == ()
    data = json.loads(json.dumps(snapshot(book, 0.0, 1.0)))
    [a, _] = data["peers"]
    assert a["slowest"][1] == ["pace-busy.synth.test", 0.001, 32.0, 5, 0]


def test_described_for_people() -> None:
    assert (
        describe_slow_host(("a.test", 0.285, 0.264, 0, 0))
        == "a.test answers in 285 ms, waits 264 ms"
    )
    assert (
        describe_slow_host(("b.test", 0.001, 32.0, 5, 0))
        == "b.test answers in 1 ms, waits 32.00 s (5 × 503/429)"
    )
    # A Retry-After's hold, in minutes.
    held = describe_slow_host(("c.test", 0.002, 594.0, 0, 0))
    assert held == "c.test answers in 2 ms, waits 9.9 min"
    # Pages held for robots.txt, of a host that answered or never did.
    assert (
        describe_slow_host(("d.test", 0.003, 59.0, 2, 2))
        == "d.test answers in 3 ms, waits 59.00 s for its robots.txt (2 tries failed; 2 × 503/429)"
    )
    assert (
        describe_slow_host(("e.test", -1.0, 29.0, 0, 1))
        == "e.test waits 29.00 s for its robots.txt (1 try failed)"
    )


def test_the_dashboard_has_a_slowest_host_column() -> None:
    assert COLUMNS[-1] == "slowest"
    assert b'<th class="slowest">slowest host</th>' in PAGE


def test_ubipy_status_lists_them_under_the_table() -> None:
    report = {
        "members": [
            {"id": "aaaa", "address": "127.0.0.1:7001", "state": "alive"},
            {"id": "bbbb", "address": "127.0.0.1:7002", "state": "alive"},
        ],
        "peers": [
            {"peer_id": "aaaa", **_figures(slowest_hosts=SLOW)},
            {"peer_id": "bbbb", **_figures()},
        ],
    }
    lines = format_cluster(report, now=10.0).splitlines()
    assert lines[-1] == (
        "aaaa: slowest hosts: pace-slow.synth.test answers in 285 ms, waits 264 ms; "
        "pace-busy.synth.test answers in 1 ms, waits 32.00 s (5 × 503/429)"
    )
    assert not any(line.startswith("bbbb:") for line in lines)
