"""One peer crawls a site whose address is an IPv6 literal, http://[::1]:PORT/, with no
proxy: normalisation, the host key the ring and politeness use, robots.txt, the
connection itself and the export all see one host, spelled one way.

Skipped where the sandbox has no IPv6 loopback.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path

import h11
import pytest
import trio

from tests.fetch.test_ipv6 import ipv6_loopback
from ubipy.config import CrawlConfig, FetchConfig, PolitenessConfig
from ubipy.peer.peer import Peer
from ubipy.store.export import export

pytestmark = pytest.mark.skipif(
    not ipv6_loopback(), reason="no IPv6 loopback (::1) in this sandbox"
)

DELAY = 0.05


@dataclass
class Site:
    """A tiny web site on ::1 that logs every request (target, start, end)."""

    port: int = 0
    log: list[tuple[str, float, float]] = field(default_factory=list)

    def page(self, target: str) -> tuple[int, str, bytes]:
        if target == "/robots.txt":
            return 200, "text/plain", b"User-agent: *\nDisallow: /private/\n"
        other = f"[0:0:0:0:0:0:0:1]:{self.port}"  # another spelling of the same host
        pages = {
            "/": ("home", f'<a href="a.html">a</a><a href="http://{other}/b.html">b</a>'
                  f'<a href="/private/x.html">private</a><a href="/a.html#top">a again</a>'),
            "/a.html": ("page a", '<a href="/">home</a>'),
            "/b.html": ("page b", '<a href="./a.html">a</a>'),
            "/private/x.html": ("private", ""),
        }  # fmt: skip
        if target not in pages:
            return 404, "text/plain", b"not here\n"
        title, links = pages[target]
        body = f"<!DOCTYPE html><title>{title}</title><body>{links}</body>"
        return 200, "text/html; charset=utf-8", body.encode()

    async def serve(self, *, task_status: trio.TaskStatus[None]) -> None:
        listeners = await trio.open_tcp_listeners(0, host="::1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        with contextlib.suppress(h11.ProtocolError, trio.BrokenResourceError):
            await self._serve(stream)

    async def _serve(self, stream: trio.SocketStream) -> None:
        conn = h11.Connection(h11.SERVER)
        async with stream:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    conn.receive_data(data)
                    if not data:
                        return
                    continue
                if not isinstance(event, h11.Request):
                    if isinstance(event, h11.ConnectionClosed):
                        return
                    continue
                start = trio.current_time()
                target = event.target.decode()
                status, ctype, body = self.page(target)
                headers = [("Content-Type", ctype), ("Content-Length", str(len(body)))]
                out = conn.send(h11.Response(status_code=status, headers=headers))
                out = (out or b"") + (conn.send(h11.Data(data=body)) or b"")
                out += conn.send(h11.EndOfMessage()) or b""
                await stream.send_all(out)
                self.log.append((target, start, trio.current_time()))
                while conn.their_state is not h11.DONE:
                    if conn.next_event() is h11.NEED_DATA:
                        data = await stream.receive_some(65536)
                        if not data:
                            return
                        conn.receive_data(data)
                conn.start_next_cycle()


async def test_a_site_on_an_ipv6_literal_is_crawled_politely_and_exported(
    tmp_path: Path,
) -> None:
    site = Site()
    data = tmp_path / "peer"
    async with trio.open_nursery() as nursery:
        await nursery.start(site.serve)
        config = CrawlConfig(
            data_dir=data,
            listen="127.0.0.1:0",
            politeness=PolitenessConfig(delay=DELAY, concurrency=4, robots_retry_base=0.05),
            fetch=FetchConfig(read_timeout=10.0),
        )
        peer: Peer = await nursery.start(Peer(config).run)
        peer.crawler.seed([f"http://[::1]:{site.port}/"])
        with trio.fail_after(30):
            await peer.crawler.wait_idle()
        peer.stop()
        with trio.fail_after(30):
            await peer.crawler.stopped.wait()
        nursery.cancel_scope.cancel()

    # Every page once, robots.txt first, /private/ never; one host, one request at a time.
    targets = [t for t, _, _ in site.log]
    assert targets[0] == "/robots.txt"
    pages = sorted(t for t in targets if "sitemap" not in t)  # a sitemap probe may come too
    assert pages == ["/", "/a.html", "/b.html", "/robots.txt"]
    for (_, _, end), (_, start, _) in zip(site.log, site.log[1:], strict=False):
        assert start - end >= DELAY * 0.9

    key = f"[::1]:{site.port}"
    conn = sqlite3.connect(data / "shard.sqlite3")
    assert {h for (h,) in conn.execute("SELECT DISTINCT host FROM pages")} == {key}
    assert {h for (h,) in conn.execute("SELECT host FROM hosts")} == {key}
    conn.close()
    out = tmp_path / "pages.jsonl"
    export([data], "jsonl", out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    rows = [r for r in rows if "sitemap" not in r["url"]]
    assert {(r["url"], r["title"]) for r in rows} == {
        (f"http://{key}/", "home"),
        (f"http://{key}/a.html", "page a"),
        (f"http://{key}/b.html", "page b"),
    }
    assert all(r["url_unicode"] == r["url"] for r in rows)
    assert {(r["encoding"], r["encoding_source"]) for r in rows} == {("utf-8", "header")}
