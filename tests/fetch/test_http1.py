"""The transport's HTTP/1.1 without I/O: request heads written and checked, responses
read from their bytes, each fed whole and one byte at a time (a server's answer comes
cut wherever the network cuts it)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from ubipy.fetch import http1
from ubipy.fetch.http1 import MAX_HEAD, BadRequest, ProtocolFailure, ResponseReader, request_head

HEAD = b'HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nETag: "a1"\r\n'


@dataclass
class Read:
    status: int | None
    reason: str
    version: str
    headers: list[tuple[bytes, bytes]]
    body: bytes
    complete: bool
    reusable: bool


def read(data: bytes, *, whole: bool, close: bool = False, head_only: bool = False) -> Read:
    reader = ResponseReader(head_only=head_only)
    body = b""
    for piece in [data] if whole else [data[i : i + 1] for i in range(len(data))]:
        reader.feed(piece)
        body += reader.take_body()
    if close:
        reader.feed(b"")
        body += reader.take_body()
    return Read(
        reader.status,
        reader.reason,
        reader.version,
        reader.headers,
        body,
        reader.complete,
        reader.reusable,
    )


both = pytest.mark.parametrize("whole", [True, False], ids=["whole", "bytewise"])


@both
def test_a_response_with_a_length_is_read_and_its_connection_kept(whole: bool) -> None:
    got = read(HEAD + b"Content-Length: 5\r\n\r\nhello", whole=whole)
    assert (got.status, got.reason, got.version) == (200, "OK", "HTTP/1.1")
    # Header names as the server sent them, in order: the WARC record keeps them so.
    assert got.headers == [
        (b"Content-Type", b"text/html"),
        (b"ETag", b'"a1"'),
        (b"Content-Length", b"5"),
    ]
    assert (got.body, got.complete, got.reusable) == (b"hello", True, True)


@both
def test_a_chunked_body_comes_out_unframed(whole: bool) -> None:
    data = HEAD + b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n"
    got = read(data, whole=whole)
    assert (got.body, got.complete, got.reusable) == (b"abcde", True, True)


@both
@pytest.mark.parametrize(
    "lengths", [b"Content-Length: 5\r\nContent-Length: 5\r\n", b"Content-Length: 5, 5\r\n"]
)
def test_one_length_given_twice_is_read_as_browsers_read_it(whole: bool, lengths: bytes) -> None:
    # RFC 9110 8.6: identical values may be taken as one; llhttp refused them, and
    # the page was lost after its retries (a review found).
    got = read(HEAD + lengths + b"\r\nhello", whole=whole)
    assert (got.status, got.body, got.complete) == (200, b"hello", True)


class _Counting:
    """A regex's search, counting the bytes it is given to look at."""

    def __init__(self, pattern: re.Pattern[bytes]) -> None:
        self.pattern = pattern
        self.looked_at = 0

    def search(self, data: bytes | bytearray, pos: int = 0) -> re.Match[bytes] | None:
        self.looked_at += len(data) - pos
        return self.pattern.search(data, pos)


def test_a_head_read_again_trickled_is_searched_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # Its length twice defers its reading until the head has come: each byte fed
    # joined and searched it all again (a 256 KiB head trickled cost its length
    # squared: 32 GB looked at). An informational head before it, and headers to fill.
    counting = _Counting(http1._HEAD_END)
    monkeypatch.setattr(http1, "_HEAD_END", counting)
    filler = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"y" * 40) for i in range(300))
    data = b"HTTP/1.1 100 Continue\r\n\r\n" + HEAD + b"Content-Length: 5\r\n" * 2
    data += filler + b"\r\nhello"
    got = read(data, whole=False)
    assert (got.status, got.body, got.complete) == (200, b"hello", True)
    assert counting.looked_at < 8 * len(data)  # a few bytes a feed; 16,800 times it before


@both
def test_transfer_encoding_identity_leaves_the_length_to_frame_the_body(whole: bool) -> None:
    # llhttp read such a body to the close where the reader thought the length
    # framed it: the answer failed at the close, or waited for the read time-out.
    data = HEAD + b"Transfer-Encoding: identity\r\nContent-Length: 5\r\n\r\nhello"
    got = read(data, whole=whole)
    assert (got.status, got.body, got.complete, got.reusable) == (200, b"hello", True, True)


@both
def test_lengths_that_differ_are_refused(whole: bool) -> None:
    lengths = b"Content-Length: 5\r\nContent-Length: 6\r\n"
    with pytest.raises(ProtocolFailure, match="Content-Length"):
        read(HEAD + lengths + b"\r\nhello!", whole=whole)


