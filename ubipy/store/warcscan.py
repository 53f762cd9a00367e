"""Reading a WARC file of one gzip member per record as a stream of its captures,
without ever holding more than a record's head: what the indexes
(:mod:`ubipy.store.warcindex`) are made of.

A member counts only when it is whole: its gzip trailer read and its CRC right
(zlib checks both), its text a WARC record whose block is as long as its
``Content-Length`` says. Whatever is not (a torn tail after a ``kill -9``, bytes
that are not gzip) is skipped up to the next gzip header, counted and reported, so
that every capture indexed reads back from its offset. A member's end is only
known by inflating it to the end: the whole file is decompressed once, in pieces
(the gzip format has no length field to skip by).

Which records are captures, and what is said of each, follows pywb's own indexer
(``pywb.indexer.archiveindexer.DefaultRecordParser``): ``warcinfo`` and ``request``
records are not, nor are records of ``application/warc-fields`` (ubipy's metadata
records); a ``revisit``'s media type is ``warc/revisit``; only a ``response`` has a
status; a record with no payload digest but a payload gets the base32 SHA-1 of it
(a revisit gets none).
"""

from __future__ import annotations

import base64
import hashlib
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO

from warcio.timeutils import iso_date_to_datetime

from ubipy.errors import ExportError

__all__ = ["Capture", "ScanCounts", "bare_media_type", "header_text", "scan", "scan_file"]

_GZIP = b"\x1f\x8b\x08"
_READ = 1 << 20
# Compressed bytes fed to zlib at a time: what zlib copies out as the next member's
# start when one ends (so no more than this per record).
_FEED = 1 << 14
# Decompressed bytes at most per zlib call: a bomb of zeros stays small in memory.
_OUT = 1 << 18
# A record's head: its WARC headers and, for HTTP records, the HTTP ones.
_HEAD = 1 << 16
_NOT_CAPTURES = ("warcinfo", "request")
_STATUS = re.compile(r"[1-9][0-9]{2}", re.ASCII)
_NOT_INDEXED_TYPES = ("application/warc-fields", "text/anvl")
_MIME_END = re.compile("[; ]")


@dataclass(frozen=True, slots=True)
class Capture:
    """A record that an index lists: where it lies and what it captured."""

    url: str
    fetch_time: datetime  # WARC-Date, in UTC
    record_type: str  # response, revisit, resource, metadata...
    content_type: str | None  # the bare media type (HTTP's for an HTTP record)
    mime_detected: str | None  # WARC-Identified-Payload-Type
    status: int | None  # the HTTP status of an HTTP record (a revisit's too)
    digest: str | None  # the payload digest, without a "sha1:" prefix
    json_metadata: str | None  # WARC-Json-Metadata, as pywb keeps it
    offset: int
    length: int

    @property
    def timestamp(self) -> str:
        """The 14-digit timestamp of CDX indexes (and replay URLs)."""
        return self.fetch_time.strftime("%Y%m%d%H%M%S")

    @property
    def mime(self) -> str:
        """The media type as pywb indexes it: ``warc/revisit`` for a revisit."""
        if self.record_type == "revisit":
            return "warc/revisit"
        return "unk" if self.content_type is None else self.content_type


@dataclass(slots=True)
class ScanCounts:
    """What a scan found besides its captures."""

    records: int = 0  # whole records, captures or not
    skipped: int = 0  # stretches of the file that were not whole records
    skipped_bytes: int = 0
    warcinfo: dict[str, str] | None = None  # the first warcinfo record's fields


