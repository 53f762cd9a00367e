"""The one typed configuration of a peer, passed down to every component.

There are no global setting strings: each component reads the fields it needs
from this object, and the CLI is the only place that builds one from flags.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

from ubipy import PROJECT_URL, __version__


class Scope(enum.Enum):
    """Which discovered URLs a crawl follows, relative to its seeds."""

    HOST = "host"
    DOMAIN = "domain"
    ANY = "any"


def default_user_agent() -> str:
    return f"ubipy/{__version__} (+{PROJECT_URL})"


@dataclass(frozen=True, slots=True)
class CrawlConfig:
    """Everything a peer needs to know to crawl politely."""

    data_dir: Path = Path("ubipy-data")
    listen: str = "127.0.0.1:7000"
    # Politeness: seconds between the end of one request to a host and the
    # start of the next; robots.txt Crawl-delay raises it, never lowers it.
    delay: float = 1.0
    # Crawl-delays above this are clamped so one host cannot park a slot forever.
    max_crawl_delay: float = 60.0
    concurrency: int = 64
    max_depth: int | None = None
    # Trap guards: a per-host page budget, and URLs whose path repeats one
    # segment more than this many times are refused (/a/b/a/b/a/b/a/...).
    max_pages_per_host: int | None = None
    max_path_repeats: int = 3
    scope: Scope = Scope.DOMAIN
    user_agent: str = field(default_factory=default_user_agent)
    # Fetch limits.
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    max_body_bytes: int = 10 * 1024 * 1024
    # The whole request, however slowly the server drips bytes.
    fetch_deadline: float = 120.0
    # 5xx, 429, time-outs and broken connections are retried this many times,
    # after an exponential back-off from retry_base or the server's Retry-After
    # (capped at max_retry_after); the host waits meanwhile.
    max_retries: int = 2
    retry_base: float = 2.0
    max_retry_after: float = 600.0
    store_bodies: bool = True
    proxy: str | None = None
    # robots.txt that answers 5xx or cannot be reached: retried with exponential
    # back-off from this base, then the host's URLs are given up.
    robots_retry_base: float = 30.0
    robots_max_attempts: int = 3
    # The admission front cache: exact recent URLs kept in memory.
    recent_cache_size: int = 65_536
    # Bloom filter sizing: capacity grows by scaling, error rate per slice.
    bloom_initial_capacity: int = 1_000_000
    bloom_error_rate: float = 0.001
    # Per host, at most this many frontier entries are held in memory, and at
    # most frontier_memory over all hosts (the rest stays on disk).
    host_window: int = 64
    frontier_memory: int = 200_000
    # Store writes are grouped: a transaction closes at this many pages or
    # after this many seconds, whichever comes first.
    commit_every_pages: int = 64
    commit_interval: float = 0.05
    # While the shard refuses writes (disk full, read-only), retry this often.
    storage_retry: float = 5.0
    # The cluster: a secret authenticates every frame between peers (without
    # one a peer stays on loopback); join any one live member's address.
    secret: str | None = None
    join: tuple[str, ...] = ()
    # Forwarding: a batch leaves at this many URLs or after a linger of
    # batch_linger per other member, at most batch_linger_max. A peer spreads its
    # foreign links over one outbox per other member, so with a fixed linger the
    # batches thin out as the cluster grows (one or two URLs a frame at a few dozen
    # pages a second); a few seconds are nothing to a URL that waits its turn in a
    # frontier anyway.
    batch_size: int = 50
    batch_linger: float = 0.5
    batch_linger_max: float = 5.0
    batch_retry: float = 2.0
    # Copies of each owner's frontier and history on this many peers in all
    # (1: none; 2: the owner and the next peer clockwise).
    replicas: int = 1
    # Without replicas, a dead peer's hosts wait this long for it to come back with
    # its history before others crawl them (and may fetch again what it had).
    rejoin_grace: float = 30.0
    # The control centre (dashboard, /api/status, /metrics, seed and stop over
    # HTTP) on this address; loopback only unless control_public.
    control: str | None = None
    control_public: bool = False
    # Membership timings (SWIM), memberlist's LAN profile by default.
    probe_interval: float = 1.0
    probe_timeout: float = 0.5
    indirect_checks: int = 3
    suspicion_mult: int = 4
    push_pull_interval: float = 30.0
    # A token the synthetic web's referee (and any server log) can attribute
    # requests by; defaults to the peer id.
    peer_token: str | None = None

    def agent_string(self, peer_id: str) -> str:
        """The User-Agent sent with every request, naming the peer."""
        token = self.peer_token or peer_id
        ua = self.user_agent
        if ua.endswith(")"):
            return f"{ua[:-1]}; peer={token})"
        return f"{ua} (peer={token})"
