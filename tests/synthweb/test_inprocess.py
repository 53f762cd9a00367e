"""The in-process transport: the same answers and the same log entries as the socket
server, on trio's clock (the autojump clock here), a client that goes away logged as
such, and the hostile web's hang and reset."""

from __future__ import annotations

import httpx2
import pytest
import trio

from ubipy.synthweb import SyntheticWeb, SynthServer, SynthTransport, WebSpec, in_process
from ubipy.synthweb.log import ABANDONED, COMPLETE, RESET

from .conftest import USER_AGENT

# The ordinary cases: pages, robots.txt (h005's fails twice with 503 before a 200), a
# redirect, a 404 off the web, a HEAD.
EXCHANGES = [
    ("GET", "http://h001.synth.test/"),
    ("GET", "http://h001.synth.test/robots.txt"),
    ("GET", "http://h005.synth.test/robots.txt"),
    ("GET", "http://h005.synth.test/robots.txt"),
    ("GET", "http://h005.synth.test/robots.txt"),
    ("GET", "http://h008.synth.test/old/page.html"),
    ("GET", "http://www.outside.example/index.html"),
    ("HEAD", "http://h002.synth.test/"),
    ("GET", "http://h002.synth.test/s1/p1.html?x=1"),
]
HEADERS = ("content-type", "content-length", "location", "retry-after", "server")


def in_process_client(server: SynthServer, **kwargs: object) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(
        transport=SynthTransport(server, client="10.0.0.9"),
        headers={"User-Agent": USER_AGENT},
        **kwargs,  # type: ignore[arg-type]
    )


async def test_answers_and_logs_as_the_socket_server_does(
    server: SynthServer, client: httpx2.AsyncClient
) -> None:
    here = in_process(server.web)
    async with in_process_client(here) as local:
        for method, url in EXCHANGES:
            real = await client.request(method, url)
            mine = await local.request(method, url)
            assert mine.status_code == real.status_code, url
            assert mine.content == real.content, url
            for h in HEADERS:
                assert mine.headers.get(h) == real.headers.get(h), (url, h)
    with trio.fail_after(5):
        await server.wait_idle()
    for theirs, ours in zip(server.log.entries, here.log.entries, strict=True):
        for name in ("host", "target_path", "status", "user_agent", "peer", "method", "outcome"):
            assert getattr(ours, name) == getattr(theirs, name), name
        assert ours.bytes_sent == theirs.bytes_sent
    assert here.counts == server.counts
    assert here.in_flight == 0


async def test_the_latency_runs_on_trio_s_clock(autojump_clock: trio.testing.MockClock) -> None:
    server = in_process(SyntheticWeb(WebSpec(latency=3.0)))
    async with in_process_client(server) as client:
        start = trio.current_time()
        r = await client.get("http://h001.synth.test/")
        assert r.status_code == 200 and trio.current_time() - start == pytest.approx(3.0)
        # A client that goes away meanwhile: the request happened, abandoned, no status.
        with trio.move_on_after(2.0):
            await client.get("http://h001.synth.test/s1/p1.html")
    first, second = server.log.entries
    assert (first.start, first.end, first.outcome) == (start, start + 3.0, COMPLETE)
    assert first.peer == "ab12cd34"
    assert (second.status, second.outcome) == (0, ABANDONED)
    assert second.end - second.start == pytest.approx(2.0)


async def test_a_hang_times_out_and_a_reset_breaks(autojump_clock: trio.testing.MockClock) -> None:
    server = in_process(SyntheticWeb(WebSpec(hostile=True)))
    async with in_process_client(server, timeout=httpx2.Timeout(3.0)) as client:
        start = trio.current_time()
        with pytest.raises(httpx2.ReadTimeout):
            await client.get("http://x-hang.synth.test/hang.html")
        assert trio.current_time() - start == pytest.approx(3.0)
        with pytest.raises(httpx2.ReadError):
            await client.get("http://x-reset.synth.test/reset.html")
        with pytest.raises(NotImplementedError):
            await client.get("http://x-slow.synth.test/slow.html")
    hang, reset = server.log.entries
    assert (hang.status, hang.outcome, hang.end - hang.start) == (0, ABANDONED, 3.0)
    assert (reset.status, reset.outcome) == (0, RESET)
