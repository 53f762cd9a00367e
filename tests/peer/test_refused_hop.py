"""A robots.txt redirected to an address a crawler may not reach (127.0.0.2 here, from
a seed's host on loopback that the user named): the transport refuses the hop, which
will not change on a retry, so the host is given up at once with the refusal as its
reason, and the refusal counts in the status's refused addresses. It used to be tried
three times and the host closed as 'robots.txt unreachable', the refusal counted
nowhere the user looks."""

from __future__ import annotations

import functools
from pathlib import Path

import trio

from ubipy.config import BoundsConfig, CrawlConfig, DnsConfig, FetchConfig, PolitenessConfig, Scope
from ubipy.fetch import Resolver, make_client
from ubipy.peer.crawler import Crawler
from ubipy.store.shard import Shard


async def test_a_robots_txt_redirected_to_a_refused_address_gives_the_host_up_at_once(
    tmp_path: Path, nursery: trio.Nursery
) -> None:
    asked: list[tuple[str, str]] = []
    port = 0

    async def handle(stream: trio.SocketStream) -> None:
        buf = b""
        with trio.move_on_after(10):
            while data := await stream.receive_some(65536):
                buf += data
                while b"\r\n\r\n" in buf:
                    head, _, buf = buf.partition(b"\r\n\r\n")
                    lines = head.decode().split("\r\n")
                    host = next(v for k, _, v in (h.partition(": ") for h in lines) if k == "Host")
                    path = lines[0].split()[1]
                    asked.append((host, path))
                    await stream.send_all(_answer(host, path, port))

    listeners = await nursery.start(functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.0, robots_retry_base=0.01),
        fetch=FetchConfig(max_retries=0, retry_base=0.01),
        bounds=BoundsConfig(scope=Scope.ANY),
        dns=DnsConfig(resolve=("seed.test:127.0.0.1", "other.test:127.0.0.1")),
    )
    resolver = Resolver.of(config.dns, system=True)
    shard = Shard.open(tmp_path)
    try:
        async with make_client(config.fetch, "ubipy/test", resolver=resolver) as client:
            crawler = Crawler(config, shard, client, resolver=resolver)
            async with trio.open_nursery() as inner:
                await inner.start(crawler.run)
                crawler.seed([f"http://seed.test:{port}/"])
                with trio.fail_after(30):
                    await crawler.wait_idle()
                rows = shard._conn.execute("SELECT state, reason FROM frontier").fetchall()
                # Then a page links to the hop's target: its URL is closed with the
                # refusal too, not as 'robots.txt unreachable' (QA).
                crawler.seed([f"http://other.test:{port}/"])
                with trio.fail_after(30):
                    await crawler.wait_idle()
                crawler.stop()
        [(target_reason,)] = shard._conn.execute(
            "SELECT reason FROM frontier WHERE host = ?", (f"127.0.0.2:{port}",)
        ).fetchall()
    finally:
        shard.close()
    assert target_reason == "refused: not a public address"
    # Nothing reached 127.0.0.2.
    assert asked[0] == (f"seed.test:{port}", "/robots.txt")
    assert {host for host, _ in asked} == {f"seed.test:{port}", f"other.test:{port}"}
    # The robots.txt and its refused hop, then other.test's.
    assert crawler.stats.robots_requests == 3
    assert crawler.stats.refused_addresses == 1
    # The hop's target was looked up first (for the per-IP rule) and refused: it had
    # no URLs here, so no host is counted as given up for its name.
    assert crawler.dns is not None
    assert crawler.dns.stats.hosts_given_up == 0
    assert [reason for _, reason in rows] == ["refused: not a public address: 127.0.0.2"]


def _answer(host: str, path: str, port: int) -> bytes:
    """seed.test's robots.txt moved to 127.0.0.2; other.test's page links there."""
    if host.startswith("seed.test"):
        moved = f"http://127.0.0.2:{port}/robots.txt"
        return f"HTTP/1.1 301 Moved\r\nLocation: {moved}\r\nContent-Length: 0\r\n\r\n".encode()
    if path == "/robots.txt":
        return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
    body = f'<a href="http://127.0.0.2:{port}/x">x</a>'.encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body
