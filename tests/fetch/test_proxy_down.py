"""A --proxy that cannot be reached: each request's error names the proxy, and the log
says so at most once a minute. Before, hosts were given up "robots.txt unreachable"
after their attempts, with nothing that said why (QA)."""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import socket
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig
from ubipy.descriptors import out_of_descriptors
from ubipy.fetch import FetchOutcome, fetch
from ubipy.fetch.politeness import Entry, Scheduler
from ubipy.fetch.sockets import connect_in_turn
from ubipy.fetch.transport import OutOfSockets, PooledTransport, ProxyUnreachable
from ubipy.store import Shard

HTML = {"content-type": "text/html"}


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_proxy_that_refuses_is_named_in_each_error_and_said_once_a_minute(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    port = _closed_port()
    transport = PooledTransport(proxy=f"http://127.0.0.1:{port}")
    errors: list[str] = []
    async with httpx2.AsyncClient(transport=transport) as client:
        with caplog.at_level(logging.WARNING, logger="ubipy.fetch.transport"):
            for url in ["http://a.test/", "https://b.test/", "http://c.test/"]:
                with pytest.raises(httpx2.ConnectError) as failed:
                    await client.get(url)
                errors.append(str(failed.value))
            said = len(caplog.records)
            await trio.sleep(61)
            with pytest.raises(httpx2.ConnectError):
                await client.get("http://d.test/")
    assert all(e.startswith(f"cannot connect to the proxy 127.0.0.1:{port}: ") for e in errors)
    assert said == 1 and len(caplog.records) == 2
    assert f"cannot connect to the proxy 127.0.0.1:{port}" in caplog.records[0].getMessage()


async def test_a_proxy_out_of_reach_is_reported_as_the_proxy_s_failure() -> None:
    port = _closed_port()
    transport = PooledTransport(proxy=f"http://127.0.0.1:{port}")
    async with httpx2.AsyncClient(transport=transport) as client:
        result = await fetch(client, "http://a.test/", max_bytes=1 << 20)
    assert result.outcome is FetchOutcome.PROXY_DOWN
    assert result.detail is not None and f"proxy 127.0.0.1:{port}" in result.detail


async def test_no_socket_to_be_had_is_no_host_s_failure_and_said_once_a_minute(
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Under ``ulimit -n 20`` every connection failed as the proxy's, or the host's
    (QA): out of file descriptors, a request is put back, and the log says why."""

    async def no_descriptors(host: str, port: int) -> trio.SocketStream:
        attempt = OSError(errno.EMFILE, os.strerror(errno.EMFILE))
        raise OSError(f"all attempts to connect to {host}:{port} failed") from (
            ExceptionGroup("attempts", [attempt])
        )

    monkeypatch.setattr(trio, "open_tcp_stream", no_descriptors)
    why = f"{os.strerror(errno.EMFILE)}: this process is out of file descriptors (ulimit -n)"
    for proxy in (f"http://127.0.0.1:{_closed_port()}", None):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="ubipy.fetch.transport"):
            async with httpx2.AsyncClient(transport=PooledTransport(proxy=proxy)) as client:
                for url in ("http://a.test/", "http://b.test/"):
                    result = await fetch(client, url, max_bytes=1 << 20)
                    assert (result.outcome, result.detail) == (FetchOutcome.NO_SOCKETS, why)
        said = [r.getMessage() for r in caplog.records]
        assert said == [f"cannot open a connection: {why}; requests wait and go on"]


async def test_a_proxy_that_never_answers_a_connection_is_down_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Its connections dropped (a firewall), it was a time-out of each host's: given up
    # as before (a review). A listener whose backlog is full answers no SYN.
    with socket.socket() as proxy:
        proxy.bind(("127.0.0.1", 0))
        proxy.listen(0)
        port = proxy.getsockname()[1]
        fillers = [socket.socket() for _ in range(4)]
        try:
            for filler in fillers:
                filler.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    filler.connect(("127.0.0.1", port))
            transport = PooledTransport(proxy=f"http://127.0.0.1:{port}", connect_timeout=5.0)
            async with httpx2.AsyncClient(transport=transport) as client:
                result = await fetch(client, "http://a.test/", max_bytes=1 << 20)
        finally:
            for filler in fillers:
                filler.close()
    assert result.outcome is FetchOutcome.PROXY_DOWN
    assert result.detail == f"cannot connect to the proxy 127.0.0.1:{port}: no answer within 5 s"


@pytest.mark.parametrize("down", [ProxyUnreachable, OutOfSockets])
async def test_hosts_wait_for_a_proxy_that_is_down_and_are_crawled_once_it_is_back(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, down: type[ProxyUnreachable]
) -> None:
    # Down for ten minutes: its failures were the hosts', each given up "robots.txt
    # unreachable" after its attempts (3 within 90 s by default; here, within 3 s), its
    # URLs closed and known, so that a restart or a seed did not bring them back (QA).
    up_at = 600.0
    refused: list[float] = []

    async def through_proxy(request: httpx2.Request) -> httpx2.Response:
        if trio.current_time() < up_at:
            refused.append(trio.current_time())
            raise down("cannot connect to the proxy 127.0.0.1:3128: refused")
        path = request.url.path
        if path not in ("/", "/a", "/b"):
            return httpx2.Response(404)  # robots.txt
        links = "".join(f'<a href="/{p}">{p}</a>' for p in ("a", "b")) if path == "/" else ""
        return httpx2.Response(200, headers=HTML, text=f"<html><body>{links}</body></html>")

    polite = PolitenessConfig(delay=0.0, robots_retry_base=1.0)
    config = CrawlConfig(data_dir=tmp_path, politeness=polite, bounds=BoundsConfig(sitemaps=False))
    shard = Shard.open(tmp_path)
    try:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(through_proxy)) as client:
            seeds = [f"http://h{i}.test/" for i in range(5)]
            crawler = await crawl_until_idle(config, shard, client, seeds, patience=900.0)
        assert crawler.stats.robots_given_up == 0
        # Counted, and said in the status as what it was.
        outcome = FetchOutcome.NO_SOCKETS if down is OutOfSockets else FetchOutcome.PROXY_DOWN
        assert crawler.stats.put_back == {outcome: len(refused)}
        assert shard.counts().pages == 3 * len(seeds)  # every page, after the proxy came back
    finally:
        shard.close()
    # Asked after 1, 2, 4... s, at most a minute apart: about 15 times in ten minutes,
    # one request alone each time (the hosts' first five found it down together), not
    # each host's robots.txt in a loop.
    waits = [b - a for a, b in itertools.pairwise(sorted(set(refused)))]
    assert max(waits) <= 60.0 and waits[:3] == [1.0, 2.0, 4.0]
    assert refused[:5] == [0.0] * 5 and len(refused[5:]) == len(set(refused[5:])) <= 16


def test_only_an_answer_ends_the_wait_for_a_proxy_found_down() -> None:
    """A request cut short by the crawler (a lease refused, a pause) showed nothing of
    the proxy: it ended the wait, and the next failure waited 1 s again (a review)."""

    def loader(host: str, after: int, limit: int) -> list[Entry]:
        return []

    s = Scheduler(delay=0.0, window=8, loader=loader, robots_retry_base=10.0)
    for i in range(3):
        s.add(f"h{i}.test", Entry(fp=i + 1, seq=i + 1, url=f"http://h{i}.test/", depth=0))
    first = s.next_job(0.0)
    assert first is not None
    s.abandoned(first.host, first.entry, 0.0, proxy_down=True)
    assert s.next_job(0.5) is None and s.next_wakeup() == 1.0
    probe = s.next_job(1.0)  # one request alone
    assert probe is not None and s.next_job(1.0) is None
    s.abandoned(probe.host, probe.entry, 1.0, refused=True)  # its address's lease refused
    probe = s.next_job(1.0)  # another in its place, still alone
    assert probe is not None and s.next_job(1.0) is None
    s.abandoned(probe.host, probe.entry, 1.5, proxy_down=True)
    assert s.next_job(3.0) is None and s.next_wakeup() == 3.5  # 2 s: the wait doubled
    probe = s.next_job(3.5)
    assert probe is not None
    s.finished(probe.host, 3.6)  # answered: the proxy is back, every host goes on
    assert [s.next_job(3.6) is not None for _ in range(2)] == [True, True]


def test_a_want_of_descriptors_is_found_in_any_cause_and_a_loop_ends() -> None:
    emfile = OSError(errno.EMFILE, os.strerror(errno.EMFILE))
    tried = OSError("a: refused; b: Too many open files")
    tried.__cause__ = ExceptionGroup("attempts", [ConnectionRefusedError(), emfile])
    assert out_of_descriptors(tried) is not None
    looped = OSError("a")
    looped.__cause__ = OSError("b")
    looped.__cause__.__cause__ = looped  # a review: this walked for ever
    assert out_of_descriptors(looped) is None


async def test_out_of_descriptors_is_told_from_a_failure_of_each_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tried in turn, every address's failure was joined into a message alone, and the
    want of descriptors was charged to the host (a review)."""

    async def no_descriptors(host: str, port: int) -> trio.SocketStream:
        raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))

    monkeypatch.setattr(trio, "open_tcp_stream", no_descriptors)
    with pytest.raises(OSError) as raised:
        await connect_in_turn(["127.0.0.1", "127.0.0.2"], 80, trio.current_time() + 5)
    assert "127.0.0.2: " in str(raised.value)
    assert out_of_descriptors(raised.value) is not None
