"""Connections between peers: framed, authenticated links carrying :mod:`ubipy.wire`
frames, each frame handed to the peer's handler with a way to reply, over a
:class:`Network` (TCP, or an in-memory one for tests).
"""

from ubipy.net.addresses import is_ip, is_loopback, join_address, split_address
from ubipy.net.guard import SourceLog, Strikes
from ubipy.net.handlers import Handle, Handler, Reply, Send
from ubipy.net.links import Links, LinkStats
from ubipy.net.memory import LinkSpec, MemoryNetwork, MemoryNode, MemoryStream
from ubipy.net.network import Network, StreamHandler, TcpNetwork, remote_host
from ubipy.net.request import request

__all__ = [
    "Handle",
    "Handler",
    "LinkSpec",
    "LinkStats",
    "Links",
    "MemoryNetwork",
    "MemoryNode",
    "MemoryStream",
    "Network",
    "Reply",
    "Send",
    "SourceLog",
    "StreamHandler",
    "Strikes",
    "TcpNetwork",
    "is_ip",
    "is_loopback",
    "join_address",
    "remote_host",
    "request",
    "split_address",
]
