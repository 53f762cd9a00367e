"""The fetcher against content codings: what it asks for, and what servers send
anyway (found by a review: a br body killed the peer)."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import AsyncIterator, Iterator

import httpx2
import pytest
import trio
import trio.testing

from tests.fetch.test_transport import Server, _read_head
from ubipy.config import FetchConfig
from ubipy.fetch import coding
from ubipy.fetch.client import make_client
from ubipy.fetch.fetcher import FetchOutcome, fetch
from ubipy.fetch.retry import is_retryable


class _Pieces(httpx2.AsyncByteStream):
    """A body that arrives in pieces, as from a socket (not read in advance, so the
    fetcher decodes it, not httpx2's Response)."""

    def __init__(self, *pieces: bytes) -> None:
        self.pieces = pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece


def _coded(coding: str, *pieces: bytes, status: int = 200) -> httpx2.MockTransport:
    headers = [("Content-Type", "text/html"), ("Content-Encoding", coding)]
    return httpx2.MockTransport(
        lambda _: httpx2.Response(status, headers=headers, stream=_Pieces(*pieces))
    )


def _client(transport: httpx2.AsyncBaseTransport) -> httpx2.AsyncClient:
    return make_client(FetchConfig(), "ubipy/test", transport=transport)


async def test_only_the_codings_ubipy_decodes_are_asked_for() -> None:
    seen: list[str | None] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.headers.get("accept-encoding"))
        return httpx2.Response(200, content=b"x")

    async with _client(httpx2.MockTransport(handler)) as client:
        await fetch(client, "http://a.test/", max_bytes=100)
        await fetch(client, "http://a.test/p%20q", max_bytes=100)  # httpx2's way
    # Before: httpx2's default, "gzip, deflate, br, zstd" as far as modules were found.
    assert seen == ["gzip, deflate", "gzip, deflate"]


async def test_a_body_in_a_coding_not_asked_for_is_an_error_not_retried() -> None:
    # Served anyway: in the dev venv httpx2's brotli decoder met brotlipy's module and
    # raised TypeError out of fetch(), which killed the worker and the peer.
    async with _client(_coded("br", b"\x1b\x0e\x00\xf8\xa5@\x02", b"<html>")) as client:
        r = await fetch(client, "http://a.test/", max_bytes=1000)
    # The server would send it so again: no use asking again (it was retried).
    assert r.outcome is FetchOutcome.UNSUPPORTED and not is_retryable(r) and r.body == b""
    assert r.detail is not None and "br" in r.detail


async def test_cancelling_a_coded_read_is_not_a_decoding_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Stalled(httpx2.AsyncByteStream):
        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield b"\x1f\x8b"
            await trio.sleep_forever()

    headers = [("Content-Encoding", "gzip")]
    transport = httpx2.MockTransport(
        lambda _: httpx2.Response(200, headers=headers, stream=Stalled())
    )
    async with _client(transport) as client:
        with trio.move_on_after(5) as scope:
            await fetch(client, "http://a.test/", max_bytes=1000)
    assert scope.cancelled_caught  # the crawler's fetch deadline still ends it


class _Counted(httpx2.AsyncByteStream):
    """``first``, then ``more`` piece after piece, counting what was taken."""

    def __init__(self, first: bytes, more: bytes, times: int) -> None:
        self.first, self.more, self.times = first, more, times
        self.taken = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self.taken += 1
        yield self.first
        for _ in range(self.times):
            self.taken += 1
            yield self.more


@pytest.mark.parametrize("coding", ["gzip", "deflate"])
async def test_junk_after_the_coded_stream_is_not_read_on(coding: str) -> None:
    # The review's server: a small gzip member, then junk as fast as it could send;
    # 90 MB were read in 30 s (212 MB of memory, CPU growing with the square of it)
    # until the fetch deadline. The body ends where its coded stream does.
    page = b"<html>hi</html>"
    coded = gzip.compress(page) if coding == "gzip" else zlib.compress(page)
    body = _Counted(coded, b"x" * 65536, 200)
    transport = httpx2.MockTransport(
        lambda _: httpx2.Response(200, headers={"Content-Encoding": coding}, stream=body)
    )
    async with _client(transport) as client:
        r = await fetch(client, "http://a.test/", max_bytes=1_000_000)
    assert r.ok and (r.body, r.truncated) == (page, False)
    assert body.taken <= 2  # a little is read on, for the framing's end


