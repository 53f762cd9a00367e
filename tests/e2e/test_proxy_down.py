"""A peer process whose --proxy is down at its start waits for it, and crawls the
whole web once it is up: a proxy down for about 90 s gave every host it was starting
up as "robots.txt unreachable" for a day (QA). The web server's log is the judge."""

from __future__ import annotations

import functools
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from tests.e2e.cluster import start_peer, status_json, stop_all
from tests.e2e.test_single_peer import assert_perfect
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.synthweb.server import serve
from ubipy.synthweb.truth import ground_truth


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _status_until(address: str, ready: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The peer's figures once ``ready`` says so, asked five times a second (its
    status is the event: use trio.fail_after around it)."""
    while True:
        [figures] = (await status_json(address))["peers"]
        if ready(figures):
            return dict(figures)
        await trio.sleep(0.2)


async def test_a_peer_waits_for_its_proxy_then_crawls_the_whole_web(tmp_path: Path) -> None:
    web = SyntheticWeb(WebSpec(seed=5, hosts=4, pages_per_host=6))
    seed = web.seed_url()
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(seed + "\n")
    port = _closed_port()
    async with trio.open_nursery() as nursery:
        # --robots-retry 0.05: the three attempts at the seed host's robots.txt took
        # 0.15 s, and gave it up.
        peer = await start_peer(
            nursery, tmp_path / "data", f"http://127.0.0.1:{port}", "--seeds", str(seeds)
        )
        with trio.fail_after(30):
            figures = await _status_until(peer.address, lambda f: f.get("proxy_down", 0) >= 3)
        assert figures["pages"] == 0 and figures["skipped"] == 0  # nothing given up
        server = await nursery.start(functools.partial(serve, web, port=port))
        with trio.fail_after(60):
            await _status_until(peer.address, lambda f: bool(f.get("idle")))
            await server.wait_idle()
        await stop_all([peer])
        nursery.cancel_scope.cancel()
    truth = ground_truth(web, [seed])
    assert_perfect(server.log, web, truth, 0.01)  # start_peer's --delay
