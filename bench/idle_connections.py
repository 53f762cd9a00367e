"""What an idle kept-alive connection costs the crawler in memory, plain and over TLS.

    python bench/idle_connections.py                # 200 connections each way

A child process serves HTTP/1.1 with keep-alive on ``--count`` loopback ports (over TLS
with a certificate from a CA made for the run, trustme, in the TLS round); this process
fetches one page from each port through the client a peer makes (``make_client``:
the peer's own transport, every connection kept idle) and reports how much its
RSS grew, per connection. It sizes the transport's caps: ``max_idle`` (plain) and
``max_idle_tls``.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import ssl
import subprocess
import sys
import tempfile
from pathlib import Path

import trio

_BODY = b"x" * 2000


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


async def _answer(stream: trio.abc.Stream) -> None:
    buf = b""
    head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n"
    try:
        while data := await stream.receive_some(65536):
            buf += data
            while b"\r\n\r\n" in buf:
                _, buf = buf.split(b"\r\n\r\n", 1)
                await stream.send_all(head % len(_BODY) + _BODY)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


async def _serve(count: int, ca_dir: str | None) -> None:
    ctx = None
    if ca_dir is not None:
        import trustme

        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(Path(ca_dir) / "ca.pem"))
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert("127.0.0.1").configure_cert(ctx)

    async def handle(stream: trio.SocketStream) -> None:
        await _answer(trio.SSLStream(stream, ctx, server_side=True) if ctx else stream)

    async with trio.open_nursery() as nursery:
        ports = []
        for _ in range(count):
            serve = functools.partial(trio.serve_tcp, handle, 0, host="127.0.0.1")
            listeners = await nursery.start(serve)
            ports.append(listeners[0].socket.getsockname()[1])
        print(" ".join(map(str, ports)), flush=True)
        await trio.sleep_forever()


async def _fetch_each(ports: list[int], tls: bool, ca_bundle: Path) -> float:
    """RSS per idle connection, in KB: one page from each port, every connection kept."""
    from ubipy.config import FetchConfig
    from ubipy.fetch import make_client

    config = FetchConfig(ca_bundle=ca_bundle if tls else None)
    scheme = "https" if tls else "http"
    async with make_client(config, "ubipy-bench") as client:
        await client.get(f"{scheme}://127.0.0.1:{ports[0]}/")  # warm: imports, TLS context
        gc.collect()
        before = _rss_mb()
        for port in ports[1:]:
            await client.get(f"{scheme}://127.0.0.1:{port}/")
        gc.collect()
        return (_rss_mb() - before) * 1000 / (len(ports) - 1)


def _measure(count: int, tls: bool) -> float:
    with tempfile.TemporaryDirectory(prefix="ubipy-idle-") as ca_dir:
        cmd = [sys.executable, __file__, "--serve", str(count)]
        cmd += ["--ca-dir", ca_dir] if tls else []
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
        try:
            assert proc.stdout is not None
            ports = [int(p) for p in proc.stdout.readline().split()]
            return trio.run(_fetch_each, ports, tls, Path(ca_dir) / "ca.pem")
        finally:
            proc.kill()
            proc.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--count", type=int, default=200, help="idle connections each way (the TLS cap is 256)"
    )
    p.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    p.add_argument("--ca-dir", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.serve:
        trio.run(_serve, args.serve, args.ca_dir)
        return
    for tls in (False, True):
        kb = _measure(args.count, tls)
        kind = "TLS" if tls else "plain"
        print(f"{kind}: {args.count} idle connections, {kb:.1f} KB of RSS each")


if __name__ == "__main__":
    main()