async def test_a_coded_stream_that_never_ends_is_capped_by_its_coded_bytes() -> None:
    # Empty stored blocks, endlessly: nothing decoded for the cap to stop.
    z = zlib.compressobj(wbits=-15)
    start = z.compress(b"<html>hi</html>") + z.flush(zlib.Z_SYNC_FLUSH)
    empty = b"\x00\x00\x00\xff\xff" * 13_000
    body = _Counted(start, empty, 200)
    transport = httpx2.MockTransport(
        lambda _: httpx2.Response(200, headers={"Content-Encoding": "deflate"}, stream=body)
    )
    async with _client(transport) as client:
        r = await fetch(client, "http://a.test/", max_bytes=100_000)
    assert r.ok and r.body == b"<html>hi</html>" and r.truncated
    assert body.taken <= 3  # 100 KB of coded bytes and a piece, not 13 MB


async def test_codings_inside_codings_pass_each_other_no_more_than_the_cap() -> None:
    """ "deflate, gzip, gzip" over empty stored blocks: 5 KB read pushed 1 GB through
    the inner decoder, nothing of it decoded for the cap to stop, seconds of the peer's
    loop (found by a review). Each coding passes the next at most the body's cap."""
    z = zlib.compressobj(wbits=-15)
    inner = z.compress(b"<html>hi</html>") + z.flush(zlib.Z_SYNC_FLUSH)
    inner += b"\x00\x00\x00\xff\xff" * 2_000_000  # 10 MB that decode to nothing
    coded = gzip.compress(gzip.compress(inner, 9), 9)
    assert len(coded) < 20_000
    taken: dict[int, int] = {}  # bytes into each decoder, by its place
    pipe = coding._Inflate.pipe

    def counted(self: coding._Inflate, pieces: Iterator[bytes]) -> Iterator[bytes]:
        def counting() -> Iterator[bytes]:
            for piece in pieces:
                taken[id(self)] = taken.get(id(self), 0) + len(piece)
                yield piece

        return pipe(self, counting())

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(coding._Inflate, "pipe", counted)
        async with _client(_coded("deflate, gzip, gzip", coded)) as client:
            r = await fetch(client, "http://a.test/", max_bytes=100_000)
    assert r.ok and r.body == b"<html>hi</html>" and r.truncated
    handed = list(taken.values())[1:]  # the outer one takes what is read
    assert sum(handed) <= 2 * (100_000 + 256 * 1024)  # each hand-over cut at the cap


async def test_a_coded_answer_whose_framing_ends_later_keeps_its_connection(
    nursery: trio.Nursery,
) -> None:
    # The gzip member ends before the chunked body's last chunk comes: reading on to
    # it lets the connection serve the next request.
    page = b"<html>" + b"x" * 5000 + b"</html>"
    coded = gzip.compress(page)

    async def chunked(stream: trio.SocketStream, _: int) -> None:
        while await _read_head(stream):
            head = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"
            await stream.send_all(head + b"\r\n%x\r\n%s\r\n" % (len(coded), coded))
            await trio.testing.wait_all_tasks_blocked()  # the client waits for more
            await stream.send_all(b"0\r\n\r\n")

    server = Server(chunked)
    await nursery.start(server.serve)
    async with make_client(FetchConfig(), "ubipy/test") as client:
        for _ in range(3):
            r = await fetch(client, f"http://127.0.0.1:{server.port}/", max_bytes=100_000)
            assert r.ok and r.body == page
    assert server.connections == 1


def _raw_deflate(data: bytes) -> bytes:
    z = zlib.compressobj(wbits=-15)
    return z.compress(data) + z.flush()


_PAGE = b"<title>t</title>" + bytes(range(256)) * 40


@pytest.mark.parametrize(
    ("coding", "wire"),
    [
        ("gzip", gzip.compress(_PAGE)),
        ("X-Gzip", gzip.compress(_PAGE)),  # RFC 9110: read as gzip
        ("deflate", zlib.compress(_PAGE)),  # zlib's format, as RFC 9110 says
        ("deflate", _raw_deflate(_PAGE)),  # the raw one, as some servers send
        ("gzip, identity, gzip", gzip.compress(gzip.compress(_PAGE))),
        ("identity", _PAGE),
    ],
)
@pytest.mark.parametrize("size", [1, 7, 1 << 20], ids=["bytewise", "small", "whole"])
async def test_codings_are_decoded_whatever_pieces_they_come_in(
    coding: str, wire: bytes, size: int
) -> None:
    pieces = [wire[i : i + size] for i in range(0, len(wire), size)]
    async with _client(_coded(coding, *pieces)) as client:
        whole = await fetch(client, "http://a.test/", max_bytes=100_000)
        cut = await fetch(client, "http://a.test/", max_bytes=1000)
    assert whole.ok and (whole.body, whole.truncated) == (_PAGE, False)
    assert cut.ok and (cut.body, cut.truncated) == (_PAGE[:1000], True)


