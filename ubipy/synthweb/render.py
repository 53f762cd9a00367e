"""Bytes on the wire: HTML for page descriptions, filler text, tiny PNG and PDF bodies.

Rendering is separate from the model so that the link structure (what the truth needs)
is computed without ever building a body; bodies are built only when the server sends one.
"""

from __future__ import annotations

import random
import struct
import zlib
from dataclasses import dataclass
from html import escape

_WORDS = [
    "crawler",
    "peer",
    "ring",
    "host",
    "page",
    "link",
    "frontier",
    "robots",
    "delay",
    "politeness",
    "fetch",
    "store",
    "bloom",
    "gossip",
    "shard",
    "hash",
    "node",
    "queue",
    "batch",
    "digest",
    "anchor",
    "index",
    "depth",
    "scope",
    "seed",
    "redirect",
    "archive",
    "lorem",
    "ipsum",
    "dolor",
    "sit",
    "amet",
    "consectetur",
    "adipiscing",
    "elit",
    "sed",
    "do",
    "eiusmod",
    "tempor",
]


@dataclass(frozen=True, slots=True)
class Link:
    """One link-bearing element: `href` as written, `target` as a correct parser resolves it.

    `target` is None for non-http(s) schemes and for elements a crawler must not follow at
    all (img, link, script); `nofollow` marks rel=nofollow.
    """

    tag: str
    href: str
    target: str | None
    nofollow: bool = False
    rel: str = ""
    text: str = "link"


def filler(rng: random.Random, size: int) -> str:
    words: list[str] = []
    total = 0
    while total < size:
        chunk = rng.choices(_WORDS, k=64)
        words.extend(chunk)
        total += sum(map(len, chunk)) + len(chunk)
    return " ".join(words)[:size]


def _element(link: Link, index: int) -> str:
    href = escape(link.href, quote=True)
    rel = f' rel="{escape(link.rel, quote=True)}"' if link.rel else ""
    text = escape(link.text)
    if link.tag == "a":
        return f'<li><a href="{href}"{rel}>{text}</a></li>'
    if link.tag == "area":
        return (
            f'<li><img src="data:," alt="map" usemap="#m{index}"><map name="m{index}">'
            f'<area shape="rect" coords="0,0,10,10" href="{href}"{rel} alt="{text}"></map></li>'
        )
    if link.tag == "iframe":
        return f'<li><iframe src="{href}" title="{text}"></iframe></li>'
    if link.tag == "img":
        return f'<li><img src="{href}" alt="{text}"></li>'
    if link.tag == "link":
        return f'<li><link rel="stylesheet" href="{href}"></li>'
    raise ValueError(f"cannot render <{link.tag}> in a body")


def render_html(
    *,
    title: str,
    links: tuple[Link, ...],
    rng: random.Random,
    size: int,
    base_href: str | None = None,
    meta_nofollow: bool = False,
    frameset: bool = False,
) -> bytes:
    head = [f'<meta charset="utf-8"><title>{escape(title)}</title>']
    if meta_nofollow:
        head.append('<meta name="robots" content="nofollow">')
    if base_href is not None:
        head.append(f'<base href="{escape(base_href, quote=True)}">')
    parts = ["<!DOCTYPE html>", '<html lang="en"><head>', *head, "</head>"]
    if frameset:
        frames = "".join(f'<frame src="{escape(x.href, quote=True)}">' for x in links)
        parts.append(f'<frameset cols="50%,50%">{frames}</frameset>')
    else:
        half = size // 2
        parts.append(f'<body id="top"><h1>{escape(title)}</h1><p>{filler(rng, half)}</p><ul>')
        parts.extend(_element(link, i) for i, link in enumerate(links))
        parts.append(f'</ul><p id="sec">{filler(rng, size - half)}</p></body>')
    parts.append("</html>\n")
    return "\n".join(parts).encode()


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(size: int = 1) -> bytes:
    """A valid grey `size`×`size` PNG: crawlers that sniff content still see an image."""
    raw = b"".join(b"\x00" + b"\x80" * size for _ in range(size))
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0))
        + _png_chunk(b"IDAT", zlib.compress(raw))
        + _png_chunk(b"IEND", b"")
    )


def pdf_bytes(text: str) -> bytes:
    """A minimal PDF whose text mentions a URL, so a crawler that 'parses' it would stray."""
    return (
        b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n% "
        + text.encode()
        + b"\ntrailer << /Root 1 0 R >>\n%%EOF\n"
    )
