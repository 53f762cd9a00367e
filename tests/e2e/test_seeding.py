"""``ubipy seed`` of a file larger than one frame may carry, against a real peer process
on loopback: it goes in several frames, every URL is admitted, and the one summary
line counts them all."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import trio

from tests.e2e.cluster import run_cli, start_peer, stop_all
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.synthweb.server import serve
from ubipy.wire import DEFAULT_MAX_FRAME

# Long URLs (a seed may be up to 2,048 characters), so that few of them make a file
# over the 4 MiB cap and the peer admits them in a blink.
URLS = 2_200
LENGTH = 2_000


def seeded_urls(data: Path) -> set[str]:
    conn = sqlite3.connect(data / "shard.sqlite3")
    try:
        return {u for (u,) in conn.execute("SELECT url FROM frontier WHERE url LIKE '%/seeded/%'")}
    finally:
        conn.close()


async def test_a_seed_file_over_the_frame_cap_is_sent_whole(tmp_path: Path) -> None:
    web = SyntheticWeb(WebSpec(seed=3, hosts=6, pages_per_host=4))
    hosts = web.host_names()
    # On the web's few hosts, all 404s: the peer need not fetch them all before the
    # test stops it.
    heads = [f"http://{hosts[i % len(hosts)]}/seeded/{i:06d}/" for i in range(URLS)]
    urls = [head + "p" * (LENGTH - len(head)) for head in heads]
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(
        "# over the cap\n" + "\n".join(urls) + f"\nhttp://user:pw@{hosts[0]}/from-a-browser\n"
    )
    assert seeds.stat().st_size > DEFAULT_MAX_FRAME

    data = tmp_path / "peer"
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        peer = await start_peer(nursery, data, server.proxy_url)
        try:
            with trio.fail_after(120):
                done = await run_cli(
                    "seed", str(seeds), "--peer", peer.address, "--secret", "s3cret"
                )
        finally:
            await stop_all([peer])
        nursery.cancel_scope.cancel()

    out, err = done.stdout.decode(), done.stderr.decode()
    assert (done.returncode, err) == (0, ""), err
    assert out.splitlines() == [
        f"sent {URLS + 1} seeds to {peer.address}: {URLS + 1} new there, "
        "0 forwarded to their owners; credentials removed from 1"
    ]
    assert "Traceback" not in peer.output.decode()
    assert peer.proc.returncode == 0
    stored = seeded_urls(data)
    assert stored == set(urls)