@pytest.mark.parametrize(
    ("coding", "wire"),
    [
        ("gzip", gzip.compress(_PAGE)),
        ("deflate", zlib.compress(_PAGE)),
        ("deflate", _raw_deflate(_PAGE)),
        ("gzip, gzip", gzip.compress(gzip.compress(_PAGE))),
    ],
)
async def test_a_coded_body_cut_short_is_an_error_not_a_page(coding: str, wire: bytes) -> None:
    # A close-delimited body ends where the connection does: only the coded stream
    # says it was cut. Before, its decoded half was stored as the whole page.
    half = wire[: len(wire) // 2]
    async with _client(_coded(coding, half)) as client:
        r = await fetch(client, "http://a.test/", max_bytes=100_000)
        # Cut by the cap before its end: a long page, kept in part as ever.
        capped = await fetch(client, "http://a.test/", max_bytes=100)
    assert r.outcome is FetchOutcome.PROTOCOL_ERROR and r.body == b""
    assert r.detail is not None and "cut short" in r.detail
    assert capped.ok and capped.truncated and capped.body == _PAGE[:100]


def _gzip_with_header(page: bytes, flags: int, fields: bytes) -> bytes:
    """A gzip member whose header has these flags and optional fields."""
    plain = gzip.compress(page, mtime=0)
    return plain[:3] + bytes([flags]) + plain[4:10] + fields + plain[10:]


@pytest.mark.parametrize(
    "wire",
    [
        gzip.compress(_PAGE)[:-8] + b"\0" * 8,  # a CRC and length that are wrong
        gzip.compress(_PAGE)[:-8],  # no footer: the connection closed after the stream
        gzip.compress(_PAGE)[:-3],  # a footer cut off
        # A header with an extra field, a file name, a comment and a header CRC.
        _gzip_with_header(_PAGE, 2 | 4 | 8 | 16, b"\x03\0abcpage.html\0a comment\0\x12\x34"),
    ],
    ids=["bad footer", "no footer", "footer cut", "every header field"],
)
@pytest.mark.parametrize("size", [1, 1 << 20], ids=["bytewise", "whole"])
async def test_a_gzip_body_is_read_as_browsers_read_it(wire: bytes, size: int) -> None:
    # Browsers show these pages; zlib's gzip reader made each a protocol error, asked
    # again and in the end lost.
    pieces = [wire[i : i + size] for i in range(0, len(wire), size)]
    async with _client(_coded("gzip", *pieces)) as client:
        r = await fetch(client, "http://a.test/", max_bytes=100_000)
    assert r.ok and (r.body, r.truncated) == (_PAGE, False)


@pytest.mark.parametrize(
    ("wire", "why"),
    [
        (b"<html>not gzip at all</html>", "no gzip header"),
        (b"\x1f\x8b\x07" + bytes(20), "unknown method"),
        (b"\x1f\x8b\x08\x20" + bytes(20), "unknown method or flags"),
        (b"\x1f\x8b\x08\x08" + bytes(6) + b"x" * 70_000, "header over"),
    ],
    ids=["plain", "method", "reserved flag", "endless name"],
)
async def test_a_body_that_is_no_gzip_is_a_protocol_error(wire: bytes, why: str) -> None:
    async with _client(_coded("gzip", wire)) as client:
        r = await fetch(client, "http://a.test/", max_bytes=100_000)
    assert r.outcome is FetchOutcome.PROTOCOL_ERROR and r.body == b""
    assert r.detail is not None and why in r.detail


@pytest.mark.parametrize("status", [200, 204, 301, 304])
async def test_an_empty_coded_body_is_empty_not_cut(status: int) -> None:
    async with _client(_coded("gzip", status=status)) as client:
        r = await fetch(client, "http://a.test/", max_bytes=1000)
    assert r.ok and r.status == status and r.body == b""


async def test_a_close_delimited_gzip_body_cut_mid_stream_is_retried(
    nursery: trio.Nursery,
) -> None:
    # The review's server: no Content-Length, half the gzip member, then the close.
    page = b"<html><body>" + bytes(range(256)) * 80 + b"<a href=/last>l</a></body></html>"
    coded = gzip.compress(page)

    async def cut(stream: trio.SocketStream, _: int) -> None:
        await _read_head(stream)
        head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\n\r\n"
        await stream.send_all(head + coded[: len(coded) // 2])

    server = Server(cut)
    await nursery.start(server.serve)
    async with make_client(FetchConfig(), "ubipy/test") as client:
        r = await fetch(client, f"http://127.0.0.1:{server.port}/", max_bytes=100_000)
    assert r.outcome is FetchOutcome.PROTOCOL_ERROR and is_retryable(r)


@pytest.mark.parametrize(
    ("coding", "named"),
    [
        ("compress", "compress"),
        ("x-compress", "x-compress"),
        ("gzip, compress", "compress"),
        ("gzip, " * 5 + "gzip", "more than 5"),
    ],
)
@pytest.mark.parametrize("read", [False, True], ids=["streamed", "read already"])
async def test_a_body_in_a_coding_not_decoded_here_is_an_error_not_a_page(
    coding: str, named: str, read: bool
) -> None:
    # Before: httpx2 passed the coded bytes on, and they were stored as the page.
    wire = gzip.compress(b"<html><a href=/x>x</a></html>")
    headers = [("Content-Type", "text/html"), ("Content-Encoding", coding)]
    body = {"content": wire} if read else {"stream": _Pieces(wire)}

    def handler(_: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers=headers, **body)

    async with _client(httpx2.MockTransport(handler)) as client:
        r = await fetch(client, "http://a.test/", max_bytes=100_000)
    if read and named == "more than 5":  # httpx2 refuses them itself as it reads
        assert r.outcome is FetchOutcome.PROTOCOL_ERROR and r.body == b""
        return
    assert r.outcome is FetchOutcome.UNSUPPORTED and not is_retryable(r) and r.body == b""
    assert r.detail is not None and named in r.detail


@pytest.mark.parametrize("coding", ["utf-8", "UTF-8", "none", "binary", "text", "x-foo"])
@pytest.mark.parametrize("coded", [False, True], ids=["plain", "gzip too"])
async def test_a_name_that_is_no_content_coding_is_read_as_no_coding(
    coding: str, coded: bool
) -> None:
    """Misconfigured servers put a charset or a word there (PHP sites send utf-8): it
    codes nothing, as browsers and httpx2 read it. It was refused for a while, and the
    page lost after its retries (found by a review)."""
    page = b"<html><a href=/x>x</a></html>"
    header = f"gzip, {coding}" if coded else coding
    wire = gzip.compress(page) if coded else page
    headers = [("Content-Type", "text/html"), ("Content-Encoding", header)]

    def handler(_: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers=headers, stream=_Pieces(wire))

    async with _client(httpx2.MockTransport(handler)) as client:
        r = await fetch(client, "http://a.test/", max_bytes=100_000)
    assert r.ok and r.body == page


async def test_a_redirect_in_a_coding_not_decoded_here_is_still_a_redirect() -> None:
    # No body, nothing to decode: the Location is what counts.
    headers = [("Location", "/elsewhere"), ("Content-Encoding", "compress")]
    transport = httpx2.MockTransport(lambda _: httpx2.Response(301, headers=headers))
    async with _client(transport) as client:
        r = await fetch(client, "http://a.test/", max_bytes=1000)
    assert r.ok and r.is_redirect and r.location == "/elsewhere"


async def test_whatever_a_decoder_raises_is_the_pages_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As brotlipy's TypeError was: not an exception out of fetch().
    def broken(self: object, data: bytes) -> Iterator[bytes]:
        raise TypeError("unexpected keyword argument")
        yield b""

    monkeypatch.setattr(coding._Inflate, "_inflate", broken)
    async with _client(_coded("gzip", gzip.compress(b"<p>"))) as client:
        r = await fetch(client, "http://a.test/", max_bytes=1000)
    assert r.outcome is FetchOutcome.PROTOCOL_ERROR
    assert r.detail == "Content-Encoding 'gzip': TypeError: unexpected keyword argument"
