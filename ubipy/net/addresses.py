"""Peer addresses: HOST:PORT, and whether a host is this machine's loopback."""

from __future__ import annotations

import ipaddress

from ubipy.peeraddress import port_number


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def split_address(address: str) -> tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT``; an empty host is loopback, and port 0 (to
    listen on any free one) is allowed here. ValueError if it is no such address."""
    host, sep, port = address.rpartition(":")
    number = port_number(port)
    if not sep or number is None:
        raise ValueError(f"a peer address is HOST:PORT with a port of 0 to 65535, not {address!r}")
    return host.strip("[]") or "127.0.0.1", number


def join_address(host: str, port: int) -> str:
    """``HOST:PORT``, an IPv6 address in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def is_ip(host: str) -> bool:
    """Whether ``host`` is an IP address rather than a name."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True