class _Head:
    """Collects a record's head while the member is inflated, and hashes its payload
    when the record has none in its headers."""

    __slots__ = ("_end", "_hasher", "_seen", "block", "decided", "fields", "head")

    def __init__(self) -> None:
        self.head = bytearray()
        self.decided = False
        self.fields: dict[str, str] = {}
        self.block = -1  # where the block starts in the record
        self._end = -1
        self._seen = 0
        self._hasher: hashlib._Hash | None = None

    def feed(self, out: bytes) -> None:
        start = self._seen
        self._seen += len(out)
        if not self.decided:
            self.head += out
            self._decide()
        elif self._hasher is not None and start < self._end:
            self._hasher.update(out[: self._end - start])

    def _decide(self) -> None:
        if self.block < 0:
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                self.decided = len(self.head) >= _HEAD
                return
            self.block = end + 4
            self.fields = _fields(bytes(self.head[:end]))
        payload = self.block
        if self.fields.get("content-type", "").startswith("application/http"):
            # The HTTP headers are wanted whole: the status and the media type.
            end = self.head.find(b"\r\n\r\n", self.block)
            if end < 0:
                self.decided = len(self.head) >= _HEAD
                return
            payload = end + 4
        self.decided = True
        kind = self.fields.get("warc-type", "")
        if "warc-payload-digest" in self.fields or kind in ("revisit", *_NOT_CAPTURES):
            return
        self._end = self.block + _int(self.fields.get("content-length"))
        self._hasher = hashlib.sha1()
        self._hasher.update(bytes(self.head[payload : self._end]))

    def size(self) -> int:
        return self._seen

    def digest(self) -> str | None:
        if self._hasher is None:
            return None
        return base64.b32encode(self._hasher.digest()).decode("ascii")


def _int(value: str | None) -> int:
    try:
        return int(value or "")
    except ValueError:
        return -1


def _fields(head: bytes) -> dict[str, str]:
    """A record's WARC headers, names lowercased, the first of each kept; {} unless the
    head starts as a WARC record does."""
    lines = head.decode("utf-8", "replace").split("\r\n")
    if not lines[0].startswith("WARC/"):
        return {}
    fields: dict[str, str] = {}
    name = ""
    for line in lines[1:]:
        if line[:1] in (" ", "\t") and name:  # a folded line continues the last field
            fields[name] += " " + line.strip()
            continue
        key, sep, value = line.partition(":")
        if sep:
            name = key.strip().lower()
            fields.setdefault(name, value.strip())
    return fields


def _http(head: bytearray, block: int) -> tuple[int | None, str | None]:
    """The status and Content-Type of an HTTP message starting at ``block``."""
    end = head.find(b"\r\n\r\n", block)
    text = header_text(bytes(head[block : end if end >= 0 else len(head)]))
    lines = text.split("\r\n")
    parts = lines[0].split(None, 2)
    # Three ASCII digits (str.isdigit takes "²", which int refuses; a status past 999
    # fits no index's column).
    status = int(parts[1]) if len(parts) > 1 and _STATUS.fullmatch(parts[1]) else None
    for line in lines[1:]:
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "content-type":
            return status, value.strip()
    return status, None