@both
def test_chunk_sizes_padded_with_spaces_are_read(whole: bool) -> None:
    # Some servers pad sizes to a fixed width ("a      "); Chrome reads them. They
    # were refused: "Invalid character in chunk size".
    data = HEAD + b"Transfer-Encoding: chunked\r\n\r\n3   \r\nabc\r\n2\t\r\nde\r\n0  \r\n\r\n"
    got = read(data, whole=whole)
    assert (got.body, got.complete) == (b"abcde", True)


@both
@pytest.mark.parametrize("ows", [b"\t", b" \t ", b"\t\t"])
def test_chunked_with_a_trailing_tab_is_chunked(whole: bool, ows: bytes) -> None:
    # RFC 9110's OWS after a value is not part of it; browsers read such a body as
    # chunked, llhttp alone takes the name with its tab for another coding. The body's
    # own bytes, a line like the header's among them, are not touched.
    chunk = b"Transfer-Encoding: chunked\t\r\n"
    data = (
        b"HTTP/1.1 100 Continue\r\nTransfer-Encoding: chunked\t\r\n\r\n"
        + HEAD
        + b"Transfer-Encoding: chunked"
        + ows
        + b"\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(chunk), chunk)
    )
    got = read(data, whole=whole)
    assert (got.status, got.body, got.complete, got.reusable) == (200, chunk, True, True)
    assert got.headers[-1] == (b"Transfer-Encoding", b"chunked")


def test_a_transfer_encoding_line_of_blanks_is_read_in_a_pass() -> None:
    """A head read again (a length given twice) had its Transfer-Encoding lines' trailing
    blanks cut by a regular expression whose time grew with the square of a line of
    blanks: 40,000 spaces took 10 s, and a 256 KiB head minutes, the peer's loop frozen
    (found by a review). This one (200,000 blanks) took about 4 minutes."""
    data = (
        HEAD
        + b"Content-Length: 5\r\nContent-Length: 5\r\nTransfer-Encoding:"
        + b" " * 200_000
        + b"identity \t\r\n\r\nhello"
    )
    got = read(data, whole=True)
    assert (got.status, got.body, got.complete) == (200, b"hello", True)


@both
def test_informational_answers_are_skipped(whole: bool) -> None:
    data = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
    got = read(data + HEAD + b"Content-Length: 2\r\n\r\nok", whole=whole)
    assert (got.status, got.body, got.reusable) == (200, b"ok", True)
    assert (b"Link", b"</a>") not in got.headers


@both
@pytest.mark.parametrize("status", [b"000", b"042", b"099"])
def test_a_status_under_100_is_a_protocol_failure(whole: bool, status: bytes) -> None:
    # Read as a 1xx, its body was glued to the next answer's, its links followed (QA).
    junk = b'HTTP/1.1 %s Zero\r\nContent-Length: 25\r\n\r\n<a href="/injected">x</a>' % status
    with pytest.raises(ProtocolFailure, match=f"invalid status {status.decode()}"):
        read(junk + HEAD + b"Content-Length: 2\r\n\r\nok", whole=whole)


@both
@pytest.mark.parametrize("te", [b"gzip, chunked", b"deflate", b"chunked, x-weird"])
def test_a_transfer_coding_not_asked_for_is_a_protocol_failure(whole: bool, te: bytes) -> None:
    # "gzip, chunked" was kept as the page, its gzip bytes and all (QA).
    data = HEAD + b"Transfer-Encoding: " + te + b"\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    with pytest.raises(ProtocolFailure, match="not asked for"):
        read(data, whole=whole)


@both
def test_a_body_without_a_length_ends_with_the_connection(whole: bool) -> None:
    got = read(HEAD + b"\r\nto the end", whole=whole)
    assert (got.body, got.complete) == (b"to the end", False)
    got = read(HEAD + b"\r\nto the end", whole=whole, close=True)
    assert (got.body, got.complete, got.reusable) == (b"to the end", True, False)


