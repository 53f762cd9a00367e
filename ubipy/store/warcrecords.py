"""WARC 1.1 records as bytes, written by hand for the crawl's hot path, and read back.

The WARC store (:mod:`ubipy.store.warcstore`) writes a page's records as it commits
it: one gzip member per record, so that any record can be read alone from its offset
(what CDXJ and Common Crawl's index point at) and files can be concatenated. warcio's
writer builds each record through several layers of objects; here a record is one
header block joined to its content and compressed once, with its digests (SHA-1,
base 32, as warcio, Heritrix and Common Crawl write them) computed on the way.

The HTTP parts are what was sent and received: the request's header lines as they
went out, the response's status line and header lines as they came. The payload kept
is the *decoded* body (no content coding, no chunking), so the headers that describe
the encoded message are renamed as Common Crawl does (``X-Crawler-Content-Encoding``,
``X-Crawler-Transfer-Encoding``, ``X-Crawler-Content-Length``) and a
``Content-Length`` of the payload kept is added: a replay tool (pywb) serves the
payload as it is, and the original values stay readable.
"""

from __future__ import annotations

import hashlib
import math
import os
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from isal import isal_zlib

from ubipy.errors import StorageError

__all__ = [
    "CONFORMS_TO",
    "GZIP_LEVEL",
    "LARGE_BODY",
    "NOT_MODIFIED",
    "SAME_PAYLOAD",
    "SMALL_RECORD",
    "WARC_VERSION",
    "HttpHead",
    "Record",
    "RecordReader",
    "field_value",
    "fields_text",
    "iso_utc",
    "member",
    "member_pieces",
    "metadata_block",
    "one_line",
    "read_record",
    "record_id",
    "record_ids",
    "record_pieces",
    "request_block",
    "response_head",
    "sha1_digest",
    "warc_record",
]

WARC_VERSION = "1.1"
CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"
# The revisit profiles of WARC 1.1 (section 6.7).
NOT_MODIFIED = "http://netpreserve.org/warc/1.1/revisit/server-not-modified"
SAME_PAYLOAD = "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest"
#: The compression level of each record's gzip member unless told (``--warc-level``).
#: Level 1 is ISA-L's fastest (python-isal): zlib level 1's ratio at a third of its
#: CPU; 2-9 are zlib's levels. Compression is most of a record's cost (docs/storage.md).
GZIP_LEVEL = 1
#: At level 1, a record under this many bytes (a request, a metadata record, a revisit)
#: is compressed at ISA-L's level 0: its level 1 spends about 5 us building a record's
#: Huffman codes, more than compressing such a record takes. A page's records cost 19 us
#: less (98 to 79 us, bench/speed.py's 3 KB pages), for files 20% larger on those pages
#: and 4.7% on rustdoc's (docs/storage.md).
SMALL_RECORD = 1024
#: A body this large is written as a record in pieces, not copied whole into a block, a
#: record and a gzip member in turn (:func:`record_pieces`).
LARGE_BODY = 1 << 20
_SLICE = 1 << 18
_B32 = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
# Two letters for each 10 bits: a digest's 32 letters in 16 lookups.
_B32_PAIRS = tuple(a + b for a in _B32 for b in _B32)
_BOOL = {False: "false", True: "true"}
_RENAMED = {b"content-encoding", b"transfer-encoding", b"content-length"}
# Status lines are written as HTTP/1.x: what WARC readers parse.
_VERSIONS = {"HTTP/1.0", "HTTP/1.1"}

Headers = tuple[tuple[bytes, bytes], ...]

# The last second iso_utc formatted, and its text.
_last_second: tuple[float, str] = (-1.0, "")


@dataclass(frozen=True, slots=True)
class HttpHead:
    """A response's head as received, and the request's header lines as sent."""

    status: int
    reason: str
    version: str
    headers: Headers
    request_headers: Headers = ()


