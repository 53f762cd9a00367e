"""A CONNECT tunnel through an HTTP proxy, for an https origin behind ``--proxy``.

The exchange is written and read here (one request line, one status line to read): an
h11 connection for it cost 0.15 ms a connection over HTTPS. What the proxy answers
that is not a tunnel fails the connection, saying what the proxy did; a refusal of
the host itself (403, 407, 451) is :class:`AddressRefused`, final, as a refused
address is.
"""

from __future__ import annotations

import re

import httpx2
import trio

from ubipy.errors import UbipyError
from ubipy.fetch.http1 import MAX_HEAD

__all__ = ["AddressRefused", "open_tunnel"]

# A proxy's answer to CONNECT: its status line, and the blank line that ends it.
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] ([0-9]{3})[ \r\n]")
_BLANK_LINE = re.compile(rb"\r?\n\r?\n")
_READ_SIZE = 65_536
# A proxy's answers to CONNECT that refuse the host for good: forbidden, proxy
# authentication required (the proxy's configuration, not this request's luck),
# unavailable for legal reasons.
_PROXY_REFUSALS = frozenset({403, 407, 451})


class AddressRefused(UbipyError, httpx2.ConnectError):
    """The host resolved to an address a crawler may not reach without being told
    to (see :mod:`ubipy.fetch.dns`), or the proxy refused to reach it; nothing was
    sent to it."""


async def open_tunnel(stream: trio.abc.Stream, authority: bytes) -> None:
    """Ask the proxy at the other end of ``stream`` for a tunnel to ``authority``
    (``host:port``, an IPv6 literal in brackets); the stream then carries what goes
    to the origin. Raises OSError (the connection failed) or AddressRefused."""
    await stream.send_all(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority, authority))
    received = b""
    searched = 0  # where the blank line is still to be looked for
    while True:
        blank = _BLANK_LINE.search(received, searched)
        if blank is None:
            if len(received) > MAX_HEAD:
                raise OSError("proxy's answer to CONNECT is too long")
            data = await stream.receive_some(_READ_SIZE)
            if not data:
                raise OSError("proxy closed the connection during CONNECT")
            searched = max(0, len(received) - 3)
            received += data
            continue
        status = _STATUS_LINE.match(received)
        if status is None:
            raise OSError("proxy's answer to CONNECT is not HTTP/1.x")
        code = int(status[1])
        received, searched = received[blank.end() :], 0
        if 100 <= code < 200:
            continue  # informational: the answer follows
        if code in _PROXY_REFUSALS:
            # The proxy's policy (the peer asks users behind one to let it refuse
            # private names): final, not a failed connection retried, robots.txt's
            # attempts and all, the host given up as unreachable (found by a review).
            raise AddressRefused(f"proxy refused CONNECT: {code}")
        if not 200 <= code < 300:
            raise OSError(f"proxy refused CONNECT: {code}")
        if received:
            raise OSError("proxy sent data before the tunnel was up")
        return
