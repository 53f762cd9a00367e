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
import ipaddress
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx2

from ubipy import PROJECT_URL, __version__
from ubipy.cluster_config import ControlConfig, ForwardingConfig, ReplicationConfig, SwimConfig
from ubipy.errors import ConfigError
from ubipy.options import option
from ubipy.politeness_config import PolitenessConfig
from ubipy.store_config import BodyStore, StoreConfig
from ubipy.validation import at_least, positive, sent_in_heads, show

__all__ = [
    "BodyStore",
    "BoundsConfig",
    "ControlConfig",
    "CrawlConfig",
    "CrawlOrder",
    "DnsConfig",
    "FetchConfig",
    "ForwardingConfig",
    "PolitenessConfig",
    "RecrawlConfig",
    "RefreshPolicy",
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


class CrawlOrder(enum.Enum):
    """Which ready host goes next and which of its URLs it gets (seed 001's
    strategies; docs/order.md). Politeness is the same under every order."""

    # Oldest first, hosts in the order they come due.
    BFS = "bfs"
    # Online Page Importance Computation: a fetched page's cash is split over its
    # links (across peers too); the richest URL goes next.
    OPIC = "opic"
    # PageRank over the part of the graph this peer knows, every --pagerank-every pages.
    PAGERANK = "pagerank"
    # The host with the most URLs waiting goes first; oldest first within a host.
    BIG_SITE_FIRST = "big-site-first"

    @property
    def ranked(self) -> bool:
        """Whether a host's URLs go by score rather than by age."""
        return self in (CrawlOrder.OPIC, CrawlOrder.PAGERANK)


class RefreshPolicy(enum.Enum):
    """How a continuous crawl chooses each page's revisit frequency under its refresh
    budget (ubipy/fetch/refresh.py; docs/freshness.md)."""

    # Every page alike.
    UNIFORM = "uniform"
    # The freshness-optimal allocation over each page's estimated change rate.
    HISTORY = "history"
    # The same, each page weighted by its importance (the crawl order's score).
    IMPORTANCE = "importance"
    # As history, but a page seen fewer than 3 times takes its host's pooled rate.
    CLUSTER = "cluster"
    # In proportion to the estimated rate: there to show why not.
    PROPORTIONAL = "proportional"


def default_user_agent() -> str:
    return f"ubipy/{__version__} (+{PROJECT_URL})"


_TOKEN = r"[a-z0-9!#$&^_.+-]+"
# RFC 9110's media-range, without parameters.
_MEDIA_RANGE = re.compile(rf"\*/\*|{_TOKEN}/(?:{_TOKEN}|\*)")


def _check_proxy(proxy: str) -> None:
    """An http:// proxy with a host and a port that can be: the transport speaks
    plain HTTP to it (CONNECT for https), and knows no credentials."""
    try:
        url = urlsplit(proxy)
        port = url.port
    except ValueError as exc:
        raise ConfigError(f"is not a URL: {proxy!r} ({exc})", "proxy") from None
    if url.scheme != "http" or not url.hostname:
        raise ConfigError(f"must be an http://HOST[:PORT] URL, not {proxy!r}", "proxy")
    if url.username is not None or url.password is not None:
        raise ConfigError("must not carry credentials (not supported)", "proxy")
    if url.path not in ("", "/") or url.query or url.fragment or port == 0:
        raise ConfigError(f"must be an http://HOST[:PORT] URL, not {proxy!r}", "proxy")
    try:
        parsed = httpx2.URL(proxy)  # what the transport parses it with
    except httpx2.InvalidURL as exc:
        raise ConfigError(f"is not a URL: {proxy!r} ({exc})", "proxy") from None
    if parsed.scheme != "http" or not parsed.host:  # " http://..." is relative to it
        raise ConfigError(f"must be an http://HOST[:PORT] URL, not {proxy!r}", "proxy")


def _check_ca_bundle(path: Path) -> None:
    """A bundle that cannot be read, or holds no certificate, is refused at start, not
    found out at the first https page."""
    try:
        ssl.create_default_context(cafile=path)
    except ssl.SSLError as exc:  # an OSError too
        raise ConfigError(
            f"is not a PEM file of CA certificates: {path} ({exc.reason or exc})", "ca_bundle"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot be read: {path}: {exc.strerror or exc}", "ca_bundle") from None


@dataclass(frozen=True, slots=True)
class BoundsConfig:
    """Where a crawl goes and how far: its scope, depth, and the trap guards."""

    scope: Scope = option(
        Scope.DOMAIN,
        flag="--scope",
        help="follow links to the seeds' hosts only, their registered domains, or anywhere "
        "(default: {default})",
    )
    # Measured on a web whose links and host sizes follow the literature's laws
    # (bench/order.py, docs/order.md): OPIC holds more of the web's PageRank early on
    # for 13% more CPU a page; partial PageRank more still, for 70% more and a cost
    # that grows with the graph. Nutch's default scoring was OPIC too.
    order: CrawlOrder = option(
        CrawlOrder.OPIC,
        flag="--order",
        help="which URL goes next among the hosts ready for one: oldest first, OPIC cash, "
        "partial PageRank, or the host with the most waiting; politeness is the same "
        "(default: {default})",
    )
    pagerank_every: int = option(
        1000,
        flag="--pagerank-every",
        metavar="N",
        help="with --order pagerank: recompute PageRank over the known graph after every N "
        "pages fetched (default: {default})",
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
    # Searched in the normalised URL (re.search) before it is admitted or sent to its owner;
    # seeds included (refused, with the reason); not sitemaps: what they list is.
    include: tuple[str, ...] = option(
        (),
        flag="--include",
        metavar="REGEX",
        help="follow only URLs in which this regular expression is found (re.search on the "
        "normalised URL), seeds included; may be repeated: a URL is kept when any matches; "
        "sitemaps are read regardless, what they list is filtered (default: every URL)",
    )
    exclude: tuple[str, ...] = option(
        (),
        flag="--exclude",
        metavar="REGEX",
        help="never follow URLs in which this regular expression is found, seeds included; may "
        "be repeated; wins over --include; sitemaps are read regardless (default: none)",
    )
    # A host's robots.txt Sitemap lines and its /sitemap.xml, read for the URLs they
    # list (depth 1), which are admitted like links.
    sitemaps: bool = option(
        True,
        flag="--no-sitemaps",
        negated=True,
        help="do not read sitemaps (those robots.txt names and each host's /sitemap.xml) "
        "for URLs to crawl (default: sitemaps read)",
    )

    def __post_init__(self) -> None:
        at_least(self, 0, "max_depth")
        at_least(self, 1, "max_pages_per_host", "max_path_repeats", "pagerank_every")
        for name in ("include", "exclude"):
            for pattern in getattr(self, name):
                try:
                    re.compile(pattern)
                except (re.error, OverflowError, RecursionError) as exc:
                    # A repeat past C's int, or parentheses nested thousands deep.
                    raise ConfigError(
                        f"is not a regular expression: {pattern!r} ({exc})", name
                    ) from None
                if not pattern.isascii():  # it would never match: say so now
                    raise ConfigError(
                        f"{pattern!r} holds what no URL does: URLs are matched as requested, "
                        "hosts in punycode (xn--...) and paths percent-encoded (%C3%A9)",
                        name,
                    )


@dataclass(frozen=True, slots=True)
class FetchConfig:
    """How one request is made: identity, time-outs, sizes, retries, proxy."""

    user_agent: str = option(
        factory=default_user_agent,
        flag="--user-agent",
        metavar="USER_AGENT",
        help="User-Agent sent with every request, the peer id appended; its product "
        "token names the crawler to robots.txt (default: {default})",
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
        help="cut a page's body at this many (decoded) bytes, recorded as truncated; "
        "sitemaps are read to the protocol's 50 MB (default: {default})",
    )
    # The host waits meanwhile, so a retry is polite.
    max_retries: int = option(
        2,
        flag="--retries",
        metavar="N",
        help="retry a page after 5xx, 429, a time-out or a broken connection up to N times, with "
        "back-off or a longer Retry-After; a host's first 10 503s or 429s in a row (its "
        "back-off's, about 3.5 minutes) spend none of them; a refresh backed off is asked "
        "once (default: {default})",
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
        help="send every request through this HTTP proxy, which then looks names up: "
        "only IP addresses and --resolve names are checked against --allow-private; while "
        "it cannot be reached one request at a time tries it, 1 s apart, doubling to a "
        "minute, and no host is given up for it (default: none, direct)",
    )
    # HTML is always kept and parsed for links; these are kept besides, not parsed.
    accept: tuple[str, ...] = option(
        (),
        flag="--accept",
        metavar="TYPE",
        help="also keep responses of this media type (e.g. application/pdf, image/*), "
        "stored but not parsed for links; may be repeated. HTML is always kept; other "
        "responses are counted by type and their bodies not downloaded (default: HTML only)",
    )
    # Certificates are always verified; a page whose certificate fails is recorded as
    # a certificate error and not retried.
    ca_bundle: Path | None = option(
        None,
        flag="--ca-bundle",
        metavar="PATH",
        help="also trust the CAs in this PEM file (private CAs) when verifying servers' "
        "certificates, besides the system's (default: the system's only)",
    )

    def __post_init__(self) -> None:
        positive(self, "connect_timeout", "read_timeout", "fetch_deadline")
        sent_in_heads(self, "user_agent")
        if self.proxy is not None:
            _check_proxy(self.proxy)
        if self.ca_bundle is not None:
            _check_ca_bundle(self.ca_bundle)
        for media in self.accept:
            if not _MEDIA_RANGE.fullmatch(media.strip().lower()):
                raise ConfigError(
                    f"is not a media type (type/subtype, type/* or */*): {media!r}", "accept"
                )
        at_least(self, 1, "max_body_bytes")
        at_least(self, 0, "max_retries", "retry_base")
        at_least(self, 0, "max_retry_after", infinite=True)


@dataclass(frozen=True, slots=True)
class RecrawlConfig:
    """A continuous crawl: pages fetched come due again, and are asked whether they
    changed (a conditional GET), within the same politeness as new URLs."""

    recrawl: bool = option(
        False,
        flag="--recrawl",
        help="keep crawling: fetched pages come due again and are refreshed, new URLs "
        "found meanwhile are fetched too (default: crawl once and stop)",
    )
    policy: RefreshPolicy = option(
        RefreshPolicy.HISTORY,
        flag="--refresh",
        help="how each page's revisit frequency is chosen under the refresh budget "
        "(default: {default})",
    )
    # So that discovery does not starve while many pages are due.
    share: float = option(
        0.5,
        flag="--refresh-share",
        metavar="FRACTION",
        help="the share of requests refreshes may take while new URLs wait too "
        "(default: {default})",
    )
    rate: float | None = option(
        None,
        flag="--refresh-rate",
        metavar="PER_SECOND",
        help="refreshes a second this peer plans for (default: --refresh-share of the "
        "requests a second it could make to its pages' hosts within their delays)",
    )
    min_interval: float = option(60.0, help="seconds between two visits of one page at least")
    max_interval: float = option(
        30 * 86_400.0, help="seconds between two visits of one page at most"
    )
    # Plans follow the estimates this often, or less once one takes 5% of it (PLAN_SHARE).
    replan: float = option(60.0, help="seconds between two plans of revisit frequencies, at least")
    # Sitemaps re-read, their lastmods checked per host against the visits (#18).
    lastmod_hints: bool = option(
        True,
        flag="--no-lastmod-hints",
        negated=True,
        help="do not take a newer sitemap lastmod as a hint that a page changed (default: "
        "taken, on hosts whose lastmods the visits bore out)",
    )

    def __post_init__(self) -> None:
        positive(self, "min_interval", "max_interval", "replan")
        if self.rate is not None:
            positive(self, "rate")
        if not 0 < self.share <= 1:
            raise ConfigError(f"must be in (0, 1], not {show(self.share)}", "share")
        if self.max_interval < self.min_interval:
            raise ConfigError("must be at least min_interval", "max_interval")


@dataclass(frozen=True, slots=True)
class DnsConfig:
    """Name resolution: a stage before a host's first request, cached, bounded, and
    which addresses may be reached at all."""

    # getaddrinfo does not report a record's TTL, so answers are kept this long.
    ttl: float = option(
        3600.0,
        flag="--dns-ttl",
        metavar="SECONDS",
        help="how long a host's address is kept before it is looked up again (default: {default})",
    )
    timeout: float = option(5.0, help="give up one lookup after this many seconds")
    # Many: a name whose servers do not answer holds one until the time-out, and the
    # live hosts' lookups queue behind it.
    lookups: int = option(128, help="lookups in progress at once, at most")
    resolve: tuple[str, ...] = option(
        (),
        flag="--resolve",
        metavar="NAME:ADDRESS",
        help="use ADDRESS for NAME instead of asking DNS (as curl's --resolve, without the "
        "port; several addresses comma-separated); may be repeated",
    )
    # A page can link to a cloud's metadata service or to a peer's own endpoint.
    allow_private: bool = option(
        False,
        flag="--allow-private",
        help="also fetch from loopback, private and link-local addresses (default: only "
        "hosts a seed named may be on one)",
    )

    def __post_init__(self) -> None:
        positive(self, "ttl", "timeout", "lookups")
        self.overrides()

    def overrides(self) -> dict[str, tuple[str, ...]]:
        """``--resolve`` as a table, name -> addresses."""
        table: dict[str, list[str]] = {}
        for entry in self.resolve:
            name, sep, rest = entry.partition(":")
            name = name.strip().lower().rstrip(".")
            if not sep or not name or not rest:
                raise ConfigError(f"{entry!r}: expected NAME:ADDRESS", "resolve")
            for part in rest.split(","):
                try:
                    address = str(ipaddress.ip_address(part.strip().strip("[]")))
                except ValueError:
                    raise ConfigError(
                        f"{entry!r}: {part.strip()!r} is not an IP address", "resolve"
                    ) from None
                table.setdefault(name, []).append(address)
        return {name: tuple(dict.fromkeys(addresses)) for name, addresses in table.items()}


@dataclass(frozen=True, slots=True)
class CrawlConfig:
    """Everything a peer needs to know to crawl politely: its own options (where it
    keeps its data, where it listens, its cluster) and one section per concern."""

    data_dir: Path = option(
        Path("ubipy-data"),
        flag="--data",
        metavar="DIR",
        help="data directory (required, or data_dir in --config's file): the peer's shard "
        "and id (created if missing, and removed again if the peer cannot start before it "
        "takes anything in); one peer "
        "at a time, which holds DIR/lock while it runs",
        required=True,
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
    dns: DnsConfig = field(default_factory=DnsConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    recrawl: RecrawlConfig = field(default_factory=RecrawlConfig)
    forwarding: ForwardingConfig = field(default_factory=ForwardingConfig)
    replication: ReplicationConfig = field(default_factory=ReplicationConfig)
    membership: SwimConfig = field(default_factory=SwimConfig)
    control: ControlConfig = field(default_factory=ControlConfig)

    def __post_init__(self) -> None:
        sent_in_heads(self, "peer_token", spaces=False)  # in every User-Agent

    def agent_string(self, peer_id: str) -> str:
        """The User-Agent sent with every request, naming the peer."""
        token = self.peer_token or peer_id
        ua = self.fetch.user_agent
        if ua.endswith(")"):
            return f"{ua[:-1]}; peer={token})"
        return f"{ua} (peer={token})"
