"""The hostile web on real sockets: each case really behaves so, and the log says what
happened (status 0 for no answer, `outcome` for how the exchange ended)."""

from __future__ import annotations

import email.utils
import time
from collections.abc import AsyncIterator

import httpx2
import pytest
import trio

from ubipy.synthweb import SyntheticWeb, SynthServer, serve
from ubipy.synthweb.log import ABANDONED, COMPLETE, CUT, RESET

from .test_hostile import SMALL

TIMEOUT = httpx2.Timeout(0.3)


@pytest.fixture
async def hostile(nursery: trio.Nursery) -> SynthServer:
    result: SynthServer = await nursery.start(serve, SyntheticWeb(SMALL))
    return result


@pytest.fixture
async def client(hostile: SynthServer) -> AsyncIterator[httpx2.AsyncClient]:
    async with httpx2.AsyncClient(proxy=hostile.proxy_url, trust_env=False, timeout=TIMEOUT) as c:
        yield c


async def settled(server: SynthServer) -> None:
    with trio.fail_after(2):
        await server.wait_idle()


async def read_and_leave(server: SynthServer, url: str, n: int, after: bytes = b"") -> bytes:
    """GET `url` on a raw socket, read `n` bytes (past `after`, if given), hang up."""
    stream = await trio.open_tcp_stream("127.0.0.1", server.port)
    data = b""
    async with stream:
        await stream.send_all(f"GET {url} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        while len(data.partition(after)[2] if after else data) < n:
            chunk = await stream.receive_some()
            assert chunk, data[:200]
            data += chunk
    return data


async def test_huge_body_whole_and_cut_short(
    hostile: SynthServer, client: httpx2.AsyncClient
) -> None:
    r = await client.get("http://x-huge.synth.test/huge.html")
    assert r.status_code == 200 and len(r.content) == SMALL.huge_bytes
    assert r.headers["content-length"] == str(SMALL.huge_bytes) and r.text.endswith("</html>\n")
    await read_and_leave(hostile, "http://x-huge.synth.test/huge.html", 100_000)  # a size cap
    await settled(hostile)
    whole, cut = hostile.log.entries
    assert (whole.status, whole.outcome, whole.complete) == (200, COMPLETE, True)
    assert (cut.status, cut.outcome, cut.complete) == (200, ABANDONED, False)
    assert cut.bytes_sent < SMALL.huge_bytes


async def test_compression_bombs(hostile: SynthServer, client: httpx2.AsyncClient) -> None:
    for coding in ("gzip", "deflate"):
        r = await client.get(f"http://x-{coding}-bomb.synth.test/bomb.html")
        assert r.headers["content-encoding"] == coding
        assert int(r.headers["content-length"]) < SMALL.bomb_bytes // 500
        assert len(r.content) == SMALL.bomb_bytes  # httpx inflates it


async def test_endless_body_ends_when_the_client_goes(
    hostile: SynthServer, client: httpx2.AsyncClient
) -> None:
    head = await read_and_leave(hostile, "http://x-endless.synth.test/endless.html", 1_000_000)
    assert b"Transfer-Encoding: chunked" in head and b"Content-Length" not in head
    await settled(hostile)  # the server's task is gone, not streaming on
    [entry] = hostile.log.entries
    assert (entry.status, entry.outcome) == (200, ABANDONED)
    assert entry.bytes_sent >= 1_000_000


async def test_hang_then_recover(hostile: SynthServer, client: httpx2.AsyncClient) -> None:
    url = "http://x-hang.synth.test/hang.html"
    for _ in range(SMALL.flaky_failures):
        with pytest.raises(httpx2.ReadTimeout):
            await client.get(url)
    assert (await client.get(url)).status_code == 200
    await settled(hostile)
    first, second, third = hostile.log.entries
    for hung in (first, second):
        assert (hung.status, hung.outcome, hung.bytes_sent) == (0, ABANDONED, 0)
        assert 0.25 < hung.end - hung.start < 1.0  # ended when the client gave up
    assert second.start >= first.end and (third.status, third.outcome) == (200, COMPLETE)


async def test_hang_always_on_a_raw_socket(hostile: SynthServer) -> None:
    request = b"GET http://x-hang-always.synth.test/hang.html HTTP/1.1\r\nHost: x\r\n\r\n"
    for _ in range(3):
        stream = await trio.open_tcp_stream("127.0.0.1", hostile.port)
        async with stream:
            await stream.send_all(request)
            with trio.move_on_after(0.1) as waited:
                await stream.receive_some()
            assert waited.cancelled_caught  # nothing came
        await settled(hostile)
    assert [(r.status, r.outcome) for r in hostile.log.entries] == [(0, ABANDONED)] * 3


async def test_slow_is_cut_then_recovers(hostile: SynthServer, client: httpx2.AsyncClient) -> None:
    url = "http://x-slow.synth.test/slow.html"
    for _ in range(SMALL.flaky_failures):
        with pytest.raises(httpx2.RemoteProtocolError):
            await client.get(url)  # 5 bytes, one per 0.05 s, then the connection drops
    assert (await client.get(url)).status_code == 200
    with pytest.raises(httpx2.RemoteProtocolError):
        await client.get("http://x-slow-always.synth.test/slow.html")
    # The client leaves after the head and one byte.
    await read_and_leave(hostile, "http://x-slow-always.synth.test/slow.html", 1, after=b"\r\n\r\n")
    await settled(hostile)
    outcomes = [(r.host[:6], r.status, r.outcome, r.bytes_sent > 0) for r in hostile.log.entries]
    assert outcomes == [
        ("x-slow", 200, CUT, True),
        ("x-slow", 200, CUT, True),
        ("x-slow", 200, COMPLETE, True),
        ("x-slow", 200, CUT, True),
        ("x-slow", 200, ABANDONED, True),
    ]
    cut, left = hostile.log.entries[3:]
    assert 0.25 <= cut.end - cut.start < 1.0
    assert left.end - left.start < 0.2  # noticed at once, not at the next byte


async def test_reset(hostile: SynthServer, client: httpx2.AsyncClient) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", hostile.port)
    async with stream:
        await stream.send_all(
            b"GET http://x-reset.synth.test/reset.html HTTP/1.1\r\nHost: x\r\n\r\n"
        )
        with pytest.raises(trio.BrokenResourceError):  # ECONNRESET, not a clean EOF
            assert await stream.receive_some() == b"", "expected an RST"
    with pytest.raises(httpx2.TransportError):
        await client.get("http://x-reset.synth.test/reset.html")
    assert (await client.get("http://x-reset.synth.test/reset.html")).status_code == 200
    with pytest.raises(httpx2.TransportError):
        await client.get("http://x-reset-always.synth.test/reset.html")
    await settled(hostile)
    got = [(r.status, r.outcome) for r in hostile.log.entries]
    assert got == [(0, RESET), (0, RESET), (200, COMPLETE), (0, RESET)]


async def test_retry_after_in_seconds_and_as_a_date(
    hostile: SynthServer, client: httpx2.AsyncClient
) -> None:
    r = await client.get("http://x-ratelimit.synth.test/limited.html")
    assert (r.status_code, r.headers["retry-after"]) == (429, "2")
    assert (await client.get("http://x-ratelimit.synth.test/limited.html")).status_code == 200
    before = time.time()
    r = await client.get("http://x-unavailable.synth.test/unavailable.html")
    when = email.utils.parsedate_to_datetime(r.headers["retry-after"]).timestamp()
    assert r.status_code == 503 and before + 2 <= when <= time.time() + 3
    assert (await client.get("http://x-unavailable.synth.test/unavailable.html")).status_code == 200
    await settled(hostile)
    limited, _, busy, _ = hostile.log.entries
    assert (limited.retry_after, busy.retry_after) == ("2", r.headers["retry-after"])
    assert abs(busy.clock_offset - (time.time() - trio.current_time())) < 0.5


async def test_content_cases_and_robots_are_served(
    hostile: SynthServer, client: httpx2.AsyncClient
) -> None:
    for host, path in (
        ("x-malformed", "/malformed.html"),
        ("x-binary", "/binary.html"),
        ("x-charset", "/charset.html"),
        ("x-manylinks", "/many.html"),
        ("x-weirdlinks", "/weird.html"),
        ("x-weirdlinks", "/with%20space/a%20b.html"),
        ("x-weirdlinks", "/%C3%BCn%C3%AFcode/%E9%A1%B5.html"),
        ("x-charset", "/caf%EF%BF%BD.html"),
        ("x-calendar", "/cal/2026/11/"),
        ("x-deep", "/deep/a/b/a/"),
    ):
        r = await client.get(f"http://{host}.synth.test{path}")
        assert r.status_code == 200, (host, path)
        assert r.headers["content-type"].startswith("text/html")
    robots = await client.get("http://x-bigrobots.synth.test/robots.txt")
    assert len(robots.content) == SMALL.bigrobots_bytes
    long = "http://x-weirdlinks.synth.test/long/" + "x" * 9989 + ".html"
    assert (await client.get(long)).status_code == 200  # served, but refused by a crawler
