"""The one typed configuration of a peer, passed down to every component.

There are no global setting strings: each component reads the section it needs
from this object (``config.politeness.delay``). Each option is declared once, here,
with its help and its flag if it has one; the command line and the config file
(``ubipy peer --config FILE``, a TOML table per section) are made from these
declarations by :mod:`ubipy.options`. Every section checks its values when it is
made and raises :class:`~ubipy.errors.ConfigError`, naming the option.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from pathlib import Path

from ubipy import PROJECT_URL, __version__
from ubipy.errors import ConfigError
from ubipy.options import option

__all__ = [
    "BoundsConfig",
    "ControlConfig",
    "CrawlConfig",
    "FetchConfig",
    "ForwardingConfig",
    "PolitenessConfig",
    "ReplicationConfig",
    "Scope",
    "StoreConfig",
    "SwimConfig",
    "default_user_agent",
]


class Scope(enum.Enum):
    """Which discovered URLs a crawl follows, relative to its seeds."""

    HOST = "host"
    DOMAIN = "domain"
    ANY = "any"


def default_user_agent() -> str:
    return f"ubipy/{__version__} (+{PROJECT_URL})"


def _show(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value)


def _at_least(section: object, low: int, *names: str, infinite: bool = False) -> None:
    """``infinite``: inf is a meaningful value of these (no cap), not a slip."""
    for name in names:
        value = getattr(section, name)
        # Written so that NaN fails too; None is "no limit".
        if value is not None and not value >= low:
            raise ConfigError(f"must be >= {low}, not {_show(value)}", name)
        _finite(value, name, f">= {low}", infinite)


def _positive(section: object, *names: str) -> None:
    for name in names:
        value = getattr(section, name)
        if not value > 0:
            raise ConfigError(f"must be > 0, not {_show(value)}", name)
        _finite(value, name, "> 0", False)


def _finite(value: object, name: str, bound: str, infinite: bool) -> None:
    if value == math.inf and not infinite:
        raise ConfigError(f"must be {bound} and finite, not inf", name)


@dataclass(frozen=True, slots=True)
class PolitenessConfig:
    """How hard a host is asked: the delay between its requests, the requests in
    flight over all hosts, and robots.txt's retries."""

    # From the end of one request to a host to the start of the next; robots.txt
    # Crawl-delay raises it, never lowers it.
    delay: float = option(
        1.0,
        flag="--delay",
        metavar="SECONDS",
        help="politeness delay between requests to one host; robots.txt Crawl-delay can "
        "raise it (default: {default})",
    )
    # So that one host cannot park a slot forever.
    max_crawl_delay: float = option(
        60.0, help="a robots.txt Crawl-delay longer than this many seconds is cut to it"
    )
    concurrency: int = option(
        64,
        flag="--concurrency",
        metavar="N",
        help="requests in flight at once, over all hosts (default: {default})",
    )
    # A robots.txt that answers 5xx or cannot be reached: its host's URLs wait, and
    # are given up after the last attempt.
    robots_retry_base: float = option(
        30.0,
        flag="--robots-retry",
        metavar="SECONDS",
        help="first wait before asking again for a robots.txt that failed with 5xx or "
        "could not be reached; it doubles each time, {robots_max_attempts} attempts in all "
        "(default: {default})",
    )
    robots_max_attempts: int = option(
        3, help="attempts at a failing robots.txt before its host's URLs are given up"
    )
    # A delay that listens to the server (ubipy/fetch/throttle.py): a slow host gets
    # fewer requests, an overloaded one (503, 429) is left alone longer and longer.
    delay_factor: float = option(
        1.0,
        flag="--delay-factor",
        metavar="N",
        help="a host waits N times its response time between two requests, never less "
        "than --delay or its Crawl-delay (Heritrix's delay factor; 1 is Scrapy "
        "AutoThrottle's default); 0 turns it off (default: {default})",
    )
    max_delay: float = option(
        30.0,
        flag="--max-delay",
        metavar="SECONDS",
        help="the longest delay a host's response time or its 503/429 back-off may ask "
        "(--delay, Crawl-delay and Retry-After have their own limits) (default: {default})",
    )
    backoff_base: float = option(
        2.0,
        help="a host that answers 503 or 429 without Retry-After waits this many seconds, "
        "doubled at each such answer in a row (up to max_delay); another answer ends it",
    )

    def __post_init__(self) -> None:
        _at_least(self, 0, "delay", "robots_retry_base")
        _at_least(self, 0, "max_crawl_delay", infinite=True)
        _at_least(self, 1, "concurrency", "robots_max_attempts")
        _at_least(self, 0, "delay_factor", "backoff_base")
        _at_least(self, 0, "max_delay", infinite=True)


