"""A body's content codings (RFC 9110 8.4), undone by ubipy rather than httpx2.

httpx2's decoders read every raw byte a server sends and cap nothing: the fetcher's
cap on the decoded bytes does not stop a gzip member followed by endless junk, which
zlib keeps aside as ``unused_data`` (copied whole at each call). A review's server
had 90 MB of it read in 30 s, 212 MB of memory, CPU growing with the square of what
came, until the fetch deadline. Here the coded bytes are capped as the decoded ones
are, and what follows the coded stream's end is not decoded: it is not the body
(Chrome ignores it too), only read on a little so that a kept-alive connection's
answer can end.
"""

from __future__ import annotations

import zlib
from collections.abc import AsyncGenerator, Iterator
from contextlib import aclosing

from ubipy.errors import UbipyError
from ubipy.fetch.bodies import BodyGate, CappedBody

# The codings decoded here (x-gzip: RFC 9110 asks that it be read as gzip).
DECODED = frozenset({"gzip", "x-gzip", "deflate"})
# The others IANA's HTTP Content Coding Registry holds: a body in one of them is not
# the page. A name that is none of these (``utf-8``, ``none``, ``binary``: a charset or
# a word a misconfigured server put there) codes nothing, and the body is read as it
# came, as browsers and httpx2 read it.
NOT_DECODED = frozenset(
    {"aes128gcm", "br", "compress", "dcb", "dcz", "exi", "pack200-gzip", "x-compress", "zstd"}
)
# More codings on one body than this is a server's mistake or an attack (httpx2's bound).
MAX_CODINGS = 5
# The most a decompressor gives at a time: a bomb inflates no further than the cap
# and one piece, however much a few coded bytes would make.
_PIECE = 256 * 1024
# Bytes read on after the coded stream's end, so that the answer's framing (a chunked
# body's last chunk) can end and its connection be reused; no more is read.
_AFTER_END = 16 * 1024
# The most a gzip header (RFC 1952 2.3: its extra field, file name and comment) may
# take before its deflate stream begins.
_GZIP_HEADER_MAX = 64 * 1024
# A gzip header's flags: a header CRC, an extra field, a name, a comment; the others
# are reserved (zlib refuses a header with one set, as here).
_FHCRC, _FEXTRA, _FNAME, _FCOMMENT, _RESERVED = 2, 4, 8, 16, 0xE0


class BadCoding(UbipyError):
    """A body that cannot be decoded from the codings its answer names."""

    def __init__(self, why: str, *, unsupported: bool = False) -> None:
        """``unsupported``: in a coding not decoded here, which the server will send
        again (no use asking again), rather than one that went wrong this time."""
        super().__init__(why)
        self.unsupported = unsupported


def codings(header: str) -> list[str]:
    """The codings a Content-Encoding names, in the order they were applied, without
    ``identity`` (no coding) and names that are no content coding."""
    names = (name.strip().lower() for name in header.split(","))
    return [name for name in names if name in DECODED or name in NOT_DECODED]


class BodyDecoder:
    """Undoes a body's codings, the last applied first, piece by piece."""

    __slots__ = ("_between", "_stages", "refused")

    def __init__(self, header: str) -> None:
        """The decoder for a Content-Encoding's codings."""
        names = codings(header)
        unknown = ", ".join(name for name in names if name not in DECODED)
        # Why a body in these codings cannot be read: one not decoded here leaves
        # bytes that are not the page (httpx2 passed them on as they came, and they
        # were stored as the page). A body with no bytes (a 304, a redirect's) is
        # read all the same: it has nothing to decode.
        self.refused: str | None = None
        if unknown:
            self.refused = f"not supported: {unknown}"
        elif len(names) > MAX_CODINGS:
            self.refused = f"more than {MAX_CODINGS} codings: {len(names)}"
        self._stages = [] if self.refused else [_Inflate(name) for name in reversed(names)]
        # Bytes passed from each stage to the next so far (see decode).
        self._between = [0] * len(self._stages)

    @property
    def ended(self) -> bool:
        """Whether the coded stream (the last coding applied) has come to its end."""
        return bool(self._stages) and self._stages[0].ended

    def finish(self) -> None:
        """The body has come whole: :class:`BadCoding` unless each coded stream that
        began came to its end. zlib would give the decoded part as if whole, and a
        close-delimited gzip body cut mid-stream was stored as the page (19,821 of
        40,045 bytes, not truncated). An empty body has no stream to end (a 304)."""
        for stage in self._stages:
            if stage.begun and not stage.ended:
                raise BadCoding(f"{stage.name} stream cut short: its end never came")

    def decode(self, data: bytes, budget: int | None = None) -> Iterator[bytes]:
        """The decoded pieces of ``data``, each at most :data:`_PIECE` long, made as
        they are taken: a reader that stops at its cap decodes no further. ``budget``:
        the most one coding may pass to the next over the body (:class:`_Overflow`
        past it). Only the coded and the decoded bytes were capped: "deflate, gzip,
        gzip" over empty stored blocks pushed 1 GB through the inner decoder for 5 KB
        read, seconds of the peer's loop (a review)."""
        if self.refused is not None and data:
            raise BadCoding(self.refused, unsupported=True)
        pieces: Iterator[bytes] = iter((data,))
        for i, stage in enumerate(self._stages):
            if i and budget is not None:
                pieces = self._within(pieces, i, budget)
            pieces = stage.pipe(pieces)
        return pieces

    def _within(self, pieces: Iterator[bytes], i: int, budget: int) -> Iterator[bytes]:
        # The budget and a piece at most: the piece that crosses it still goes.
        for piece in pieces:
            if self._between[i] > budget:
                raise _Overflow(budget)
            self._between[i] += len(piece)
            yield piece


