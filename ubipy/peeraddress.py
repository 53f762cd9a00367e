"""A peer's address, ``HOST:PORT``, as every frame and flag that carries one is read.

One check for membership's messages, the frames of the wire and the network's
dialling: an address reaches the socket layer in a task a frame's sender chose, where
a port past 65535 (or a 30-digit one, which the socket layer cannot even convert)
would raise an error nothing there expects.
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_ADDRESS_CHARS", "check_peer_address", "port_number"]

MAX_ADDRESS_CHARS: Final = 300


def port_number(text: str) -> int | None:
    """The port ``text`` names (0 to 65535, ASCII digits), or None."""
    if not 0 < len(text) <= 5 or not text.isascii() or not text.isdigit():
        return None
    port = int(text)
    return port if port <= 65535 else None


def check_peer_address(text: str) -> str:
    """``text`` if a peer can be reached at it: ``HOST:PORT`` with a host (which may be
    a bracketed IPv6 literal) and a port of 1 to 65535; ValueError saying why if not."""
    if not 3 <= len(text) <= MAX_ADDRESS_CHARS or not text.isprintable() or " " in text:
        raise ValueError(
            f"an address is 3 to {MAX_ADDRESS_CHARS} printable characters without spaces"
        )
    host, _, port = text.rpartition(":")
    if not host or not port_number(port):
        raise ValueError(f"an address is HOST:PORT with a port of 1 to 65535, not {text!r}")
    return text