@dataclass(frozen=True, slots=True)
class Record:
    """A record read back: its WARC header fields (names as written) and its block."""

    fields: dict[str, str]
    block: bytes

    @property
    def type(self) -> str:
        return self.fields.get("WARC-Type", "")

    def http_payload(self) -> bytes:
        """The block past its HTTP head (a response's payload)."""
        end = self.block.find(b"\r\n\r\n")
        return b"" if end < 0 else self.block[end + 4 :]


def iso_utc(t: float) -> str:
    """A Unix time as ISO 8601 in UTC, to the microsecond: ``2025-01-02T03:04:05.678901Z``
    (what ``datetime.fromtimestamp(t, UTC)`` gives, rounded the same way)."""
    global _last_second
    frac, whole = math.modf(t)
    us = round(frac * 1e6)  # half to even, as datetime rounds
    if frac < 0 or us >= 1_000_000:  # before 1970, or rounded up to the next second
        return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    second, text = _last_second
    if whole != second:
        # A page's records and those of the pages of one commit share their second:
        # formatting it once saves most of the cost (a page asks three times).
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole))
        _last_second = (whole, text)
    return f"{text}.{us:06d}Z"


def field_value(value: str) -> str:
    """A header value on one line: control characters (CR, LF among them) become spaces."""
    if value.isprintable():  # the usual case, at C speed
        return value.strip()
    return "".join(c if c.isprintable() else " " for c in value).strip()


def one_line(text: str) -> str:
    """A title as a warc-fields value: every run of white space becomes one space."""
    return " ".join(field_value(text).split())


def metadata_block(
    peer: str | None,
    url: str,
    shown_url: str,
    at: float,
    depth: int | None,
    *,
    changed: bool | None = None,
    truncated: bool = False,
    title: str | None = None,
    encoding: str | None = None,
    encoding_source: str | None = None,
) -> bytes:
    """A metadata record's warc-fields: the peer, when, the depth; for a later visit
    (``changed`` given) whether it changed (and a changed one's truncation), else the
    first fetch's truncation, title and encoding; the URL in Unicode when it differs
    (``shown_url``)."""
    # Written out line by line: a page's metadata record is made at every commit.
    text = f"peer-id: {peer or ''}\r\nfetched-at: {iso_utc(at)}\r\n"
    if depth is not None:
        text += f"depth: {depth}\r\n"
    if changed is not None:
        # What the shard keeps of a later visit: not its title or encoding.
        text += f"changed: {_BOOL[changed]}\r\n"
        if changed:
            text += f"truncated: {_BOOL[truncated]}\r\n"
    else:
        text += f"truncated: {_BOOL[truncated]}\r\n"
        if title is not None:
            text += f"title: {one_line(title)}\r\n"
        if encoding is not None:
            text += f"encoding: {field_value(encoding)}\r\n"
        if encoding_source is not None:
            text += f"encoding-source: {field_value(encoding_source)}\r\n"
    if shown_url != url:
        text += f"url-unicode: {field_value(shown_url)}\r\n"
    return text.encode("utf-8")


def record_id() -> str:
    """A random (version 4) UUID as a WARC record id."""
    return record_ids(1)[0]


def record_ids(n: int) -> list[str]:
    """``n`` record ids from one call for random bytes; uuid.uuid4() made by hand, a
    few times faster, for the ids of every page."""
    h = os.urandom(16 * n).hex()
    ids = []
    for i in range(0, 32 * n, 32):
        variant = "89ab"[int(h[i + 16], 16) & 3]
        ids.append(
            f"<urn:uuid:{h[i : i + 8]}-{h[i + 8 : i + 12]}-4{h[i + 13 : i + 16]}-"
            f"{variant}{h[i + 17 : i + 20]}-{h[i + 20 : i + 32]}>"
        )
    return ids


