"""Internationalised host names as people read them, for exports.

A shard keeps URLs as they were requested: an internationalised host in punycode
(``xn--``), the form that went on the wire, that the ring places and that WARC
records must hold (a WARC target is a URI). Exports show the Unicode form beside it.
"""

from __future__ import annotations

import functools

import ada_url

__all__ = ["unicode_url"]


@functools.lru_cache(maxsize=4096)
def _unicode_host(host: str) -> str:
    try:
        return str(ada_url.idna_to_unicode(host)) or host
    except (ValueError, UnicodeError):
        return host


def unicode_url(url: str) -> str:
    """The URL with an internationalised host in its Unicode form, as people read it
    (``http://xn--bcher-kva.example/`` -> ``http://bücher.example/``); the rest, and
    every other URL, as it is. Requests and WARC records keep the ASCII form."""
    scheme_end = url.find("://")
    if scheme_end < 0 or "xn--" not in url.lower():
        return url
    start = scheme_end + 3
    end = len(url)
    for stop in "/?#":
        found = url.find(stop, start)
        if 0 <= found < end:
            end = found
    authority = url[start:end]
    userinfo, at, hostport = authority.rpartition("@")
    if hostport.startswith("["):
        return url  # an IPv6 literal has no labels
    host, colon, port = hostport.partition(":")
    if "xn--" not in host.lower():
        return url
    return f"{url[:start]}{userinfo}{at}{_unicode_host(host.lower())}{colon}{port}{url[end:]}"
