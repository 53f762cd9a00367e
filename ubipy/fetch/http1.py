"""HTTP/1.1 for the crawler's transport, without I/O: a request's head as bytes, and a
response read from the bytes fed in.

The response is parsed by llhttp (Node.js's parser) through httptools, the binding
uvicorn uses: 2 us a response against h11's 42 (a request written and its answer read,
5 KB of body); a crawl's page cost 0.56-0.57 ms of CPU with h11 against 0.48-0.52
(bench/speed.py). What httptools leaves to its caller is here: skipping 1xx answers,
bounds on the head, the trailers and any one line, a body that ends with the
connection, bytes past the answer (the connection is then not reused), and which
failures are the server's.

The transport feeds :class:`ResponseReader` what the socket gives and reads back the
head, the body's pieces and the end; ``feed(b"")`` is the end of the connection.
"""

from __future__ import annotations

import re

import httptools

from ubipy.errors import UbipyError

__all__ = ["MAX_HEAD", "BadRequest", "ProtocolFailure", "ResponseReader", "request_head"]

# The longest response head accepted; a server sending more is broken or hostile.
# Chrome's bound: large Content-Security-Policy, Link and Set-Cookie sets pass 64 KiB.
MAX_HEAD = 256 * 1024

# What a request's head may hold: a token method, a target without spaces or
# controls, and header lines with token names and values without CR, LF or NUL (a
# value holding them would let whoever set it write headers of their own).
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_HEAD = re.compile(
    rb"%s [!-~\x80-\xff]+ HTTP/1\.1\r\n(?:%s:[ \t]*[^\r\n\0]*\r\n)*\r\n" % (_TOKEN, _TOKEN)
)
_NO_BODY = frozenset({204, 304})
# The blank line that ends a head, and a 1xx head's status line.
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_INFORMATIONAL = re.compile(rb"HTTP/[0-9.]+ +1[0-9][0-9]\b")
# "Transfer-Encoding: identity" (no coding, RFC 2616's): browsers drop it and frame the
# body by its Content-Length, where llhttp reads it to the close.
_TE_IDENTITY = re.compile(rb"(?im)^transfer-encoding[ \t]*:[ \t]*identity[ \t]*\r?\n")


# Why a callback stopped the parser when the answer is to be read again, not refused.
_READ_AGAIN = "read again"
_LENGTH_LINE = re.compile(rb"(?im)^content-length[ \t]*:([^\r\n]*)\r?\n")


def _final_head(raw: bytes) -> tuple[int, int] | None:
    """Where the answer's head (after any informational ones) begins and ends in
    ``raw``; None until it has all come."""
    start = 0
    while (end := _HEAD_END.search(raw, start)) is not None:
        if not _INFORMATIONAL.match(raw, start):
            return start, end.end()
        start = end.end()
    return None


def _one_length(head: bytes) -> bytes:
    """``head`` with its Content-Length lines as one, when they all say one number;
    as it is otherwise (lengths that differ are the answer's error)."""
    lines = list(_LENGTH_LINE.finditer(head))
    values = {v.strip() for line in lines for v in line.group(1).split(b",")}
    if len(values) != 1 or not (value := values.pop()).isdigit():
        return head
    first, rest = lines[0], lines[1:]
    out = head[: first.start()] + b"Content-Length: " + value + b"\r\n"
    at = first.end()
    for line in rest:
        out += head[at : line.start()]
        at = line.end()
    return out + head[at:]


class _Stop(Exception):
    """Raised in a callback to stop httptools' parser (the reason is kept aside)."""


class ProtocolFailure(UbipyError):
    """The server's bytes are not an HTTP/1.x response that can be read."""


class BadRequest(UbipyError):
    """A request that cannot be written as it is (a header value with a line break)."""


def request_head(method: str, target: bytes, headers: list[tuple[bytes, bytes]]) -> bytes:
    """The request line and header lines, checked (:class:`BadRequest`)."""
    head = b"%s %s HTTP/1.1\r\n%s\r\n" % (
        method.encode("ascii"),
        target,
        b"".join([b"%s: %s\r\n" % (name, value) for name, value in headers]),
    )
    # The pattern allows no CR, LF or NUL in a value; a CRLF there would make one more
    # line of the right form, which the count of lines finds.
    if _HEAD.fullmatch(head) is None or head.count(b"\n") != len(headers) + 2:
        raise BadRequest(f"request head not valid HTTP/1.1: {head[:200]!r}")
    return head


