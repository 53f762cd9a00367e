"""Connections between peers: framed, authenticated links carrying :mod:`ubipy.wire`
frames, each frame handed to the peer's handler with a way to reply.
"""

from ubipy.net.addresses import is_loopback, split_address
from ubipy.net.links import Handler, Links, LinkStats, Reply, request

__all__ = [
    "Handler",
    "LinkStats",
    "Links",
    "Reply",
    "is_loopback",
    "request",
    "split_address",
]
