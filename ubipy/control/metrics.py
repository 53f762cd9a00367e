"""The cluster's figures in Prometheus's text exposition format, version 0.0.4.

Written by hand rather than with prometheus-client: the figures are other peers'
and already counted, so there is nothing to instrument, only text to write.
Cluster totals are left to the scraper's ``sum()``, so a gauge is written only for
live peers (alive or suspect), as the dashboard's totals count them: a dead or departed
peer's frontier and hosts are another's now, and its last gauges kept beside theirs
counted them twice. Its counters stay, as what it did.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from ubipy.control.figures import STATES, PeerRow

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True, slots=True)
class _Family:
    name: str
    kind: str
    help: str
    value: Callable[[PeerRow], float]


# Figures a peer has only once it has reported; before that they would be a lie of 0.
# The gauges among them are written for live peers only (see the module's docstring).
_REPORTED: Final = (
    _Family("ubipy_pages_total", "counter", "Pages fetched and stored.", lambda r: r.pages),
    _Family("ubipy_errors_total", "counter", "Fetches that failed.", lambda r: r.errors),
    _Family("ubipy_timeouts_total", "counter", "Fetches that timed out.", lambda r: r.timeouts),
    _Family(
        "ubipy_bytes_in_total",
        "counter",
        "Bytes fetched from the web.",
        lambda r: r.bytes_in,
    ),
    _Family(
        "ubipy_bytes_out_total", "counter", "Bytes sent to other peers.", lambda r: r.bytes_out
    ),
    _Family(
        "ubipy_pages_per_second",
        "gauge",
        "Pages fetched per second, over the last few seconds.",
        lambda r: r.pages_per_second,
    ),
    _Family("ubipy_frontier_urls", "gauge", "URLs waiting to be fetched.", lambda r: r.frontier),
    _Family(
        "ubipy_hosts",
        "gauge",
        "Hosts this peer schedules now (with URLs in memory or asked lately).",
        lambda r: r.hosts,
    ),
    _Family("ubipy_in_flight", "gauge", "Requests in flight.", lambda r: r.in_flight),
    _Family("ubipy_uptime_seconds", "gauge", "Seconds since the peer started.", lambda r: r.uptime),
    _Family(
        "ubipy_start_time_seconds",
        "gauge",
        "When the peer started, in seconds since the Unix epoch.",
        lambda r: r.started_at or 0.0,
    ),
    _Family(
        "ubipy_figures_age_seconds",
        "gauge",
        "Seconds since the peer's figures last changed at the control peer.",
        lambda r: r.age or 0.0,
    ),
)


def escape_label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(pairs: Sequence[tuple[str, str]]) -> str:
    return "{" + ",".join(f'{k}="{escape_label(v)}"' for k, v in pairs) + "}"


def _head(lines: list[str], name: str, kind: str, help_text: str) -> None:
    lines.append(f"# HELP {name} {_escape_help(help_text)}")
    lines.append(f"# TYPE {name} {kind}")


def render(rows: Sequence[PeerRow]) -> str:
    """The text of ``GET /metrics`` for these peers."""
    lines: list[str] = []
    _head(lines, "ubipy_peers", "gauge", "Members of the cluster by state.")
    for state in STATES:
        count = sum(1 for r in rows if r.state == state)
        lines.append(f"ubipy_peers{_labels([('state', state)])} {count}")
    _head(lines, "ubipy_up", "gauge", "1 while the peer is a live member (alive or suspect).")
    for r in rows:
        lines.append(f"ubipy_up{_labels([('peer', r.peer_id)])} {int(r.live)}")
    _head(lines, "ubipy_peer_state", "gauge", "1 for the peer's current membership state.")
    for r in rows:
        for state in STATES:
            labels = _labels([("peer", r.peer_id), ("state", state)])
            lines.append(f"ubipy_peer_state{labels} {int(r.state == state)}")
    _head(lines, "ubipy_peer_info", "gauge", "The peer's address and version; always 1.")
    for r in rows:
        labels = _labels([("peer", r.peer_id), ("address", r.address), ("version", r.version)])
        lines.append(f"ubipy_peer_info{labels} 1")
    reported = [r for r in rows if r.reported]
    live = [r for r in reported if r.live]
    for family in _REPORTED:
        _head(lines, family.name, family.kind, family.help)
        for r in live if family.kind == "gauge" else reported:
            value = format_value(family.value(r))
            lines.append(f"{family.name}{_labels([('peer', r.peer_id)])} {value}")
    return "\n".join(lines) + "\n"