@both
def test_connection_close_and_http_1_0_are_not_kept(whole: bool) -> None:
    got = read(HEAD + b"Connection: close\r\nContent-Length: 1\r\n\r\nx", whole=whole)
    assert (got.complete, got.reusable) == (True, False)
    got = read(b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", whole=whole)
    assert (got.version, got.complete, got.reusable) == ("HTTP/1.0", True, False)


@both
def test_no_body_for_a_304_or_a_head(whole: bool) -> None:
    got = read(b'HTTP/1.1 304 Not Modified\r\nETag: "a1"\r\n\r\n', whole=whole)
    assert (got.status, got.body, got.complete, got.reusable) == (304, b"", True, True)
    got = read(HEAD + b"Content-Length: 500\r\n\r\n", whole=whole, head_only=True)
    # What is left on the connection after a HEAD's answer is unknown: not reused.
    assert (got.status, got.body, got.complete, got.reusable) == (200, b"", True, False)


@both
def test_bytes_past_the_answer_keep_the_answer_but_not_the_connection(whole: bool) -> None:
    for extra in [b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", b"\x00garbage\r\n\r\n"]:
        got = read(HEAD + b"Content-Length: 2\r\n\r\nok" + extra, whole=whole)
        assert (got.status, got.body, got.complete, got.reusable) == (200, b"ok", True, False)


@both
def test_sloppy_answers_are_read_as_browsers_read_them(whole: bool) -> None:
    got = read(b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok", whole=whole)
    assert (got.status, got.body, got.complete) == (200, b"ok", True)
    got = read(b"HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok", whole=whole)
    assert (got.version, got.body, got.complete, got.reusable) == ("HTTP/1.2", b"ok", True, True)
    # Transfer-Encoding wins over Content-Length; the connection is not trusted after.
    data = HEAD + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n"
    got = read(data, whole=whole)
    assert (got.body, got.complete, got.reusable) == (b"ok", True, False)


@pytest.mark.parametrize(
    ("data", "close", "why"),
    [
        (b"", True, "without answering"),
        (b"HTTP/1.1 200 OK\r\nContent-Le", True, "without answering"),
        (HEAD + b"Content-Length: 9\r\n\r\nshort", True, "before the body's end"),
        (HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nab", True, "before the body's end"),
        # A space before the colon: llhttp frames the body by it all the same, and a
        # body cut short was taken for one ended by the close (found by a review).
        (HEAD + b"Content-Length : 9\r\n\r\nshort", True, "before the body's end"),
        (HEAD + b"Transfer-Encoding : chunked\r\n\r\n5\r\nab", True, "before the body's end"),
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", False, "malformed"),
        (b"HTTP/1.1 2000 OK\r\n\r\n", False, "malformed"),
        (HEAD + b"Content-Length: 1\r\nContent-Length: 2\r\n\r\nxy", False, "malformed"),
        (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n", False, "switched"),
    ],
)
@both
def test_what_cannot_be_read_is_the_servers_failure(
    data: bytes, close: bool, why: str, whole: bool
) -> None:
    with pytest.raises(ProtocolFailure, match=why):
        read(data, whole=whole, close=close)


def test_a_head_is_bounded_whatever_the_pieces() -> None:
    reader = ResponseReader()
    reader.feed(b"HTTP/1.1 200 OK\r\n")
    with pytest.raises(ProtocolFailure, match="head over"):
        for _ in range(MAX_HEAD // 1000 + 1):
            reader.feed(b"X-Filler: " + b"y" * 988 + b"\r\n")


@both
def test_trailers_are_read_past_and_not_kept(whole: bool) -> None:
    data = HEAD + b"Transfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Sum: 1\r\n\r\n"
    got = read(data, whole=whole)
    assert (got.body, got.complete, got.reusable) == (b"ok", True, True)
    assert (b"X-Sum", b"1") not in got.headers


@pytest.mark.parametrize(
    ("start", "endless", "why"),
    [
        # Trailer lines without end: each is dropped, but all of them are counted.
        (b"2\r\nok\r\n0\r\n", b"X-T: " + b"t" * 90 + b"\r\n", "trailers over"),
        # One trailer, or one chunk-size line, that never ends.
        (b"2\r\nok\r\n0\r\n", b"X-T: " + b"t" * 95, "a line of the response over"),
        (b"5;ext=", b"e" * 100, "a line of the response over"),
    ],
)
def test_what_follows_a_chunked_body_is_bounded(start: bytes, endless: bytes, why: str) -> None:
    reader = ResponseReader()
    reader.feed(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + start)
    with pytest.raises(ProtocolFailure, match=why):
        for _ in range(3 * MAX_HEAD // 100):
            reader.feed(endless)
    assert reader.take_body() == (b"ok" if start.startswith(b"2") else b"")


def test_a_request_head_is_written_as_given() -> None:
    head = request_head("GET", b"/a?b=c", [(b"Host", b"h.test"), (b"Accept", b"*/*")])
    assert head == b"GET /a?b=c HTTP/1.1\r\nHost: h.test\r\nAccept: */*\r\n\r\n"


@pytest.mark.parametrize(
    ("method", "target", "header"),
    [
        ("GET", b"/a", (b"X-Evil", b"1\r\nX-Injected: 2")),
        ("GET", b"/a", (b"X-Evil", b"1\nX-Injected: 2")),
        ("GET", b"/a", (b"X-Evil", b"nul\x00")),
        ("GET", b"/a", (b"Bad Name", b"1")),
        ("GET", b"/a b", (b"Host", b"h.test")),
        ("GET", b"/a\r\nX: y", (b"Host", b"h.test")),
        ("G T", b"/a", (b"Host", b"h.test")),
    ],
)
def test_a_request_that_would_write_lines_of_its_own_is_refused(
    method: str, target: bytes, header: tuple[bytes, bytes]
) -> None:
    with pytest.raises(BadRequest):
        request_head(method, target, [header])
