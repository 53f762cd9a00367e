"""The WARC body store (#20) under a long crawl, without a network: pages with
synthesised 20-60 KB HTML bodies committed in batches of 64 through the shard's
transaction (URLs admitted, page rows, bodies), as a peer commits them.

Reports, for ``--pages`` pages with ``--bodies warc`` (default 1,000,000): pages/s and
MB/s written (WARC bytes), RSS sampled through the run (it should stay flat), and
per-page CPU. Then, over ``--compare`` pages each, disk per page with WARC files
against ``--bodies shard``, and the shard's size per page without bodies against with
(the issue asks at least 10x smaller).

    python bench/warc_store.py [--pages 1000000] [--compare 20000] [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import resource
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from ubipy.store import HttpHead, NewURL, PageRecord, Shard

BATCH = 64
_WORDS = (  # noqa: SIM905
    "the of and to in is for on that with as by this are from at be or an it was which "
    "page crawler archive web server request response index host link content data "
    "peer shard record commit offset file gzip digest revisit version header body "
    "html title paragraph section article news update price product review"
).split()


def _bodies(rng: random.Random, n: int = 64) -> list[bytes]:
    """A pool of HTML bodies of 20-60 KB: tags, links and prose of common words (about
    as compressible as real pages, 4-6x with zlib)."""
    pool = []
    for i in range(n):
        size = rng.randint(20_000, 60_000)
        parts = [f"<html><head><title>Page {i}</title></head><body>"]
        length = len(parts[0])
        while length < size:
            words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 40)))
            link = f'<a href="/p/{rng.randrange(10**6)}.html">{rng.choice(_WORDS)}</a>'
            piece = f'<p class="c{rng.randrange(20)}">{words} {link} {rng.random():.6f}</p>\n'
            parts.append(piece)
            length += len(piece)
        parts.append("</body></html>")
        pool.append("".join(parts).encode())
    return pool


def _head(length: int) -> HttpHead:
    return HttpHead(
        200,
        "OK",
        "HTTP/1.1",
        (
            (b"Date", b"Wed, 02 Dec 2026 10:00:00 GMT"),
            (b"Server", b"synth"),
            (b"Content-Type", b"text/html; charset=utf-8"),
            (b"Content-Length", str(length).encode()),
            (b"ETag", b'"abc"'),
        ),
        (
            (b"Host", b"h.test"),
            (b"Accept", b"*/*"),
            (b"Accept-Encoding", b"gzip, deflate"),
            (b"User-Agent", b"ubipy/bench (+https://example.invalid; peer=bench)"),
        ),
    )


def _rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1e6


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def _shard_size(data: Path) -> int:
    conn = sqlite3.connect(data / "shard.sqlite3")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return sum(p.stat().st_size for p in data.glob("shard.sqlite3*"))


def run(data: Path, pages: int, warc: bool, samples: int = 40) -> dict[str, Any]:
    rng = random.Random(20)
    pool = _bodies(rng)
    shard = Shard.open(data, warc_size=10**9 if warc else None)
    with shard.transaction():
        shard.set_meta("peer_id", "00000000000be4c4")  # as a peer's first start does
    # (pages written, seconds since the start, RSS in MB) through the run.
    rss: list[tuple[int, float, float]] = []
    every = max(pages // samples, BATCH)
    wall0, cpu0 = time.monotonic(), _cpu()
    body_bytes = 0
    for start in range(0, pages, BATCH):
        n = min(BATCH, pages - start)
        urls = [
            NewURL(fp, f"http://h{fp % 5000}.test/p/{fp}.html", f"h{fp % 5000}.test", 1)
            for fp in range(start + 1, start + n + 1)
        ]
        now = time.time()
        records = []
        for u in urls:
            body = pool[u.fp % len(pool)]
            body_bytes += len(body)
            records.append(
                PageRecord(
                    u.fp,
                    u.url,
                    u.host,
                    200,
                    "text/html",
                    len(body),
                    False,
                    f"Page {u.fp}",
                    now,
                    None,
                    '"abc"',
                    f"{u.fp:016x}",
                    1,
                    None,
                    body,
                    encoding="utf-8",
                    encoding_source="header",
                    head=_head(len(body)),
                )
            )
        with shard.transaction():
            shard.add_to_frontier(urls)
            shard.record_pages(records)
        if (start // BATCH) % (every // BATCH) == 0:
            rss.append((start + n, round(time.monotonic() - wall0, 2), round(_rss_mb(), 1)))
    wall, cpu = time.monotonic() - wall0, _cpu() - cpu0
    shard.close()
    rss.append((pages, round(time.monotonic() - wall0, 2), round(_rss_mb(), 1)))
    # Pages a second between two samples: a steady writer keeps them level.
    rates = [(b[0] - a[0]) / (b[1] - a[1]) for a, b in itertools.pairwise(rss[:-1]) if b[1] > a[1]]
    warc_bytes = _size(data / "warc") if warc else 0
    shard_bytes = _shard_size(data)
    return {
        "bodies": "warc" if warc else "shard",
        "pages": pages,
        "seconds": round(wall, 1),
        "pages_per_s": round(pages / wall, 1),
        "cpu_ms_per_page": round(1000 * cpu / pages, 3),
        "body_mb_per_s": round(body_bytes / wall / 1e6, 1),
        "written_mb_per_s": round((warc_bytes + shard_bytes) / wall / 1e6, 1),
        "warc_bytes_per_page": round(warc_bytes / pages),
        "shard_bytes_per_page": round(shard_bytes / pages),
        "disk_bytes_per_page": round((warc_bytes + shard_bytes) / pages),
        "mean_body_bytes": round(body_bytes / pages),
        "window_pages_per_s": [round(r, 1) for r in rates],
        "window_rate_min_max": [round(min(rates), 1), round(max(rates), 1)] if rates else None,
        "rss_min_max_mb": [min(r[2] for r in rss), max(r[2] for r in rss)],
        "samples": rss,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--pages", type=int, default=1_000_000, help="pages of the long WARC run")
    p.add_argument(
        "--compare", type=int, default=20_000, help="pages of each comparison run (0: none)"
    )
    p.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ubipy-warc-", dir=args.dir))
    out: dict[str, Any] = {}
    try:
        if args.compare:
            for warc in (True, False):
                name = "warc" if warc else "shard"
                out[f"compare_{name}"] = r = run(base / f"cmp-{name}", args.compare, warc)
                print(json.dumps(r), flush=True)
            w, s = out["compare_warc"], out["compare_shard"]
            out["shard_smaller_x"] = round(s["shard_bytes_per_page"] / w["shard_bytes_per_page"], 1)
            out["disk_warc_over_shard"] = round(
                w["disk_bytes_per_page"] / s["disk_bytes_per_page"], 3
            )
            print(json.dumps({k: out[k] for k in ("shard_smaller_x", "disk_warc_over_shard")}))
            shutil.rmtree(base / "cmp-warc")
            shutil.rmtree(base / "cmp-shard")
        if args.pages:
            out["long"] = r = run(base / "long", args.pages, True)
            print(json.dumps(r), flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