def sha1_digest(data: bytes | Sequence[bytes]) -> str:
    """``sha1:`` and the digest in base 32 (RFC 4648), as WARC writers give it, of
    ``data`` or of its pieces one after the other."""
    if isinstance(data, bytes):
        sha1 = hashlib.sha1(data)
    else:
        sha1 = hashlib.sha1()
        for piece in data:
            sha1.update(piece)
    # 160 bits are 32 letters of 5 bits, two at a time: a third of base64.b32encode's
    # pure Python, and written out, a sixth less than a loop (four a page).
    n = int.from_bytes(sha1.digest(), "big")
    p = _B32_PAIRS
    return (
        f"sha1:{p[n >> 150]}{p[n >> 140 & 1023]}{p[n >> 130 & 1023]}{p[n >> 120 & 1023]}"
        f"{p[n >> 110 & 1023]}{p[n >> 100 & 1023]}{p[n >> 90 & 1023]}{p[n >> 80 & 1023]}"
        f"{p[n >> 70 & 1023]}{p[n >> 60 & 1023]}{p[n >> 50 & 1023]}{p[n >> 40 & 1023]}"
        f"{p[n >> 30 & 1023]}{p[n >> 20 & 1023]}{p[n >> 10 & 1023]}{p[n & 1023]}"
    )


def response_head(head: HttpHead, payload_length: int | None) -> bytes:
    """The status line and header lines as received, those of the encoded message
    renamed; with ``payload_length``, a Content-Length of the payload kept."""
    version = head.version if head.version in _VERSIONS else "HTTP/1.1"
    # The space after the code stays when there is no reason phrase (RFC 9112, 4).
    out = [f"{version} {head.status} {head.reason}\r\n".encode("latin-1", "replace")]
    renamed = _RENAMED
    for name, value in head.headers:
        # Pieces, not a line made a call: a third less (every page, two heads).
        out += (b"X-Crawler-" + name if name.lower() in renamed else name, b": ", value, b"\r\n")
    if payload_length is not None:
        out.append(b"Content-Length: %d\r\n" % payload_length)
    out.append(b"\r\n")
    return b"".join(out)


def request_block(url: str, head: HttpHead) -> bytes:
    """``GET <target> HTTP/1.1`` and the request's header lines as sent."""
    # A crawled URL is normalised (scheme://host/path?query, no fragment): its target
    # is what follows the host; anything else goes through urlsplit.
    slash = url.find("/", url.find("//") + 2) if url.startswith(("http://", "https://")) else -1
    if slash > 0 and "#" not in url:
        target = url[slash:]
    else:
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    out = [f"GET {target} HTTP/1.1\r\n".encode("ascii", "replace")]
    for name, value in head.request_headers:
        out += (name, b": ", value, b"\r\n")
    out.append(b"\r\n")
    return b"".join(out)


def warc_record(
    fields: str, content_type: str, block: bytes, *, payload_digest: str | None = None
) -> bytes:
    """A record, uncompressed: ``WARC/1.1``, the header lines ``fields`` (each ending
    in CRLF, see :func:`fields_text`), Content-Type, the digests and Content-Length,
    then the block and two CRLFs."""
    head = _record_head(fields, content_type, block, payload_digest)
    return head + block + b"\r\n\r\n"


def record_pieces(
    fields: str, content_type: str, block: Sequence[bytes], *, payload_digest: str | None
) -> list[bytes]:
    """:func:`warc_record` of a block in pieces, left in pieces: a large body (a sitemap
    of 50 MB) is not copied into a block and then a record (QA: 4.5 times its size)."""
    return [_record_head(fields, content_type, block, payload_digest), *block, b"\r\n\r\n"]


def _record_head(
    fields: str, content_type: str, block: bytes | Sequence[bytes], payload_digest: str | None
) -> bytes:
    payload = f"WARC-Payload-Digest: {payload_digest}\r\n" if payload_digest else ""
    size = len(block) if isinstance(block, bytes) else sum(map(len, block))
    return (
        f"WARC/{WARC_VERSION}\r\n{fields}Content-Type: {content_type}\r\n{payload}"
        f"WARC-Block-Digest: {sha1_digest(block)}\r\nContent-Length: {size}\r\n\r\n"
    ).encode()


def fields_text(fields: Iterable[tuple[str, str]]) -> str:
    """WARC header lines, each ending in CRLF (the values already on one line)."""
    return "".join(f"{name}: {value}\r\n" for name, value in fields)


