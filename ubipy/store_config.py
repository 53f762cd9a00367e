"""The configuration's section about the shard and the files beside it: transactions,
what is held in memory, where page bodies go. Re-exported by :mod:`ubipy.config`, the
one place to import them from."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from ubipy.errors import ConfigError
from ubipy.options import option
from ubipy.validation import at_least, positive, show

# The seen-URL filter's first slice at most (a few times the default's 1.7 MiB is
# already millions of URLs; it scales as they come).
_BLOOM_MAX_BYTES = 4 << 30
# Each slice's error rate is this share of the one before; the first's, its
# complement's share of bloom_error_rate, so that all slices add up to it at most.
BLOOM_TIGHTENING = 0.9


class BodyStore(enum.Enum):
    """Where page bodies are kept (docs/storage.md)."""

    # Appended to WARC files in DATA/warc as pages are committed, rotated at
    # --warc-size; the shard keeps each page's file and offset.
    WARC = "warc"
    # zlib-compressed in the shard's own tables (before #20).
    SHARD = "shard"


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """How the shard is written and how much of it is held in memory."""

    # A transaction closes at commit_every_pages pages or after commit_interval,
    # whichever comes first: one fsync for many pages; one of fewer than an eighth of
    # commit_every_pages stays open 1 s (a slow crawl's). Past that it goes with the
    # next request answered, or a second later if none is (CommitTiming). Sooner when
    # the crawler has a free slot and nothing ready: the pages' links may be what it
    # waits for; and when the bodies waiting reach 32 MiB. Each commit rewrites the
    # shard's pages that its rows touched, so fewer, larger ones cost less a page
    # (bench/speed.py at 64 in flight: 256 against 64, about 5% less CPU a page; 512
    # against 256, 2-7% less, where commit_interval closes most commits first).
    commit_every_pages: int = option(512, help="pages stored in one transaction at most")
    commit_interval: float = option(
        0.25,
        help="seconds a transaction stays open once it holds commit_every_pages / 8 pages "
        "(1 s, or this if longer, with fewer): it closes with the next request answered, "
        "a second later at most (sooner when the crawler has nothing else to do)",
    )
    # While the shard refuses writes (disk full, read-only).
    storage_retry: float = option(
        5.0, help="seconds between attempts at a write the shard refused (disk full, read-only)"
    )
    recent_cache_size: int = option(
        65_536, help="exact recent URLs kept in memory in front of the Bloom filter"
    )
    # The filter grows by scaling; the error rate is per slice.
    bloom_initial_capacity: int = option(
        1_000_000, help="URLs the seen-URL Bloom filter holds before it grows"
    )
    bloom_error_rate: float = option(
        0.001, help="the Bloom filter's false-positive rate, per slice"
    )
    # The rest of the frontier stays on disk.
    host_window: int = option(64, help="frontier entries held in memory per host at most")
    frontier_memory: int = option(
        200_000, help="frontier entries held in memory over all hosts at most"
    )
    # A host's slot: its robots.txt rules, pace and window, 2-3 KB (ubipy/fetch/idlehosts.py).
    idle_hosts: int = option(
        50_000,
        help="hosts with nothing to ask kept in memory at most; beyond, the longest idle "
        "are forgotten, and ask robots.txt again if they have URLs again",
    )
    bodies: BodyStore = option(
        BodyStore.WARC,
        flag="--bodies",
        help="where page bodies are kept: warc, as WARC records appended to DATA/warc "
        "as pages are stored; shard, compressed in the shard (default: {default})",
    )
    # What Heritrix and Common Crawl rotate at.
    warc_size: int = option(
        1_000_000_000,
        flag="--warc-size",
        metavar="BYTES",
        help="close a WARC file and begin the next once it holds this many bytes "
        "(default: {default})",
    )
    # A slow crawl (revisits, mostly small records) kept one file open for weeks, and
    # replay tools see a file's pages once it is closed and indexed.
    warc_max_age: float = option(
        86_400.0,
        flag="--warc-max-age",
        metavar="SECONDS",
        help="close a WARC file and begin the next once it has been open this long, at "
        "the next commit after (default: {default})",
    )

    # Compression is most of what a WARC record costs: the fastest level by default.
    warc_level: int = option(
        1,
        flag="--warc-level",
        metavar="N",
        help="gzip level of WARC records, 1 (fastest) to 9 (smallest) (default: {default})",
    )

    def __post_init__(self) -> None:
        positive(self, "commit_interval", "storage_retry", "warc_max_age")
        if not 1 <= self.warc_level <= 9:
            raise ConfigError(f"must be 1 to 9, not {show(self.warc_level)}", "warc_level")
        at_least(
            self,
            1,
            "commit_every_pages",
            "recent_cache_size",
            "bloom_initial_capacity",
            "host_window",
            "frontier_memory",
            "warc_size",
        )
        at_least(self, 0, "idle_hosts")
        if not 0 < self.bloom_error_rate < 1:
            rate = show(self.bloom_error_rate)
            raise ConfigError(f"must be between 0 and 1, not {rate}", "bloom_error_rate")
        # A filter too big to allocate aborted the process, past any error handling.
        first = self.bloom_error_rate * (1 - BLOOM_TIGHTENING)  # the first slice's rate
        bits = -math.log(first) / math.log(2) ** 2 * min(self.bloom_initial_capacity, 2**62)
        if bits / 8 > _BLOOM_MAX_BYTES:
            raise ConfigError(
                f"makes a Bloom filter of {bits / 8 / (1 << 30):.1f} GiB at the start, with "
                f"bloom_error_rate {show(self.bloom_error_rate)}; at most "
                f"{_BLOOM_MAX_BYTES >> 30} GiB (the filter grows by itself as URLs come)",
                "bloom_initial_capacity",
            )
