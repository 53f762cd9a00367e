"""HTTPS: certificates verified by default, ``--ca-bundle`` for a private CA, a
certificate that does not verify recorded as such and never retried, and one TLS
context per process however many connections are made, each resuming the TLS
session of its origin's first.

The server is a loopback HTTPS server whose certificate a CA of the test's own
(trustme) signed: no system store trusts it. It closes every connection after one
answer, so each request is a new connection and a new handshake, and it counts both.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import h11
import httpx2
import pytest
import trio
import trustme

from tests.crawling import crawl_until_idle
from ubipy.config import CrawlConfig, FetchConfig, PolitenessConfig
from ubipy.fetch import FetchOutcome, fetch, is_retryable, make_client
from ubipy.fetch.tls import tls_context
from ubipy.fetch.transport import PooledTransport
from ubipy.peer.crawler import Crawler
from ubipy.store.shard import Shard

PAGE = b"<html><head><title>secure</title></head><body>ok</body></html>"


@dataclass
class TlsServer:
    port: int
    handshakes: int = 0  # attempted (connections accepted)
    completed: int = 0  # handshakes that went through
    resumed: int = 0  # of which resumed a session of an earlier connection
    requests: list[str] = field(default_factory=list)
    keep_alive: bool = False  # answer every request of a connection, not just its first

    def url(self, path: str = "/") -> str:
        return f"https://localhost:{self.port}{path}"

    async def handle(self, stream: trio.SocketStream, ctx: ssl.SSLContext) -> None:
        self.handshakes += 1
        tls = trio.SSLStream(stream, ctx, server_side=True)
        try:
            await tls.do_handshake()
            self.completed += 1
            self.resumed += tls.session_reused
            conn = h11.Connection(h11.SERVER)
            for _ in range(100 if self.keep_alive else 1):
                while True:
                    event = conn.next_event()
                    if event is h11.NEED_DATA:
                        conn.receive_data(bytes(await tls.receive_some(65536)))
                        continue
                    if isinstance(event, h11.Request):
                        self.requests.append(event.target.decode())
                        continue
                    if isinstance(event, h11.EndOfMessage):
                        break
                    return
                target = self.requests[-1]
                # robots.txt and anything else a crawler asks (a sitemap) are not found.
                found = target == "/" or target.startswith(("/p", "/x"))
                status, body = (200, PAGE) if found else (404, b"")
                headers = [("Content-Type", "text/html"), ("Content-Length", str(len(body)))]
                if not self.keep_alive:
                    headers.append(("Connection", "close"))
                data = conn.send(h11.Response(status_code=status, headers=headers)) or b""
                data += conn.send(h11.Data(data=body)) or b""
                data += conn.send(h11.EndOfMessage()) or b""
                await tls.send_all(data)
                conn.start_next_cycle()
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            pass
        finally:
            await trio.aclose_forcefully(tls)


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_bundle(ca: trustme.CA, tmp_path: Path) -> Path:
    path = tmp_path / "private-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


@pytest.fixture(autouse=True)
def fresh_context() -> Iterator[None]:
    """Each test makes the process's context afresh, and leaves none of its own behind."""
    tls_context.cache_clear()
    yield
    tls_context.cache_clear()


