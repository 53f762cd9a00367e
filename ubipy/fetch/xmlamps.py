"""A sitemap's bare "&" written "&amp;", as XML wants it: sites write URLs' "&" bare,
and the parser stopped at the first (see :func:`ubipy.fetch.sitemaps.read_sitemap`)."""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = ["bare_amps_escaped"]

# A "&" that begins no reference.
_BARE_AMP = re.compile(rb"&(?!(?:[A-Za-z][\w.-]{0,31}|#\d{1,8}|#[xX][\da-fA-F]{1,8});)")
# Where a bare "&" is no XML's business: a CDATA section, a comment (each opener,
# and what closes it).
_OPENED = re.compile(rb"<!\[CDATA\[|<!--")
_CLOSES = {b"<![CDATA[": b"]]>", b"<!--": b"-->"}
# The longest reference kept whole across two chunks ("&" and 32 more, ";").
_REFERENCE = 40


def bare_amps_escaped(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """The chunks with each bare "&" outside CDATA sections and comments written
    "&amp;", in one pass: what a chunk's end may cut (a reference, a section's start or
    end) waits for the next chunk. A regex that matched whole CDATA sections read each
    unclosed one to the chunk's end: a 1 MB sitemap of them took 23 s of the event
    loop, a 50 MB one (99 KB gzipped) some 20 minutes (a review). In a comment a CDATA
    start is text (taken for one, the rest of the file went unescaped: a review)."""
    inside: bytes | None = None
    rest = b""
    for chunk in chunks:
        done, rest, inside = _escaped(rest + chunk, inside, final=False)
        yield done
    if rest:
        yield _escaped(rest, inside, final=True)[0]


def _escaped(
    text: bytes, inside: bytes | None, *, final: bool
) -> tuple[bytes, bytes, bytes | None]:
    """``text`` read from a point inside a CDATA section or a comment (``inside``: what
    closes it) or not: what is escaped, the tail left for the next chunk (none when
    ``final``), and what closes the section it ends inside, if any."""
    out: list[bytes] = []
    at = 0
    while True:
        if inside is not None:
            end = text.find(inside, at)
            if end < 0:
                keep = len(text) if final else max(at, len(text) - len(inside) + 1)
                out.append(text[at:keep])
                return b"".join(out), text[keep:], inside
            out.append(text[at : end + len(inside)])
            at, inside = end + len(inside), None
            continue
        opened = _OPENED.search(text, at)
        if opened is not None:
            out.append(_BARE_AMP.sub(b"&amp;", text[at : opened.start()]) + opened.group())
            at, inside = opened.end(), _CLOSES[opened.group()]
            continue
        keep = len(text) if final else _plain_end(text, at)
        out.append(_BARE_AMP.sub(b"&amp;", text[at:keep]))
        return b"".join(out), text[keep:], None


def _plain_end(text: bytes, at: int) -> int:
    """Where the tail of ``text`` (outside sections from ``at``) that the next chunk
    may finish begins: a reference, or a section's start, cut (its length: none)."""
    amp = text.rfind(b"&", max(at, len(text) - _REFERENCE))
    if amp >= 0 and text.find(b";", amp) < 0:
        return amp
    lt = text.rfind(b"<", max(at, len(text) - len(b"<![CDATA[")))
    if lt >= 0 and any(opener.startswith(text[lt:]) for opener in _CLOSES):
        return lt
    return len(text)
