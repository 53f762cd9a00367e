"""A real peer process crawling the synthetic web while strangers work its port: huge
length prefixes, a flood of bad frames, and more idle connections than it has file
descriptors. It keeps its memory, answers ``ubipy seed`` and ``status`` throughout,
logs a few lines rather than a traceback per event, and its crawl is complete."""

from __future__ import annotations

import contextlib
import re
import struct
from pathlib import Path

import trio

from tests.e2e.cluster import run_cli, start_peer_or_fail, status_json, stop_all
from ubipy.net import split_address
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.synthweb.referee import Referee
from ubipy.synthweb.server import serve
from ubipy.synthweb.truth import ground_truth

SPEC = WebSpec(seed=11, hosts=20, pages_per_host=15, crawl_delay=0.05)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


# The strangers' own addresses, one per attack: the peer turns an address whose
# connections keep failing away for a while (they are reset at once), and ``ubipy
# seed``/``status`` come from 127.0.0.1.
STRANGERS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")


async def open_connections(address: str, n: int, source: str) -> list[trio.SocketStream]:
    """Up to ``n`` connections from ``source``: those the peer lets in."""
    host, port = split_address(address)
    streams = []
    for _ in range(n):
        with contextlib.suppress(OSError):  # turned away
            streams.append(await trio.open_tcp_stream(host, port, local_address=source))
    return streams


async def closed_by_peer(stream: trio.SocketStream) -> bool:
    """Whether the peer has closed (or reset) the connection within a few seconds."""
    with trio.move_on_after(10):
        try:
            while await stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, OSError):
            pass
        return True
    return False


async def test_a_peer_shrugs_off_strangers_on_its_port(tmp_path: Path) -> None:
    web = SyntheticWeb(SPEC)
    truth = ground_truth(web, [web.seed_url()])
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        # 256 descriptors, as in the report: fewer than the idle connections below.
        peer = await start_peer_or_fail(
            nursery, tmp_path / "p", server.proxy_url, prefix=("prlimit", "--nofile=256:256")
        )
        try:
            pid = peer.proc.pid
            before = rss_kib(pid)

            # 200 strangers announce a 4 MiB frame and send the first 64 KiB of it.
            huge = await open_connections(peer.address, 200, STRANGERS[0])
            for s in huge:
                with contextlib.suppress(trio.BrokenResourceError, OSError):
                    await s.send_all(struct.pack(">I", 4 * 1024 * 1024 - 1) + b"x" * 65536)
            assert all([await closed_by_peer(s) for s in huge])
            for s in huge:
                await s.aclose()

            # One stranger sends 200,000 frames with bad tags: cut after the first.
            (flood,) = await open_connections(peer.address, 1, STRANGERS[1])
            with contextlib.suppress(trio.BrokenResourceError, OSError):
                await flood.send_all((struct.pack(">I", 33) + b"\x01" * 33) * 200_000)
            assert await closed_by_peer(flood)
            await flood.aclose()

            # 400 idle connections, more than the peer has descriptors for.
            idle = await open_connections(peer.address, 400, STRANGERS[2])
            seeds = tmp_path / "seeds.txt"
            seeds.write_text(web.seed_url() + "\n")
            with trio.fail_after(30):
                seeded = await run_cli(
                    "seed", "--peer", peer.address, "--secret", "s3cret", str(seeds)
                )
            assert seeded.returncode == 0, seeded.stderr.decode()
            with trio.fail_after(10):
                report = await status_json(peer.address)
            assert report["peers"]
            grown_mib = (rss_kib(pid) - before) / 1024
            assert grown_mib < 50, f"RSS grew by {grown_mib:.0f} MiB"

            with trio.fail_after(120):
                await server.log.wait_for(lambda lg: Referee(lg, web).requested() >= truth)
            for s in idle:
                await s.aclose()
        finally:
            await stop_all([peer])
        nursery.cancel_scope.cancel()

    referee = Referee(server.log, web)
    assert referee.requested() == truth
    log = peer.output.decode(errors="replace")
    assert "Traceback" not in log
    # A few lines per second of attack, not one per frame or per connection.
    stranger_lines = [line for line in log.splitlines() if any(f"{s}: " in line for s in STRANGERS)]
    assert len(stranger_lines) < 60, "\n".join(stranger_lines[:20])
    assert log.count("cannot accept connections") <= 2


async def test_a_join_address_that_is_no_peer_or_closed_is_said_so(tmp_path: Path) -> None:
    """--join naming a plain HTTP server and a closed port: not a silent cluster of
    one; each try says why, and the status says the peer is still joining."""
    web = SyntheticWeb(SPEC)
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        http_server = server.proxy_url.removeprefix("http://").rstrip("/")
        with trio.socket.socket() as closed:
            await closed.bind(("127.0.0.1", 0))
            closed_port = closed.getsockname()[1]
        peer = await start_peer_or_fail(
            nursery,
            tmp_path / "p",
            server.proxy_url,
            "--join",
            http_server,
            "--join",
            f"127.0.0.1:{closed_port}",
        )
        try:
            with trio.fail_after(15):
                await peer.wait_for(rb"join attempt 2:")
            with trio.fail_after(10):
                report = await status_json(peer.address)
            assert report["peers"][0]["joining"] >= 2
        finally:
            await stop_all([peer])
        nursery.cancel_scope.cancel()
    log = peer.output.decode(errors="replace")
    # The synthetic web's server hangs up on bytes that are no HTTP; another server
    # may answer them (a length over the cap) or say nothing: each is told as such.
    assert re.search(rf"join attempt \d+: {http_server}: [^\n]*not a ubipy peer", log)
    assert f"127.0.0.1:{closed_port}: cannot connect" in log
