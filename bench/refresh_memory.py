"""What a continuous crawl's pages cost a peer that holds them: memory, and the time
CPython's full garbage collections take once they are loaded.

    python -m bench.refresh_memory                     # a million pages, 10,000 hosts
    python -m bench.refresh_memory --pages 200000 --hosts 2000

A shard in a temporary directory (removed at the end) gets ``--pages`` revisit rows
(histories, validators, due times: what a peer that crawled them keeps) and the
lastmod a sitemap gave each (lastmod hints are on by default), then a fresh
refresher loads them as a restarted peer does (its collector settled as ``ubipy peer``
settles it, the pages handed to the politeness scheduler), and plans once. Reported: the
objects the cyclic garbage collector tracks for them (each full collection goes through
every one), the time a full collection takes (``gc.collect()``, the median of three: the
event loop stands still that long whenever one comes due, and a peer's probe time-out is
half a second), the resident memory the pages added, and the load's and the plan's CPU.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from bench.memory import rss_mb
from ubipy.config import CrawlConfig, RecrawlConfig, RefreshPolicy
from ubipy.fetch import Scheduler, UrlFilter
from ubipy.peer import Refresher, settle_collector
from ubipy.store import Lastmod, RefreshRow, Shard

_CHUNK = 10_000


def _rows(pages: int, hosts: int, now: float) -> list[RefreshRow]:
    rng = random.Random(7)
    rows = []
    for i in range(pages):
        host = f"h{i % hosts}.example"
        last = now - rng.uniform(0, 1e5)
        rows.append(
            RefreshRow(
                fp=i + 1,
                url=f"http://{host}/articles/{i}/index.html",
                host=host,
                depth=rng.randint(1, 8),
                visits=rng.randint(1, 40),
                changes=rng.randint(0, 5),
                observed=rng.uniform(1e3, 1e6),
                last_visit=last,
                due=last + rng.uniform(60, 86_400),
                importance=rng.random(),
                etag=f'"{rng.getrandbits(64):x}"',
                last_modified="Tue, 01 Dec 2026 10:00:00 GMT",
                digest=f"sha1:{rng.getrandbits(160):040X}",
            )
        )
    return rows


async def measure(pages: int, hosts: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="ubipy-refresh-memory-") as tmp:
        data = Path(tmp)
        config = CrawlConfig(
            data_dir=data, recrawl=RecrawlConfig(recrawl=True, policy=RefreshPolicy.HISTORY)
        )
        shard = Shard.open(data)
        rows = _rows(pages, hosts, time.time())
        for i in range(0, pages, _CHUNK):
            with shard.transaction():
                chunk = rows[i : i + _CHUNK]
                shard.save_refresh(chunk, ())
                shard.save_lastmods([Lastmod(r.fp, r.url, r.host, "2026-11-01") for r in chunk])
        del rows
        scheduler = Scheduler.of(config, loader=lambda host, after, limit: [])
        refresher = Refresher(config, shard, lambda: scheduler, UrlFilter())
        gc.collect()
        settle_collector()
        tracked0, rss0 = len(gc.get_objects()), rss_mb()
        cpu0 = time.process_time()
        refresher.load()
        cpu1 = time.process_time()
        refresher.plan()
        cpu2 = time.process_time()
        gc.collect()
        tracked = len(gc.get_objects()) - tracked0
        rss = rss_mb() - rss0
        passes = []
        for _ in range(3):
            t = time.perf_counter()
            gc.collect()
            passes.append(time.perf_counter() - t)
        shard.close()
        return {
            "pages": pages,
            "hosts": hosts,
            "tracked_objects": tracked,
            "full_collection_ms": 1000 * statistics.median(passes),
            "rss_mib": rss,
            "bytes_a_page": rss * 2**20 / pages,
            "load_cpu_s": cpu1 - cpu0,
            "plan_cpu_s": cpu2 - cpu1,
        }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--pages", type=int, default=1_000_000)
    p.add_argument("--hosts", type=int, default=10_000)
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args(argv)
    f = trio.run(measure, args.pages, args.hosts)
    print(
        f"{f['pages']:,} pages on {f['hosts']:,} hosts: {f['tracked_objects']:,} objects "
        f"tracked by the garbage collector, a full collection {f['full_collection_ms']:.0f} ms; "
        f"{f['rss_mib']:.0f} MiB resident ({f['bytes_a_page']:.0f} bytes a page); "
        f"load {f['load_cpu_s']:.1f} s of CPU, a plan {f['plan_cpu_s']:.1f} s"
    )
    print(f"reproduce: python -m bench.refresh_memory --pages {args.pages} --hosts {args.hosts}")
    if args.json is not None:
        args.json.write_text(json.dumps(f, indent=2) + "\n")


if __name__ == "__main__":
    main()
