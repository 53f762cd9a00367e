"""What each ``--warc-level`` costs on real pages: CPU a page and the compression ratio.

    python bench/gzip_levels.py DIR [DIR...]      # every *.html under the directories

Each page is compressed as the WARC store compresses a record (``gzip_member`` of
``ubipy.store``: one gzip member, ISA-L at level 1, zlib at 2-9), the pages
in a seeded random order, and the whole set is repeated until it has taken a second of
CPU. Any copy of a real site does: the figures in docs/storage.md are rustdoc's HTML
(the Rust standard library's documentation, as rustup installs it).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ubipy.store import gzip_member


def measure(pages: list[bytes], compress: object) -> tuple[float, float]:
    """(microseconds of CPU a page, bytes in / bytes out)."""
    assert callable(compress)
    out = sum(len(compress(p)) for p in pages)
    rounds, t0 = 0, time.process_time()
    while time.process_time() - t0 < 1.0:
        for p in pages:
            compress(p)
        rounds += 1
    cpu = time.process_time() - t0
    return 1e6 * cpu / (rounds * len(pages)), sum(map(len, pages)) / out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("dirs", type=Path, nargs="+", help="directories of HTML pages")
    p.add_argument("--pages", type=int, default=400, help="pages sampled (default: 400)")
    p.add_argument("--seed", type=int, default=3)
    args = p.parse_args()
    files = sorted(f for d in args.dirs for f in d.rglob("*.html") if f.is_file())
    if not files:
        p.error("no *.html under the directories given")
    random.Random(args.seed).shuffle(files)
    pages = [f.read_bytes() for f in files[: args.pages]]
    mean = sum(map(len, pages)) / len(pages)
    print(f"{len(pages)} pages, mean {mean:,.0f} B\n")
    print("| --warc-level | compressor | µs a page | ratio |")
    print("|---:|---|---:|---:|")
    for level in range(1, 10):
        us, ratio = measure(pages, lambda b, level=level: gzip_member(b, level))
        name = "ISA-L 1" if level == 1 else f"zlib {level}"
        print(f"| {level} | {name} | {us:,.1f} | {ratio:.2f} |")
    us, ratio = measure(pages, lambda b: zlib.compress(b, 1, 31))
    print(f"| - | zlib 1 | {us:,.1f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