class _Input:
    """The file, read forward in large pieces; a piece's bytes are handed out as views."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self._buf = memoryview(b"")
        self._base = 0  # where the buffer starts in the file
        self._i = 0

    @property
    def at(self) -> int:
        return self._base + self._i

    def piece(self, n: int) -> memoryview:
        """The next ``n`` bytes at most, not consumed; empty at the end of the file."""
        if self._i >= len(self._buf):
            self._base += len(self._buf)
            self._buf = memoryview(self._f.read(_READ))
            self._i = 0
        return self._buf[self._i : self._i + n]

    def advance(self, n: int) -> None:
        self._i += n

    def find_gzip(self, start: int) -> int:
        """The offset of the first gzip header at or after ``start``, or -1 when there is
        none; the input is moved there (or to the end of the file)."""
        at = start
        while True:
            self._f.seek(at)
            chunk = self._f.read(_READ)
            found = chunk.find(_GZIP)
            if found >= 0 or len(chunk) < _READ:
                self._restart(at + (found if found >= 0 else len(chunk)))
                return self.at if found >= 0 else -1
            at += len(chunk) - (len(_GZIP) - 1)  # a header across two reads is found

    def _restart(self, at: int) -> None:
        self._f.seek(at)
        self._base, self._buf, self._i = at, memoryview(b""), 0


def _member(data: _Input) -> tuple[bool, _Head]:
    """Inflates the member at the input's place to its end; True when it is whole (its
    trailer read and checked). The input is left after the member when it is."""
    d = zlib.decompressobj(31)
    head = _Head()
    while not d.eof:
        piece = data.piece(_FEED)
        if not piece:
            return False, head
        try:
            head.feed(d.decompress(piece, _OUT))
            while d.unconsumed_tail and not d.eof:
                head.feed(d.decompress(d.unconsumed_tail, _OUT))
        except zlib.error:
            return False, head
        data.advance(len(piece) - (len(d.unused_data) if d.eof else 0))
    return True, head


def _capture(head: _Head, offset: int, length: int) -> Capture | None:
    """What an index says of a whole record, or None for one it does not list."""
    f = head.fields
    kind = f.get("warc-type", "")
    url = f.get("warc-target-uri", "")
    content_type = f.get("content-type", "")
    if kind in _NOT_CAPTURES or not url or content_type.startswith(_NOT_INDEXED_TYPES):
        return None
    try:
        when = iso_date_to_datetime(f.get("warc-date", ""), tz_aware=True)
    except (ValueError, TypeError):
        return None
    url = url.removeprefix("<").removesuffix(">")  # WARC 1.0 wrote <uri>
    status = None
    mime: str | None = content_type
    if content_type.startswith("application/http"):
        status, mime = _http(head.head, head.block)
    digest = f.get("warc-payload-digest") or head.digest()
    return Capture(
        url=url,
        fetch_time=when,
        record_type=kind,
        content_type=bare_media_type(mime),
        mime_detected=f.get("warc-identified-payload-type"),
        status=status,
        digest=digest.removeprefix("sha1:") if digest else None,
        json_metadata=f.get("warc-json-metadata"),
        offset=offset,
        length=length,
    )


def header_text(raw: bytes) -> str:
    """An HTTP head's bytes as warcio (and so pywb) reads them: UTF-8 when they are,
    else Latin-1 (a Content-Type in UTF-8 was indexed otherwise than pywb does)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def bare_media_type(media_type: str | None) -> str | None:
    """A media type without its parameters (``text/html; charset=...``), as pywb cuts it:
    "" for a Content-Type with none before them (``;x``), None for no Content-Type."""
    return _MIME_END.split(media_type, 1)[0] if media_type else None


def _whole(head: _Head) -> bool:
    """A WARC record, its block as long as its Content-Length and then CRLF CRLF."""
    length = _int(head.fields.get("content-length"))
    return bool(head.fields) and length >= 0 and head.size() == head.block + length + 4


def scan_file(path: Path, counts: ScanCounts) -> Iterator[Capture]:
    """The captures of the WARC file at ``path`` (see :func:`scan`); a file that cannot
    be read is ExportError, one line naming it."""
    try:
        with open(path, "rb") as f:
            yield from scan(f, counts)
    except OSError as exc:
        raise ExportError(f"{path}: cannot read: {exc.strerror or exc}") from exc


def scan(f: IO[bytes], counts: ScanCounts) -> Iterator[Capture]:
    """The captures of the WARC file open as ``f`` (binary, seekable), in file order;
    ``counts`` is filled in as it goes."""
    data = _Input(f)
    skipped_to = -1
    while data.piece(1):
        offset = data.at
        whole, head = _member(data)
        if whole and _whole(head):
            counts.records += 1
            if counts.warcinfo is None and head.fields.get("warc-type") == "warcinfo":
                counts.warcinfo = _info(head)
            capture = _capture(head, offset, data.at - offset)
            if capture is not None:
                yield capture
            continue
        # Not a whole record: skipped up to the next gzip header, if there is one
        # (a stretch ending where the last one did continues it).
        resume = data.find_gzip(offset + 1)
        end = resume if resume >= 0 else data.at
        counts.skipped += offset != skipped_to
        counts.skipped_bytes += end - offset
        skipped_to = end
        if resume < 0:
            return


def _info(head: _Head) -> dict[str, str]:
    """A warcinfo record's fields (``name: value`` lines), from its head."""
    text = bytes(head.head[head.block :]).decode("utf-8", "replace")
    fields: dict[str, str] = {}
    for line in text.split("\r\n"):
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip())
    return fields