@dataclass(frozen=True, slots=True)
class BoundsConfig:
    """Where a crawl goes and how far: its scope, depth, and the trap guards."""

    scope: Scope = option(
        Scope.DOMAIN,
        flag="--scope",
        help="follow links to the seeds' hosts only, their registered domains, or anywhere "
        "(default: {default})",
    )
    max_depth: int | None = option(
        None,
        flag="--max-depth",
        metavar="N",
        help="follow links at most N hops from a seed (default: no limit)",
    )
    max_pages_per_host: int | None = option(
        None,
        flag="--max-pages-per-host",
        metavar="N",
        help="fetch at most N pages from any one host, a bound on crawler traps "
        "(default: no limit)",
    )
    # /a/b/a/b/a/b/a/...
    max_path_repeats: int = option(
        3,
        flag="--max-path-repeats",
        metavar="N",
        help="refuse URLs whose path repeats one segment more than N times, as traps do "
        "(default: {default})",
    )

    def __post_init__(self) -> None:
        _at_least(self, 0, "max_depth")
        _at_least(self, 1, "max_pages_per_host", "max_path_repeats")


@dataclass(frozen=True, slots=True)
class FetchConfig:
    """How one request is made: identity, time-outs, sizes, retries, proxy."""

    user_agent: str = option(
        factory=default_user_agent,
        flag="--user-agent",
        metavar="USER_AGENT",
        help="User-Agent sent with every request; the peer id is appended (default: {default})",
    )
    connect_timeout: float = option(
        10.0, help="give up connecting to a server (or the proxy) after this long, in seconds"
    )
    read_timeout: float = option(
        30.0,
        flag="--timeout",
        metavar="SECONDS",
        help="give up a request when the server sends nothing for this long (default: {default})",
    )
    # The whole request, however slowly the server drips bytes.
    fetch_deadline: float = option(
        120.0,
        flag="--fetch-deadline",
        metavar="SECONDS",
        help="give up a request that has not finished after this long, however slowly "
        "the server keeps sending (default: {default})",
    )
    max_body_bytes: int = option(
        10 * 1024 * 1024,
        flag="--max-body",
        metavar="BYTES",
        help="cut a body at this many (decoded) bytes, recorded as truncated (default: {default})",
    )
    # The host waits meanwhile, so a retry is polite.
    max_retries: int = option(
        2,
        flag="--retries",
        metavar="N",
        help="retry a page after 5xx, 429, a time-out or a broken connection up to N times, "
        "with exponential back-off or the server's Retry-After (default: {default})",
    )
    retry_base: float = option(
        2.0, help="the first retry's back-off, in seconds; it doubles with each retry"
    )
    max_retry_after: float = option(
        600.0, help="a server's Retry-After longer than this many seconds is cut to it"
    )
    store_bodies: bool = option(
        True,
        flag="--no-bodies",
        negated=True,
        help="store page metadata only, not the compressed bodies (default: bodies stored)",
    )
    proxy: str | None = option(
        None,
        flag="--proxy",
        metavar="URL",
        help="send every request through this HTTP proxy (default: none, direct)",
    )

    def __post_init__(self) -> None:
        _positive(self, "connect_timeout", "read_timeout", "fetch_deadline")
        _at_least(self, 1, "max_body_bytes")
        _at_least(self, 0, "max_retries", "retry_base")
        _at_least(self, 0, "max_retry_after", infinite=True)


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """How the shard is written and how much of it is held in memory."""

    # A transaction closes at commit_every_pages pages or after commit_interval,
    # whichever comes first: one fsync for many pages.
    commit_every_pages: int = option(64, help="pages stored in one transaction at most")
    commit_interval: float = option(
        0.05, help="seconds a transaction stays open at most, however few its pages"
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

    def __post_init__(self) -> None:
        _positive(self, "commit_interval", "storage_retry")
        _at_least(
            self,
            1,
            "commit_every_pages",
            "recent_cache_size",
            "bloom_initial_capacity",
            "host_window",
            "frontier_memory",
        )
        if not 0 < self.bloom_error_rate < 1:
            rate = _show(self.bloom_error_rate)
            raise ConfigError(f"must be between 0 and 1, not {rate}", "bloom_error_rate")


@dataclass(frozen=True, slots=True)
class ForwardingConfig:
    """How URLs found for hosts that other peers own are sent to them, in batches."""

    # A peer spreads its foreign links over one outbox per other member, so with a
    # fixed linger the batches thin out as the cluster grows (one or two URLs a
    # frame at a few dozen pages a second); a few seconds are nothing to a URL that
    # waits its turn in a frontier anyway.
    batch_size: int = option(
        50,
        flag="--batch-size",
        metavar="N",
        help="URLs for another peer leave as one frame when N are waiting (default: {default})",
    )
    batch_linger: float = option(
        0.5,
        flag="--batch-linger",
        metavar="SECONDS",
        help="...or when the oldest has waited this long per other peer in the cluster "
        "(default: {default})...",
    )
    batch_linger_max: float = option(
        5.0,
        flag="--batch-linger-max",
        metavar="SECONDS",
        help="...but never longer than this (default: {default})",
    )
    batch_retry: float = option(
        2.0, help="seconds before a batch its owner did not acknowledge is sent again"
    )

    def __post_init__(self) -> None:
        _at_least(self, 1, "batch_size")
        _at_least(self, 0, "batch_linger", "batch_linger_max")
        _positive(self, "batch_retry")


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    """What survives a dead peer: copies of its frontier, or a wait for its return."""

    # 1: no copies; 2: the owner and the next peer clockwise.
    replicas: int = option(
        1,
        flag="--replicas",
        choices=(1, 2),
        help="2 keeps a copy of each owner's frontier and history on the next peer "
        "clockwise, which takes the hosts over if the owner dies (default: {default})",
    )
    # Others would fetch again what the dead peer had.
    rejoin_grace: float = option(
        30.0,
        flag="--rejoin-grace",
        metavar="SECONDS",
        help="with --replicas 1, hold a dead peer's hosts this long before others crawl "
        "them, so a peer restarted meanwhile takes them back and fetches nothing twice "
        "(default: {default})",
    )

    def __post_init__(self) -> None:
        if self.replicas not in (1, 2):
            raise ConfigError(f"must be 1 or 2, not {_show(self.replicas)}", "replicas")
        _at_least(self, 0, "rejoin_grace")


@dataclass(frozen=True, slots=True)
class SwimConfig:
    """The membership protocol's (SWIM's) timings; memberlist's LAN profile by default."""

    probe_interval: float = option(1.0, help="seconds between this peer's probes, one member each")
    probe_timeout: float = option(
        0.5, help="seconds a probe waits for its answer before asking others to try"
    )
    indirect_checks: int = option(3, help="members asked to probe one that did not answer")
    suspicion_mult: int = option(
        4,
        help="a suspect is declared dead after this many probe intervals (times log10 of the "
        "cluster's size past 10 members; up to 6 times longer while no other member confirms)",
    )
    push_pull_interval: float = option(
        30.0, help="seconds between full exchanges of the member list with one member"
    )
    reconnect_interval: float = option(
        30.0,
        flag="--reconnect-interval",
        metavar="SECONDS",
        help="seconds between tries to reach members declared dead (and the --join "
        "addresses): how a partition heals (default: {default})",
    )
    reconnect_timeout: float = option(
        24 * 3600.0,
        flag="--reconnect-timeout",
        metavar="SECONDS",
        help="seconds a member declared dead is still tried; with --replicas 2, also how "
        "long a host whose every copy is on such members waits for one of them before it "
        "is crawled afresh (default: a day)",
    )
    # The lease is what keeps two peers off one host during a partition.
    majority_lease: float = option(
        3.0,
        flag="--majority-lease",
        metavar="SECONDS",
        help="fetch only while a majority of the cluster was heard from within this many "
        "seconds; the majority waits longer than this (with margin) before taking a lost "
        "peer's hosts over (default: {default})",
    )

    def __post_init__(self) -> None:
        _positive(
            self,
            "probe_interval",
            "probe_timeout",
            "push_pull_interval",
            "reconnect_interval",
            "majority_lease",
        )
        _at_least(self, 0, "reconnect_timeout", infinite=True)
        if not self.probe_timeout < self.probe_interval:
            raise ConfigError(
                f"must be shorter than probe_interval ({_show(self.probe_interval)}), "
                f"not {_show(self.probe_timeout)}",
                "probe_timeout",
            )
        _at_least(self, 0, "indirect_checks")
        _at_least(self, 1, "suspicion_mult")


@dataclass(frozen=True, slots=True)
class ControlConfig:
    """The control centre: dashboard, /api/status, /metrics, seed and stop over HTTP."""

    address: str | None = option(
        None,
        flag="--control",
        metavar="ADDR",
        help="serve the control centre (dashboard, /api/status, /metrics, seed and stop) "
        "on ADDR, e.g. 127.0.0.1:8080; loopback only unless --control-public",
    )
    public: bool = option(
        False,
        flag="--control-public",
        help="let --control bind a non-loopback address (needs --secret)",
    )


@dataclass(frozen=True, slots=True)
class CrawlConfig:
    """Everything a peer needs to know to crawl politely: its own options (where it
    keeps its data, where it listens, its cluster) and one section per concern."""

    data_dir: Path = option(
        Path("ubipy-data"),
        flag="--data",
        metavar="DIR",
        help="data directory: the peer's shard and id (created if missing); one peer at "
        "a time, which holds DIR/lock while it runs",
    )
    listen: str = option(
        "127.0.0.1:7000",
        flag="--listen",
        metavar="ADDR",
        help="HOST:PORT where this peer takes frames from the others (default: {default})",
    )
    # The listening address is no use to others when it is a wildcard (0.0.0.0) or
    # behind NAT: they are told this one instead.
    advertise: str | None = option(
        None,
        flag="--advertise",
        metavar="ADDR",
        help="HOST:PORT other peers dial to reach this one, gossiped as its address; "
        "required when --listen is a wildcard address such as 0.0.0.0:7000 "
        "(default: the --listen address)",
    )
    # Join any one live member: it tells this peer of the others.
    join: tuple[str, ...] = option(
        (),
        flag="--join",
        metavar="ADDR",
        help="HOST:PORT of any live member of the cluster to join; may be repeated "
        "(default: start a cluster of one)",
    )
    # Without one a peer stays on loopback: frames would be forgeable.
    secret: str | None = option(
        None,
        flag="--secret",
        metavar="SECRET",
        help="the cluster secret that authenticates every frame between peers "
        "(default: $UBIPY_SECRET; without one, peers stay on loopback)",
    )
    peer_token: str | None = option(
        None,
        help="a token the synthetic web's referee (and any server log) can attribute "
        "requests by (default: the peer id)",
    )
    politeness: PolitenessConfig = field(default_factory=PolitenessConfig)
    bounds: BoundsConfig = field(default_factory=BoundsConfig)
    fetch: FetchConfig = field(default_factory=FetchConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    forwarding: ForwardingConfig = field(default_factory=ForwardingConfig)
    replication: ReplicationConfig = field(default_factory=ReplicationConfig)
    membership: SwimConfig = field(default_factory=SwimConfig)
    control: ControlConfig = field(default_factory=ControlConfig)

    def agent_string(self, peer_id: str) -> str:
        """The User-Agent sent with every request, naming the peer."""
        token = self.peer_token or peer_id
        ua = self.fetch.user_agent
        if ua.endswith(")"):
            return f"{ua[:-1]}; peer={token})"
        return f"{ua} (peer={token})"
