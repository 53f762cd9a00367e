"""Bytes for the hostile web: huge, endless and slow bodies, compression bombs, malformed
HTML, binary junk, a mis-labelled charset, a page of 100,000 links and a huge robots.txt.

Big bodies are either streamed from one repeated block (huge, endless) or built once and
cached (bombs, the huge robots.txt, the links page), so serving them costs the server
little more than the copying.
"""

from __future__ import annotations

import functools
import random
import struct
import zlib
from collections.abc import AsyncGenerator

import trio

BLOCK = 64 * 1024
HTML_TYPE = (("Content-Type", "text/html; charset=utf-8"),)
_HUGE_HEAD = b"<!DOCTYPE html><html><head><title>huge</title></head><body><p>"
_HUGE_TAIL = b"</p></body></html>\n"
_FILLER = (b"huge page filler text " * (BLOCK // 22 + 1))[:BLOCK]
MIN_HUGE_BYTES = len(_HUGE_HEAD) + len(_HUGE_TAIL)


async def huge_stream(size: int) -> AsyncGenerator[bytes, None]:
    """Exactly `size` bytes of HTML (the server announces them in Content-Length)."""
    yield _HUGE_HEAD
    left = size - len(_HUGE_HEAD) - len(_HUGE_TAIL)
    while left > 0:
        chunk = _FILLER[: min(left, BLOCK)]
        left -= len(chunk)
        yield chunk
    yield _HUGE_TAIL


async def endless_stream() -> AsyncGenerator[bytes, None]:
    """HTML that never ends; the server stops when the client goes (or is cancelled)."""
    yield b"<!DOCTYPE html><html><head><title>endless</title></head><body><p>"
    while True:
        yield _FILLER


_SLOW_TEXT = b"<!DOCTYPE html><html><head><title>slow</title></head><body><p>" + b"." * 4096


async def slow_stream(interval: float, count: int) -> AsyncGenerator[bytes, None]:
    """One byte per `interval`, `count` bytes, then nothing more: the server cuts the
    connection after it, so even a patient client never gets a whole response."""
    for i in range(count):
        await trio.sleep(interval)
        yield _SLOW_TEXT[i % len(_SLOW_TEXT) : i % len(_SLOW_TEXT) + 1]


_MIB = 1 << 20
_BOMB_HEAD = b"<!DOCTYPE html><html><head><title>bomb</title></head><body>"


@functools.lru_cache(maxsize=4)
def bomb(size: int, encoding: str) -> bytes:
    """`size` bytes of HTML (a head, then spaces) compressed as `encoding` (gzip: RFC 1952;
    deflate: the zlib format of RFC 1950, as HTTP means it). Deflate tops out near 1:1030,
    so 100 MB travels as ~100 KB.

    Built cheaply: after a full flush the compressor starts afresh, so every further MiB of
    spaces compresses to the same bytes; one MiB is compressed and its output repeated.
    """
    if encoding not in ("gzip", "deflate"):
        raise ValueError(f"no such content coding: {encoding}")
    if size < len(_BOMB_HEAD):
        raise ValueError("a bomb must be larger than its head")
    comp = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate; we add the framing
    parts = [comp.compress(_BOMB_HEAD) + comp.flush(zlib.Z_FULL_FLUSH)]
    whole, rest = divmod(size - len(_BOMB_HEAD), _MIB)
    spaces = b" " * _MIB
    if whole:
        parts.append((comp.compress(spaces) + comp.flush(zlib.Z_FULL_FLUSH)) * whole)
    parts.append(comp.compress(spaces[:rest]) + comp.flush())
    raw = b"".join(parts)
    checksum = zlib.crc32 if encoding == "gzip" else zlib.adler32
    check = checksum(_BOMB_HEAD)
    for _ in range(whole):
        check = checksum(spaces, check)
    check = checksum(spaces[:rest], check)
    if encoding == "gzip":
        header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"  # no name, mtime 0, OS unknown
        return header + raw + struct.pack("<II", check, size & 0xFFFFFFFF)
    return b"\x78\xda" + raw + struct.pack(">I", check)


def binary(seed: int) -> bytes:
    """4 KiB of noise with no '<' in it, so no parser can find a tag (and a link) in it."""
    data = random.Random(f"synthweb-binary:{seed}").randbytes(4096)
    return b"\x89BIN\x00\x01" + data.replace(b"<", b"\x00")


# Every link here is extracted identically by a WHATWG parser and by lxml (checked in the
# tests): the point is that the crawler survives the mess, not a parser quiz.
MALFORMED_LINKS = (
    "/m/unquoted.html",
    "/m/in-form.html",
    "/m/after-garbage.html",
    "/m/after-nul.html",
    "/m/single-quoted.html",
    "/m/spaced-equals.html",
    "/m/upper-tag.html",
    "/m/unclosed-anchor.html",
)
MALFORMED = (
    b"<!DOCTYPE html><html><head><title>malformed</title><body>\n"  # no </head>
    b"<p><b><i>unclosed tags <div><span>and more\n"
    b"<table><tr><td><a href=/m/unquoted.html>unquoted href</a>\n"
    b'<form action="/f1"><form action="/f2"><a href="/m/in-form.html">nested</a></form>\n'
    b"garbage: <<<>>> &&&; &#xZZZZ; &#99999999; </notatag> <?php echo 1; ?> ]]> \xff\xfe\n"
    b'<a href="/m/after-garbage.html">after garbage</a>\n'
    b'NUL bytes:\x00\x00\x00 <a href="/m/after-nul.html">after NUL</a>\n'
    b"<a href='/m/single-quoted.html'>single quotes</a>\n"
    b'<a href = "/m/spaced-equals.html" >spaces around =</a>\n'
    b'<A HREF="/m/upper-tag.html">upper-case tag</A>\n'
    b'<a href="/m/unclosed-anchor.html">an anchor never closed\n'
    b"<p>the end, <b>unclosed"
)

# Declared utf-8 in the header, written in latin-1: per WHATWG the header wins and the lone
# 0xE9 decodes to U+FFFD, so the link is /caf%EF%BF%BD.html (what browsers request).
CHARSET_TARGET = "/caf%EF%BF%BD.html"
CHARSET_DECOYS = ("/caf%E9.html", "/caf%C3%A9.html")  # latin-1 bytes, or a sniffed decode
CHARSET_PAGE = (
    b"<!DOCTYPE html><html><head><title>Caf\xe9 \xe0 la carte</title></head><body>\n"
    b'<p>Men\xfc du jour</p><a href="/caf\xe9.html">le caf\xe9</a> <a href="/">home</a>\n'
    b"</body></html>\n"
)


@functools.lru_cache(maxsize=2)
def many_links(count: int, distinct: int) -> bytes:
    """`count` anchors to `distinct` pages /t/N.html; each target appears in the first
    `distinct` anchors, the rest repeat them (with fragments, or relative) so that a
    parser's per-page cap cannot hide one."""
    parts = ["<!DOCTYPE html><html><head><title>many links</title></head><body>\n"]
    for i in range(count):
        n = i % distinct
        href = f"/t/{n}.html#r{i}" if i % 2 else f"t/{n}.html"  # a fragment, or relative
        if i < distinct:
            href = f"/t/{n}.html"
        parts.append(f'<a href="{href}">{n}</a>\n')
    parts.append("</body></html>\n")
    return "".join(parts).encode()


# robots.txt: the /late/ rule starts here, past the 500 KiB RFC 9309 §2.5 says a crawler
# must read at least; a crawler that stops at 500 KiB never sees it.
LATE_OFFSET = 600 * 1024
MIN_BIG_ROBOTS = LATE_OFFSET + 64 * 1024
_ROBOTS_HEAD = b"# synthweb: a robots.txt of megabytes\nUser-agent: *\nDisallow: /early/\n"
_LATE_RULE = b"Disallow: /late/\n"


def _comments(n: int, width: int = 80) -> bytes:
    """Exactly `n` bytes of comment lines (no blank line: old parsers end a group there)."""
    if n < 2:
        raise ValueError("too little room for a comment line")
    full, rest = divmod(n, width)
    lines = [b"#" + b"p" * (width - 2) + b"\n"] * full
    if rest:  # fold the remainder into the last line, or make a short one
        if lines and rest < 2:
            lines[-1] = b"#" + b"p" * (width + rest - 2) + b"\n"
        else:
            lines.append(b"#" + b"p" * (rest - 2) + b"\n")
    return b"".join(lines)


@functools.lru_cache(maxsize=2)
def big_robots(size: int) -> bytes:
    if size < MIN_BIG_ROBOTS:
        raise ValueError(f"a big robots.txt needs at least {MIN_BIG_ROBOTS} bytes")
    before = _comments(LATE_OFFSET - len(_ROBOTS_HEAD))
    after = _comments(size - LATE_OFFSET - len(_LATE_RULE))
    return _ROBOTS_HEAD + before + _LATE_RULE + after