@asynccontextmanager
async def https_server(
    ca: trustme.CA, *, tickets: bool = True, keep_alive: bool = False
) -> AsyncIterator[TlsServer]:
    """``tickets``: whether it hands out session tickets (some servers do not)."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(ctx)
    if not tickets:
        ctx.num_tickets = 0
        ctx.options |= ssl.OP_NO_TICKET
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    server = TlsServer(listeners[0].socket.getsockname()[1], keep_alive=keep_alive)
    async with trio.open_nursery() as nursery:

        async def handle(stream: trio.SocketStream) -> None:
            await server.handle(stream, ctx)

        nursery.start_soon(trio.serve_listeners, handle, listeners)
        yield server
        nursery.cancel_scope.cancel()


async def test_an_unknown_ca_is_a_certificate_error_that_is_not_retried(ca: trustme.CA) -> None:
    async with https_server(ca) as server, make_client(FetchConfig(), "ubipy/test") as client:
        result = await fetch(client, server.url(), max_bytes=10_000)
    assert result.outcome is FetchOutcome.CERTIFICATE_ERROR
    assert result.detail is not None and result.detail.startswith("certificate error: ")
    assert "issuer" in result.detail  # "unable to get local issuer certificate"
    assert not is_retryable(result)
    assert (server.handshakes, server.completed, server.requests) == (1, 0, [])


async def test_a_wrong_name_is_a_certificate_error_too(ca: trustme.CA) -> None:
    # 127.0.0.1 is not a name the certificate has, even from a CA that is trusted.
    ctx = ssl.create_default_context()
    ca.configure_trust(ctx)
    transport = PooledTransport(ssl_context=ctx)
    async with (
        https_server(ca) as server,
        make_client(FetchConfig(), "t", transport=transport) as c,
    ):
        result = await fetch(c, f"https://127.0.0.1:{server.port}/", max_bytes=10_000)
    assert result.outcome is FetchOutcome.CERTIFICATE_ERROR
    assert result.detail is not None and "mismatch" in result.detail.lower()


async def test_the_ca_bundle_lets_a_private_ca_through(ca: trustme.CA, ca_bundle: Path) -> None:
    config = FetchConfig(ca_bundle=ca_bundle)
    async with https_server(ca) as server, make_client(config, "ubipy/test") as client:
        result = await fetch(client, server.url("/x"), max_bytes=10_000)
    assert result.outcome is FetchOutcome.OK and result.body == PAGE
    assert server.requests == ["/x"]


async def test_a_connection_reset_mid_body_over_tls_is_a_read_error(
    ca: trustme.CA, ca_bundle: Path
) -> None:
    """The answer's first records are read at once, then the socket is reset: an
    error reading, as over plain TCP, not a short page."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(ctx)
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]

    async def reset(stream: trio.SocketStream) -> None:
        tls = trio.SSLStream(stream, ctx, server_side=True)
        await tls.do_handshake()
        while b"\r\n\r\n" not in await tls.receive_some(65536):
            pass
        await tls.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 30_000)
        # SO_LINGER with a zero time-out: close sends a reset, not an end.
        stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await stream.aclose()

    async with (
        trio.open_nursery() as nursery,
        make_client(FetchConfig(ca_bundle=ca_bundle), "ubipy/test") as client,
    ):
        nursery.start_soon(trio.serve_listeners, reset, listeners)
        with trio.fail_after(10):
            result = await fetch(client, f"https://localhost:{port}/", max_bytes=1_000_000)
        nursery.cancel_scope.cancel()
    assert result.outcome is FetchOutcome.NETWORK_ERROR, result
    assert result.body is None or len(result.body) < 100_000


