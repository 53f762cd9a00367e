"""The transport's response reader fed what any server may send: well-formed answers
damaged, and bytes that are not HTTP at all, cut wherever the network cuts them.
Whatever arrives, the reader either reads an answer or says the server failed
(:class:`ProtocolFailure`, nothing else), reads the same answer however the bytes are
cut, and hands over a status and version only when they are HTTP's."""

from __future__ import annotations

import itertools
import re

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.common import fuzz, mutated_bytes
from ubipy.fetch.http1 import ProtocolFailure, ResponseReader

_HEADS = [
    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"HTTP/1.0 404 Not Found\r\nContent-Type: text/html\r\n\r\n<p>gone",
    b'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n',
    b"HTTP/1.1 301 Moved\nLocation: /b\nContent-Length: 0\n\n",
]

_answers = st.sampled_from(_HEADS).flatmap(lambda b: st.just(b) | mutated_bytes(b)) | st.binary(
    max_size=300
)


def _outcome(data: bytes, cuts: list[int], close: bool) -> tuple[object, ...]:
    reader = ResponseReader()
    body = b""
    bounds = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    try:
        for start, end in itertools.pairwise(bounds):
            reader.feed(data[start:end])
            body += reader.take_body()
        if close:
            reader.feed(b"")
            body += reader.take_body()
    except ProtocolFailure:
        return ("failed",)
    if reader.status is not None:
        assert 200 <= reader.status <= 999 and re.fullmatch(r"HTTP/[0-9]\.[0-9]", reader.version)
    assert not reader.reusable or reader.complete
    return (reader.status, reader.headers, body, reader.complete, reader.reusable)


@fuzz(200)
@given(
    data=_answers,
    cuts=st.lists(st.integers(0, 400), max_size=8),
    close=st.booleans(),
)
def test_any_bytes_read_the_same_however_they_are_cut(
    data: bytes, cuts: list[int], close: bool
) -> None:
    assert _outcome(data, cuts, close) == _outcome(data, [], close)
