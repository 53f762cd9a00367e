"""The control centre: an HTTP server for the dashboard, the cluster's status as
JSON, Prometheus metrics, seeding and stopping; the figures it keeps; and the
monitor that gathers every peer's figures on the control peer.

It sees a peer only through :class:`ControlBackend` (the server) and
:class:`ControlledPeer` (the monitor), so a peer runs without it.
"""

from ubipy.control.figures import FIGURE_FIELDS, STATES, FiguresBook, PeerRow, snapshot, totals
from ubipy.control.httpserver import HttpLimits
from ubipy.control.monitor import ControlledPeer, Monitor, serve_control_centre
from ubipy.control.server import ControlBackend, ControlLimits, control_bind, serve_control

__all__ = [
    "FIGURE_FIELDS",
    "STATES",
    "ControlBackend",
    "ControlLimits",
    "ControlledPeer",
    "FiguresBook",
    "HttpLimits",
    "Monitor",
    "PeerRow",
    "control_bind",
    "serve_control",
    "serve_control_centre",
    "snapshot",
    "totals",
]