async def test_one_tls_context_for_every_connection(
    ca: trustme.CA, ca_bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = FetchConfig(ca_bundle=ca_bundle)  # checked (a context of its own) before counting
    made: list[ssl.SSLContext] = []
    original = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        ctx = original(*args, **kwargs)  # type: ignore[arg-type]
        made.append(ctx)
        return ctx

    async with https_server(ca) as server:
        monkeypatch.setattr(ssl, "create_default_context", counted)  # the server has its own
        # Two clients (as two peers in one process would have), five connections each.
        for _ in range(2):
            async with make_client(config, "ubipy/test") as client:
                for i in range(5):
                    result = await fetch(client, server.url(f"/p{i}"), max_bytes=10_000)
                    assert result.ok
    assert (server.handshakes, server.completed, len(server.requests)) == (10, 10, 10)
    assert len(made) == 1
    # Each client's later connections resume a session of its earlier ones.
    assert server.resumed == 8


async def test_a_server_that_resumes_nothing_gets_full_handshakes(
    ca: trustme.CA, ca_bundle: Path
) -> None:
    async with (
        https_server(ca, tickets=False) as server,
        make_client(FetchConfig(ca_bundle=ca_bundle), "ubipy/test") as client,
    ):
        for i in range(4):
            result = await fetch(client, server.url(f"/p{i}"), max_bytes=10_000)
            assert result.ok and result.body == PAGE
    assert (server.completed, server.resumed) == (4, 0)


async def test_idle_tls_connections_have_a_cap_of_their_own(
    ca: trustme.CA, ca_bundle: Path
) -> None:
    # An idle TLS connection holds ~40 KB where a plain one holds ~2: fewer are kept.
    async with https_server(ca, keep_alive=True) as one, https_server(ca, keep_alive=True) as two:
        transport = PooledTransport(ca_bundle=ca_bundle, max_idle=100, max_idle_tls=1)
        async with httpx2.AsyncClient(transport=transport) as client:
            for server in (one, two, two, one):
                assert (await client.get(server.url("/x"))).status_code == 200
        # The second origin's connection pushed the first's out; the first's new one
        # then pushed the second's.
        assert (one.handshakes, two.handshakes) == (2, 1)


def _crawler_config(tmp: Path, ca_bundle: Path | None) -> CrawlConfig:
    return CrawlConfig(
        data_dir=tmp,
        politeness=PolitenessConfig(delay=0.0, robots_retry_base=0.01),
        fetch=FetchConfig(max_retries=3, retry_base=0.01, ca_bundle=ca_bundle),
    )


@dataclass
class Crawled:
    crawler: Crawler
    pages: list[dict[str, object]]
    frontier: list[tuple[str, str | None]]  # (url, why it was closed)


async def _crawl(tmp: Path, config: CrawlConfig, url: str) -> Crawled:
    shard = Shard.open(tmp)
    try:
        async with make_client(config.fetch, "ubipy/test") as client:
            crawler = await crawl_until_idle(config, shard, client, [url])
        pages = [dict(r) for r in shard.iter_pages()]
        frontier = shard._conn.execute("SELECT url, reason FROM frontier").fetchall()
        return Crawled(crawler, pages, [(str(u), r) for u, r in frontier])
    finally:
        shard.close()


async def test_a_crawl_gives_a_host_up_at_its_first_certificate_error(
    ca: trustme.CA, tmp_path: Path
) -> None:
    async with https_server(ca) as server:
        url = server.url("/")
        crawled = await _crawl(tmp_path, _crawler_config(tmp_path, None), url)
    # robots.txt's handshake failed once, and was not tried again (robots.txt failures
    # are otherwise retried): the host is given up, its page closed with the reason.
    assert (server.handshakes, server.completed, server.requests) == (1, 0, [])
    stats = crawled.crawler.stats
    assert stats.certificate_errors == 1
    assert stats.robots_requests == 1 and stats.retries == 0
    [(frontier_url, reason)] = [(u, r) for u, r in crawled.frontier if u == url]
    assert frontier_url == url
    assert reason is not None and reason.startswith("certificate error: ")
    assert not [p for p in crawled.pages if p["error"] is None]
    assert crawled.crawler.pending == 0


async def test_a_crawl_with_the_ca_bundle_fetches_the_page(
    ca: trustme.CA, ca_bundle: Path, tmp_path: Path
) -> None:
    async with https_server(ca) as server:
        url = server.url("/")
        crawled = await _crawl(tmp_path, _crawler_config(tmp_path, ca_bundle), url)
    assert [r for r in server.requests if r != "/sitemap.xml"] == ["/robots.txt", "/"]
    pages = [p for p in crawled.pages if p["url"] == url]
    assert [(p["url"], p["status"], p["title"], p["error"]) for p in pages] == [
        (url, 200, "secure", None)
    ]
    assert crawled.crawler.stats.certificate_errors == 0


async def test_a_page_whose_certificate_fails_is_stored_as_such_and_not_retried(
    tmp_path: Path,
) -> None:
    """robots.txt came through, the page's handshake did not (a server behind a load
    balancer with one bad certificate): one attempt, stored with the error."""
    asked: list[str] = []

    async def serve(request: httpx2.Request) -> httpx2.Response:
        asked.append(request.url.path)
        if request.url.path != "/":
            return httpx2.Response(404)
        bad = ssl.SSLCertVerificationError(1, "certificate verify failed")
        bad.verify_message = "certificate has expired"
        raise httpx2.ConnectError("handshake failed") from bad

    config = _crawler_config(tmp_path, None)
    shard = Shard.open(tmp_path)
    try:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(serve)) as client:
            crawler = await crawl_until_idle(config, shard, client, ["https://a.test/"])
        [row] = [r for r in shard.iter_pages() if r["url"] == "https://a.test/"]
    finally:
        shard.close()
    assert [path for path in asked if path != "/sitemap.xml"] == ["/robots.txt", "/"]
    assert row["error"] == "certificate error: certificate has expired"
    assert (crawler.stats.errors, crawler.stats.certificate_errors) == (1, 1)
    assert crawler.stats.retries == 0 and crawler.stats.timeouts == 0
