"""The server: proxy (absolute-form) and origin-form requests, the log, latency, the CLI."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import httpx2
import trio

from ubipy.synthweb import RequestLog, SyntheticWeb, SynthServer, WebSpec, serve

from .conftest import USER_AGENT


async def test_absolute_form_through_the_proxy(
    server: SynthServer, client: httpx2.AsyncClient
) -> None:
    r = await client.get("http://h001.synth.test/")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    assert "h001.synth.test page 0" in r.text
    r = await client.get("http://h008.synth.test/old/page.html")
    assert r.status_code == 301
    assert r.headers["location"] == "http://h008.synth.test/new/page.html"
    r = await client.get("http://www.outside.example/index.html")
    assert r.status_code == 404
    await server.wait_idle()
    [first, second, third] = server.log.entries
    assert (first.host, first.target_path, first.status) == ("h001.synth.test", "/", 200)
    assert first.peer == "ab12cd34" and first.user_agent == USER_AGENT
    assert first.start <= first.end <= second.start
    assert first.bytes_sent > len(r.content) > 0
    assert (second.status, third.host, third.status) == (301, "www.outside.example", 404)


async def _raw_exchange(port: int, request: bytes, responses: int) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(request)
        data = b""
        while data.count(b"HTTP/1.1 ") < responses or not data.endswith(b"</html>\n"):
            chunk = await stream.receive_some(65536)
            assert chunk, data
            data += chunk
        return data


async def test_origin_form_with_host_header_and_keep_alive(server: SynthServer) -> None:
    request = (
        b"GET / HTTP/1.1\r\nHost: h002.synth.test\r\n\r\n"
        b"GET /s1/p1.html HTTP/1.1\r\nHost: H002.synth.test:80\r\n\r\n"
    )
    with trio.fail_after(5):
        data = await _raw_exchange(server.port, request, 2)
        await server.log.wait_for_count(2)
    assert data.count(b"HTTP/1.1 200") == 2
    a, b = server.log.entries
    assert (a.host, a.target_path, b.host, b.target_path) == (
        "h002.synth.test", "/", "h002.synth.test", "/s1/p1.html"
    )  # fmt: skip
    assert a.peer.startswith("127.0.0.1:") and a.peer == b.peer  # one connection


async def test_robots_transient_failure_then_success(
    server: SynthServer, client: httpx2.AsyncClient
) -> None:
    codes = [(await client.get("http://h005.synth.test/robots.txt")).status_code for _ in range(3)]
    assert codes == [503, 503, 200]
    assert (await client.get("http://h006.synth.test/robots.txt")).status_code == 500
    r = await client.head("http://h001.synth.test/")
    assert r.status_code == 200 and r.content == b""
    await server.wait_idle()
    assert server.log.entries[-1].method == "HEAD"


async def test_latency_and_jitter_are_applied(nursery: trio.Nursery) -> None:
    web = SyntheticWeb(WebSpec(latency=0.05, jitter=0.02))
    server: SynthServer = await nursery.start(serve, web)
    async with httpx2.AsyncClient(proxy=server.proxy_url, trust_env=False) as c:
        for _ in range(3):
            await c.get("http://h000.synth.test/")
    await server.wait_idle()
    for entry in server.log.entries:
        assert 0.05 <= entry.end - entry.start < 1.0
    assert web.jitter_for("h", "/", 1) == web.jitter_for("h", "/", 1) < 0.02


async def test_wait_for_and_jsonl_round_trip(
    server: SynthServer, client: httpx2.AsyncClient, tmp_path: Path
) -> None:
    seen = trio.Event()

    async def waiter() -> None:
        await server.log.wait_for_count(2)
        seen.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await client.get("http://h000.synth.test/")
        assert not seen.is_set()
        await client.get("http://h000.synth.test/robots.txt")
        with trio.fail_after(5):
            await seen.wait()
    await server.wait_idle()
    path = tmp_path / "log.jsonl"
    server.log.to_jsonl(path)
    assert RequestLog.from_jsonl(path).entries == server.log.entries


async def test_command_line_serves_and_writes_the_log_on_sigint(tmp_path: Path) -> None:
    log = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "ubipy.synthweb", "--hosts", "3", "--pages", "5"]
    cmd += ["--seed", "7", "--log", str(log)]
    proc = await trio.lowlevel.open_process(cmd, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        with trio.fail_after(20):
            out = b""
            while b"seed " not in out:
                chunk = await proc.stdout.receive_some()
                assert chunk, out
                out += chunk
            proxy = out.split(b"proxy ", 1)[1].split(b"\n", 1)[0].decode()
            assert b"seed http://h000.synth.test/" in out
            async with httpx2.AsyncClient(proxy=proxy, trust_env=False) as c:
                assert (await c.get("http://h001.synth.test/")).status_code == 200
            proc.send_signal(signal.SIGINT)
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await proc.stdout.aclose()
    [entry] = RequestLog.from_jsonl(log).entries
    assert entry.host == "h001.synth.test"


async def test_many_concurrent_connections_and_bad_input(server: SynthServer) -> None:
    async def one(c: httpx2.AsyncClient, i: int) -> None:
        r = await c.get(f"http://h{i % 12:03d}.synth.test/s1/p1.html")
        assert r.status_code == 200

    # One client (building one costs an SSL context), up to 100 connections at once.
    limits = httpx2.Limits(max_connections=100)
    with trio.fail_after(20):
        async with (
            httpx2.AsyncClient(proxy=server.proxy_url, trust_env=False, limits=limits) as c,
            trio.open_nursery() as nursery,
        ):
            for i in range(100):
                nursery.start_soon(one, c, i)
        stream = await trio.open_tcp_stream("127.0.0.1", server.port)
        async with stream:
            await stream.send_all(b"GET http://[::1/x HTTP/1.1\r\nHost: x\r\n\r\n")
            assert (await stream.receive_some()).startswith(b"HTTP/1.1 ")
        await server.wait_idle()
    assert len(server.log) == 101