class _Overflow(Exception):
    """A coding gave the next more than its budget: the body is cut there."""


class _Inflate:
    """One gzip or deflate stream's decompressor. A gzip member is read as browsers
    read it: its header, then its deflate stream, whose end is the body's; the
    member's footer (CRC-32 and length) is not checked. Servers that cut it off or
    get it wrong send pages every browser shows, and zlib's own gzip reader made
    each a protocol error, fetched again and lost."""

    __slots__ = ("_head", "_z", "begun", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self.begun = False  # whether any of the stream has come
        self._head = b""
        # deflate is zlib's format (RFC 9110), but servers send the raw one too, as
        # browsers read: which one it is waits for the first two bytes; gzip's
        # deflate stream waits for the end of its header.
        self._z: zlib._Decompress | None = None

    @property
    def ended(self) -> bool:
        return self._z is not None and self._z.eof

    def pipe(self, pieces: Iterator[bytes]) -> Iterator[bytes]:
        for data in pieces:
            yield from self._inflate(data)

    def _inflate(self, data: bytes) -> Iterator[bytes]:
        self.begun = self.begun or bool(data)
        z = self._z
        if z is None:
            data = self._head + data
            if self.name == "deflate":
                begins = 0 if len(data) >= 2 else None
                wbits = zlib.MAX_WBITS if begins is not None and _zlib_header(data) else -15
            else:
                begins, wbits = _gzip_header_end(data), -15
            if begins is None:
                self._head = data
                return
            self._head = b""
            data = data[begins:]
            z = self._z = zlib.decompressobj(wbits)
        try:
            # What follows the stream's end is not decoded: zlib would copy it aside.
            while data and not z.eof:
                piece = z.decompress(data, _PIECE)
                data = z.unconsumed_tail
                if piece:
                    yield piece
        except zlib.error as exc:
            raise BadCoding(f"not {self.name}: {exc}") from exc


def _gzip_header_end(data: bytes) -> int | None:
    """Where a gzip member's deflate stream begins after its header (RFC 1952 2.3),
    or None while the header has not come whole; BadCoding if it is no gzip."""
    if len(data) >= 2 and data[:2] != b"\x1f\x8b":
        raise BadCoding("not gzip: no gzip header")
    if len(data) < 10:
        return None
    flags = data[3]
    if data[2] != 8 or flags & _RESERVED:
        raise BadCoding("not gzip: an unknown method or flags")
    at = 10
    if flags & _FEXTRA:
        if len(data) < at + 2:
            return None
        at += 2 + int.from_bytes(data[at : at + 2], "little")
    for flag in (_FNAME, _FCOMMENT):
        if flags & flag:
            zero = data.find(b"\0", at)
            if zero < 0:
                at = len(data) + 1
                break
            at = zero + 1
    if flags & _FHCRC:
        at += 2
    if at > len(data):
        if len(data) > _GZIP_HEADER_MAX:
            raise BadCoding(f"not gzip: a header over {_GZIP_HEADER_MAX} bytes")
        return None
    return at


def _zlib_header(data: bytes) -> bool:
    """Whether ``data`` starts with a zlib header (RFC 1950): deflate, a window of at
    most 32 KB, and a check that makes the two bytes a multiple of 31."""
    return data[0] & 0x0F == 8 and data[0] >> 4 <= 7 and (data[0] << 8 | data[1]) % 31 == 0


async def read_decoded(
    pieces: AsyncGenerator[bytes, None],
    decoder: BodyDecoder,
    max_bytes: int,
    gate: BodyGate | None = None,
) -> tuple[bytes, bool]:
    """The first ``max_bytes`` of the body that ``pieces`` (its coded bytes) decode
    to, and whether there was more: more decoded bytes, or more than ``max_bytes``
    coded ones before the coded stream's end (:class:`BadCoding` when they do not
    decode, or end before the coded stream does: an error as a body cut short of its
    Content-Length is, retried). Closed explicitly: leaving the loop early must not
    strand the generator."""
    kept = CappedBody(max_bytes, gate)
    read = 0
    async with aclosing(pieces) as body:
        async for chunk in body:
            read += len(chunk)
            if decoder.ended:
                if read > _AFTER_END:  # counted from the end: see below
                    break
                continue
            try:
                for piece in decoder.decode(chunk, max_bytes):
                    if not kept.add(piece):
                        return kept.result()
                    if kept.waits:
                        await kept.wait()
            except _Overflow:
                # A coding inside another made more than the body may: cut as a long
                # body is (a page's inner streams are no larger than the page).
                kept.truncated = True
                return kept.result()
            except BadCoding:
                raise
            except Exception as exc:
                # Whatever else a decoder raises on what a server sent is the page's
                # failure, not the worker's.
                raise BadCoding(f"{type(exc).__name__}: {exc}") from exc
            if decoder.ended:
                read = 0  # from here on, what is read after the end
            elif read > max_bytes:
                # As many coded bytes as the cap allows decoded ones, and the stream
                # still going (stored blocks, empty ones): cut as a long body is.
                kept.truncated = True
                return kept.result()
    decoder.finish()
    return kept.result()