def member(record: bytes, level: int = GZIP_LEVEL) -> bytes:
    """One record as one gzip member, compressed at ``level`` (1-9)."""
    if level == 1:
        return isal_zlib.compress(record, 0 if len(record) < SMALL_RECORD else 1, 31)
    # zlib's default state (a 32 KB window, memLevel 8) takes ~150 us to set up, more
    # than compressing a small record: a record gets a window no larger than itself.
    bits = min(15, max(9, len(record).bit_length()))
    z = zlib.compressobj(level, zlib.DEFLATED, 16 + bits, min(8, max(1, bits - 7)))
    return z.compress(record) + z.flush()


def member_pieces(pieces: Sequence[bytes], level: int = GZIP_LEVEL) -> list[bytes]:
    """:func:`member` of a record in pieces, compressed a piece at a time, left in
    pieces (the file's writer writes them one after the other)."""
    # A slice at a time: zlib's output of a whole piece is made in blocks, then joined.
    slices = [memoryview(p)[i : i + _SLICE] for p in pieces for i in range(0, len(p), _SLICE)]
    if level == 1:
        fast = isal_zlib.compressobj(1, zlib.DEFLATED, 31)
        out = [fast.compress(s) for s in slices] + [fast.flush()]
    else:
        z = zlib.compressobj(level, zlib.DEFLATED, 31)
        out = [z.compress(s) for s in slices] + [z.flush()]
    return [piece for piece in out if piece]


def _parse(raw: bytes) -> Record:
    """An uncompressed record: its fields and block (the two trailing CRLFs checked)."""
    end = raw.find(b"\r\n\r\n")
    if end < 0 or not raw.startswith(b"WARC/"):
        raise StorageError("not a WARC record")
    lines = raw[:end].decode("utf-8", "replace").split("\r\n")
    fields: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep:
            raise StorageError(f"a WARC header line without a colon: {line[:80]!r}")
        fields[name.strip()] = value.strip()
    try:
        length = int(fields["Content-Length"])
    except (KeyError, ValueError):
        raise StorageError("a WARC record without a Content-Length") from None
    start = end + 4
    if len(raw) != start + length + 4 or raw[start + length :] != b"\r\n\r\n":
        raise StorageError("a WARC record whose length does not match its Content-Length")
    return Record(fields, raw[start : start + length])


def read_record(data: bytes) -> tuple[Record, int]:
    """The record in the gzip member at the start of ``data``, and the member's length."""
    z = zlib.decompressobj(31)
    try:
        raw = z.decompress(data)
    except zlib.error as exc:
        raise StorageError(f"a WARC record is not a gzip member: {exc}") from exc
    if not z.eof:
        raise StorageError("a WARC record is cut short")
    return _parse(raw), len(data) - len(z.unused_data)


class RecordReader:
    """Records from a stream of gzip members, fed in pieces of any size (a byte at a
    time included); each comes with its offset and length in the stream."""

    def __init__(self) -> None:
        self._z = zlib.decompressobj(31)
        self._raw: list[bytes] = []
        self._start = 0  # the current member's offset
        self._fed = 0  # bytes fed into the current member

    def feed(self, data: bytes) -> Iterator[tuple[Record, int, int]]:
        """(record, offset, length) of each member ``data`` completes."""
        while data:
            try:
                self._raw.append(self._z.decompress(data))
            except zlib.error as exc:
                raise StorageError(f"not a gzip member at {self._start}: {exc}") from exc
            if not self._z.eof:
                self._fed += len(data)
                return
            rest = self._z.unused_data
            length = self._fed + len(data) - len(rest)
            yield _parse(b"".join(self._raw)), self._start, length
            self._start += length
            self._z = zlib.decompressobj(31)
            self._raw, self._fed, data = [], 0, rest

    @property
    def partial(self) -> bool:
        """Whether a member was begun and not finished (a torn tail)."""
        return self._fed > 0 or bool(self._raw)
