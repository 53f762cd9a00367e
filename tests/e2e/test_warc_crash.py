"""A real peer killed with SIGKILL while it writes its WARC files, and restarted: every
file passes ``warcio check``, every committed capture's offset holds its record, and
every answered page in the shard has one."""

from __future__ import annotations

import random
import signal
import sqlite3
import sys
from pathlib import Path

import trio

from tests.e2e.cluster import start_quiet_peer
from ubipy.store.warcrecords import read_record
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.synthweb.server import serve

KILLS = 3


async def test_kill_9_mid_write_leaves_whole_files_and_true_offsets(tmp_path: Path) -> None:
    rng = random.Random(2026)
    web = SyntheticWeb(WebSpec(seed=11, pages_per_host=30, latency=0.01, crawl_delay=0.05))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(web.seed_url() + "\n")
    data = tmp_path / "peer"
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        log = server.log
        proc = await start_quiet_peer(server.proxy_url, data, seeds, "--warc-size", "40000")
        try:
            for _ in range(KILLS):
                target = len(log) + rng.randint(10, 40)
                with trio.fail_after(60):
                    await log.wait_for(lambda lg, t=target: len(lg) >= t)
                proc.send_signal(signal.SIGKILL)
                with trio.fail_after(30):
                    await proc.wait()
                proc = await start_quiet_peer(server.proxy_url, data, None, "--warc-size", "40000")
            # Enough requests after the last restart that, robots.txt asked again
            # aside (12 hosts), the clean stop commits more than 20 pages.
            target = len(log) + 40
            with trio.fail_after(60):
                await log.wait_for(lambda lg: len(lg) >= target)
            proc.send_signal(signal.SIGINT)
            with trio.fail_after(30):
                assert await proc.wait() == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        nursery.cancel_scope.cancel()

    warc = data / "warc"
    # A clean stop closes the open file: every file has its final name, and its index.
    assert not list(warc.glob("*.open"))
    files = sorted(warc.glob("*.warc.gz"))
    assert files and all(f.with_name(f.name + ".cdxj").is_file() for f in files)
    check = await trio.run_process(
        [sys.executable, "-m", "warcio.cli", "check", *map(str, files)],
        capture_stdout=True,
        check=False,
    )
    assert check.returncode == 0, check.stdout
    with sqlite3.connect(data / "shard.sqlite3") as conn:
        captures = conn.execute("SELECT file, offset, length, kind FROM warc").fetchall()
        answered = conn.execute(
            "SELECT count(*) FROM pages p WHERE status IS NOT NULL AND error IS NULL "
            "AND EXISTS (SELECT 1 FROM warc w WHERE w.fp = p.fp AND w.at = p.fetched_at)"
        ).fetchone()[0]
        all_answered = conn.execute(
            "SELECT count(*) FROM pages WHERE status IS NOT NULL AND error IS NULL"
        ).fetchone()[0]
    assert answered == all_answered > 20
    for file, offset, length, kind in captures:
        with (data / "warc" / file).open("rb") as f:
            f.seek(offset)
            record, used = read_record(f.read(length))
        assert used == length and record.type == ("revisit" if kind == 1 else "response")
