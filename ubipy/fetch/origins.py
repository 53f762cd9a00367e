"""Where a request goes, as the transport pools it: an origin (scheme, host, port),
and a plain URL's GET read without httpx2's URL parser (:func:`plain_get`)."""

from __future__ import annotations

import re
from typing import NamedTuple

import httpx2

DEFAULT_PORTS = {"http": 80, "https": 443}


class Origin(NamedTuple):
    """Scheme, host and port: what a pooled connection serves."""

    # A tuple: a pool's key, hashed and compared by C three times a request (a frozen
    # dataclass's generated __hash__ and __eq__ were Python calls).
    scheme: str
    host: str
    port: int


# A URL whose request httpx2 would make as written: an http(s) scheme, a lower-case
# ASCII name (no IP literal: httpx2 checks those), a port or none, and a path and query
# of characters httpx2's quoting leaves as they are (RFC 3986's unreserved and
# sub-delimiters, ":@/", "?" in the query, percent-escapes), no fragment.
_PLAIN_URL = re.compile(
    r"(https?)://([a-z0-9-]+(?:\.[a-z0-9-]+)*)(?::([1-9][0-9]{0,4}))?"
    r"(/[A-Za-z0-9\-._~!$&'()*+,;=:@/%]*(?:\?[A-Za-z0-9\-._~!$&'()*+,;=:@/?%]*)?)"
)
# A "%" that is not an escape (httpx2 quotes it), and dot segments (httpx2 removes them).
_NOT_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_DOT_SEGMENT = re.compile(r"/\.\.?(?:[/?]|$)")


class PlainGet(NamedTuple):
    """What a GET of a plain URL sends, read without httpx2's URL parser: the same
    origin, Host header and request target as ``httpx2.Request("GET", url)`` has."""

    origin: Origin
    netloc: bytes  # the Host header's value
    target: bytes  # origin-form: path and query
    url: bytes  # absolute-form, for an http proxy


def plain_get(url: str) -> PlainGet | None:
    """The GET of ``url`` when the URL is plain (the crawler's normalised URLs
    mostly are), or None: httpx2's parser then makes the request. Its parser is the
    costlier half of a ``Request``: 29 us of 54 on the slowest machine measured."""
    m = _PLAIN_URL.fullmatch(url)
    if m is None:
        return None
    scheme, host, port_text, target = m.groups()
    if (
        (host[-1].isdigit() and host.replace(".", "").isdigit())  # IPv4: httpx2 checks it
        or ("%" in target and _NOT_ESCAPE.search(target))
        or ("/." in target and _DOT_SEGMENT.search(target))
    ):
        return None
    if port_text is None:
        return PlainGet(
            Origin(scheme, host, DEFAULT_PORTS[scheme]), host.encode("ascii"),
            target.encode("ascii"), url.encode("ascii"),
        )  # fmt: skip
    port = int(port_text)
    if port > 65535 or port == DEFAULT_PORTS[scheme]:
        return None  # httpx2 refuses the first and drops the second
    return PlainGet(
        Origin(scheme, host, port), f"{host}:{port_text}".encode("ascii"),
        target.encode("ascii"), url.encode("ascii"),
    )  # fmt: skip


def bracketed(host: str) -> str:
    """A host as an authority writes it: httpx gives an IPv6 literal without its
    brackets, which an authority (and a host key) needs."""
    return f"[{host}]" if ":" in host else host


def origin_of(url: httpx2.URL) -> Origin:
    scheme = url.scheme
    # httpx2 gives None for the scheme's own port; 0 is a port of its own (none).
    port = (443 if scheme == "https" else 80) if url.port is None else url.port
    # The host as on the wire (an IDN's A-label, which ``url.host`` gives decoded):
    # what is looked up (the DNS stage's answers are pinned under it), named in a
    # CONNECT and sent as the TLS server name.
    return Origin(scheme, url.raw_host.decode("ascii"), port)