class ResponseReader:
    """One response, as the bytes fed in reveal it.

    ``status`` is set once the head is in (``headers`` as received, names as sent,
    ``reason`` and ``version`` with it); ``take_body()`` hands over the body's pieces
    read so far, decoded from chunked framing; ``complete`` says the response ended,
    and ``reusable`` whether the connection may carry another request. ``head_only``:
    the answer to a HEAD, whose head is the whole of it."""

    __slots__ = (
        "_body",
        "_deferred",
        "_doubtful",
        "_early",
        "_ended_by_close",
        "_failure",
        "_fed",
        "_head_only",
        "_head_start",
        "_held",
        "_parser",
        "_progressed",
        "_reason",
        "_reread",
        "_searched",
        "_stalled",
        "_switched",
        "_trailers",
        "complete",
        "headers",
        "reason",
        "reusable",
        "status",
        "version",
    )

    def __init__(self, *, head_only: bool = False) -> None:
        self._parser = httptools.HttpResponseParser(self)
        # As browsers and h11 read the web: lines may end in a bare LF, header values
        # may hold bytes RFC 9110 leaves out, versions may be other than 1.0 and 1.1,
        # and Transfer-Encoding wins over a Content-Length beside it (such an answer's
        # connection is not reused: what follows its end is in doubt).
        self._parser.set_dangerous_leniencies(
            lenient_headers=True,
            lenient_optional_cr_before_lf=True,
            lenient_version=True,
            lenient_chunked_length=True,
            # "a   " for 10: sizes padded with spaces, as Chrome takes them.
            lenient_spaces_after_chunk_size=True,
        )
        self._head_only = head_only
        self._fed = 0
        self._body: list[bytes] = []
        self._reason = b""
        self._ended_by_close = False
        self._doubtful = False  # both Content-Length and chunked
        self._switched = False
        self._progressed = False
        self._stalled = 0
        self._trailers = 0
        # Why a callback stopped the parser (httptools reports only that one did).
        self._failure: str | None = None
        # The bytes of a head not yet whole, kept in case it must be read again
        # (`_read_again`), and whether it was.
        self._early: list[bytes] = []
        self._reread = False
        self._deferred = False  # to be read again once the head has all come
        # Deferred, the bytes so far, where the head being read begins (past any
        # informational ones) and how far the search for its end has looked.
        self._held = bytearray()
        self._head_start = self._searched = 0
        self.status: int | None = None
        self.reason = ""
        self.version = "HTTP/1.1"
        self.headers: list[tuple[bytes, bytes]] = []
        self.complete = False
        self.reusable = False

    # -- what the transport calls ---------------------------------------------
    def feed(self, data: bytes | bytearray) -> None:
        """Bytes from the connection; ``b""``: the server closed it."""
        if self.complete:
            if data:
                self.reusable = False  # more than was asked for: start afresh
            return
        if not data:
            self._closed()
            return
        if self.status is None:
            self._fed += len(data)
        if self._deferred:
            if self._fed > MAX_HEAD:
                raise ProtocolFailure(f"response head over {MAX_HEAD} bytes")
            self._held += data
            self._reread_when_whole()
            return
        self._progressed = False
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._switched = True
        except httptools.HttpParserError as exc:
            if self._failure == _READ_AGAIN:
                self._read_again(data)
                return
            if self.status is None and not self._reread and "Content-Length" in str(exc):
                # Read again as browsers read it (see ``_read_again``), once its head
                # is whole; a second failure is the answer's.
                self._held = bytearray(b"".join(self._early))
                self._held += data
                self._early = []
                self._deferred = True
                self._reread_when_whole()
                return
            if self._failure is not None:
                raise ProtocolFailure(self._failure) from None
            if self._switched:
                pass  # llhttp pauses there, its error says only that
            elif not self.complete:
                raise ProtocolFailure(f"malformed response: {exc}") from None
            self.reusable = False  # the answer is whole; what followed it is not HTTP
        if self._switched:
            raise ProtocolFailure("the server switched protocols unasked")
        if self.status is None:
            if self._fed > MAX_HEAD:
                raise ProtocolFailure(f"response head over {MAX_HEAD} bytes")
            self._early.append(bytes(data))
        elif self._early:
            self._early = []
        # httptools holds a header line (a trailer's too) until it ends: a line that
        # does not end, or a chunk-size line that does not, is bounded here.
        self._stalled = 0 if self._progressed else self._stalled + len(data)
        if self._stalled > MAX_HEAD:
            raise ProtocolFailure(f"a line of the response over {MAX_HEAD} bytes")

    def _reread_when_whole(self) -> None:
        """Read the head again (``_read_again``) if it has all come, each byte searched
        once: joined and searched whole at each feed, a head trickled a byte at a time
        cost time in its length squared (a review)."""
        held = self._held
        while (end := _HEAD_END.search(held, self._searched)) is not None:
            if not _INFORMATIONAL.match(held, self._head_start):
                self._read_again(bytes(held))
                return
            self._head_start = self._searched = end.end()
        # A blank line may be cut: its first bytes are looked at again.
        self._searched = max(self._head_start, len(held) - 3)

    def _read_again(self, data: bytes | bytearray) -> None:
        """Read the response afresh, as RFC 9110 and browsers read its head: its
        Transfer-Encoding lines without trailing whitespace (llhttp takes "chunked"
        followed by a tab for a coding of another name) and without "identity" (no
        coding: the body is framed by its Content-Length), and Content-Length given
        twice, or as a list, with one value (llhttp refuses "5" twice, or "5, 5",
        which RFC 9110 8.6 lets a recipient read as 5, as browsers do)."""
        raw = b"".join(self._early) + bytes(data)
        if (head := _final_head(raw)) is not None:
            start, end = head
            rewritten = _TE_IDENTITY.sub(b"", _te_trimmed(raw[start:end]))
            raw = raw[:start] + _one_length(rewritten) + raw[end:]
        ResponseReader.__init__(self, head_only=self._head_only)
        self._reread = True
        self.feed(raw)

    def take_body(self) -> bytes:
        """The body's bytes read since the last call."""
        body = self._body
        if not body:
            return b""
        self._body = []
        return b"".join(body)  # one piece is returned as it is, not copied

    def _closed(self) -> None:
        if self.status is None:
            raise ProtocolFailure("the server closed the connection without answering")
        if not self._ended_by_close:
            raise ProtocolFailure("the server closed the connection before the body's end")
        self.complete = True

    # -- httptools' callbacks -------------------------------------------------
    def on_message_begin(self) -> None:
        if self.complete:
            self.reusable = False  # a second answer to one request
            return
        self._reason = b""
        self.headers = []

    def on_status(self, reason: bytes) -> None:
        if not self.complete:
            self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self._progressed = True
        if self.status is None:
            # llhttp, lenient, takes "Content-Length : 10" and frames the body by it:
            # the name without the space is what it read, and what is looked at here.
            self.headers.append((name.rstrip(b" \t"), value))
        elif not self.complete:
            # A trailer (after a chunked body): not kept, but bounded as a head is.
            self._trailers += len(name) + len(value) + 4
            if self._trailers > MAX_HEAD:
                self._failure = f"trailers over {MAX_HEAD} bytes"
                raise _Stop

    def on_chunk_header(self) -> None:
        self._progressed = True

    def on_chunk_complete(self) -> None:
        self._progressed = True

    def on_headers_complete(self) -> None:
        self._progressed = True
        if self.complete:
            return
        parser = self._parser
        status = parser.get_status_code()
        if status == 101:
            self._switched = True  # found after the feed: raised here, httptools would wrap it
            return
        if status < 100:
            # No such status (RFC 9110 §15: three digits, 1xx to 5xx): read as a 1xx,
            # its body was glued to the next answer's and its links followed (QA).
            self._failure = f"invalid status {status:03d}"
            raise _Stop
        if status < 200:
            return  # informational (100, 103): the answer follows
        self.status = status
        self.reason = self._reason.decode("latin-1")
        self.version = "HTTP/" + parser.get_http_version()
        if self._head_only:
            # llhttp cannot be told the request was a HEAD: it would wait for the
            # body the headers describe. The head is the answer; the connection is
            # not reused, since what is left on it is unknown.
            self.complete = True
            return
        chunked = length = False
        for name, value in self.headers:
            lower = name.lower()
            if lower == b"content-length":
                length = True
            elif lower == b"transfer-encoding":
                if value.strip(b" \t").lower() == b"identity" and not self._reread:
                    self._failure = _READ_AGAIN
                    raise _Stop
                chunked = value.rstrip(b" \t").lower().endswith(b"chunked")
                codings = {c.strip(b" \t").lower() for c in value.split(b",")}
                if other := codings - {b"chunked", b"identity", b""}:
                    # Asked for none (no TE sent): "gzip, chunked" was kept as the
                    # page, its gzip bytes and all (QA).
                    self._failure = f"transfer coding {min(other)!r} not asked for"
                    raise _Stop
                # llhttp drops trailing spaces, not tabs: it read another coding.
                if chunked and not self._reread and not value.rstrip(b" ").endswith(b"chunked"):
                    self._failure = _READ_AGAIN
                    raise _Stop
        self._ended_by_close = not (chunked or length or status in _NO_BODY)
        self._doubtful = chunked and length

    def on_body(self, data: bytes) -> None:
        self._progressed = True
        if not self.complete:
            self._body.append(data)

    def on_message_complete(self) -> None:
        self._progressed = True
        if self.status is None or self.complete:
            return  # an informational answer's end, or a HEAD's body
        self.complete = True
        self.reusable = self._parser.should_keep_alive() and not self._doubtful


def _te_trimmed(head: bytes) -> bytes:
    """``head`` with its Transfer-Encoding lines' trailing whitespace cut (RFC 9110's
    OWS, spaces and tabs, is not the value's). A line at a time: the regular expression
    that did it took time in the square of a line of blanks (10 s for 40,000 spaces, a
    head may hold 256 KiB), the peer's loop frozen meanwhile (found by a review)."""
    lines = head.split(b"\n")
    for i, line in enumerate(lines):
        if line[:17].lower() == b"transfer-encoding":
            cr = line.endswith(b"\r")
            lines[i] = line[: -1 if cr else None].rstrip(b" \t") + (b"\r" if cr else b"")
    return b"\n".join(lines)
