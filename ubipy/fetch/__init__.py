"""Everything that touches the web: the HTTP client and its transport, robots.txt,
the per-host politeness scheduler, HTML parsing, URL normalisation and
fingerprints, scope rules, URL and type filters, seed files and sitemaps.
"""

from ubipy.fetch.bodies import BodyGate
from ubipy.fetch.client import make_client
from ubipy.fetch.dns import (
    DnsFailure,
    Lookup,
    Resolver,
    address_key,
    cloud_metadata,
    is_public,
)
from ubipy.fetch.encoding import EncodingSource, decode, sniff
from ubipy.fetch.fetcher import (
    FetchOutcome,
    FetchResult,
    Validators,
    failed,
    fetch,
    processing_failed,
)
from ubipy.fetch.filters import Filtered, MediaTypes, UrlFilter, type_family
from ubipy.fetch.parse import (
    MAX_LINKS,
    ParsedPage,
    content_digest,
    parse_html,
    parse_html_steps,
    refresh_link,
)
from ubipy.fetch.politeness import Entry, HostRobots, Job, JobKind, Scheduler
from ubipy.fetch.refresh import (
    History,
    allocate,
    change_rate,
    estimate,
    freshness,
    proportional,
)
from ubipy.fetch.retry import asked_wait, is_retryable, retry_after
from ubipy.fetch.robots import (
    LARGE_ROBOTS,
    ROBOTS_FETCH_BYTES,
    ROBOTS_MAX_BYTES,
    ROBOTS_UNREACHABLE,
    RobotsFetch,
    RobotsRules,
    retry_delay,
    robots_token,
)
from ubipy.fetch.scope import ScopeFilter, path_repeats, path_trap, site_of
from ubipy.fetch.seeds import SeedList, SeedsFileError, parse_seeds, read_seeds
from ubipy.fetch.sitemaps import (
    INDEXED_SITEMAP_DEPTH,
    LISTED_DEPTH,
    SITEMAP_DEPTH,
    SITEMAP_MAX_BYTES,
    SITEMAP_PATH,
    Sitemap,
    SitemapKind,
    is_sitemap,
    parse_w3c,
    read_sitemap,
    sitemap_reading,
)
from ubipy.fetch.throttle import BACKOFF_STATUSES
from ubipy.fetch.tls import TlsStream
from ubipy.fetch.urls import (
    BadURL,
    fingerprint,
    host_key,
    normalize,
    normalize_reporting,
    path_and_query,
    resolve_link,
)

__all__ = [
    "BACKOFF_STATUSES",
    "INDEXED_SITEMAP_DEPTH",
    "LARGE_ROBOTS",
    "LISTED_DEPTH",
    "MAX_LINKS",
    "ROBOTS_FETCH_BYTES",
    "ROBOTS_MAX_BYTES",
    "ROBOTS_UNREACHABLE",
    "SITEMAP_DEPTH",
    "SITEMAP_MAX_BYTES",
    "SITEMAP_PATH",
    "BadURL",
    "BodyGate",
    "DnsFailure",
    "EncodingSource",
    "Entry",
    "FetchOutcome",
    "FetchResult",
    "Filtered",
    "History",
    "HostRobots",
    "Job",
    "JobKind",
    "Lookup",
    "MediaTypes",
    "ParsedPage",
    "Resolver",
    "RobotsFetch",
    "RobotsRules",
    "Scheduler",
    "ScopeFilter",
    "SeedList",
    "SeedsFileError",
    "Sitemap",
    "SitemapKind",
    "TlsStream",
    "UrlFilter",
    "Validators",
    "address_key",
    "allocate",
    "asked_wait",
    "change_rate",
    "cloud_metadata",
    "content_digest",
    "decode",
    "estimate",
    "failed",
    "fetch",
    "fingerprint",
    "freshness",
    "host_key",
    "is_public",
    "is_retryable",
    "is_sitemap",
    "make_client",
    "normalize",
    "normalize_reporting",
    "parse_html",
    "parse_html_steps",
    "parse_seeds",
    "parse_w3c",
    "path_and_query",
    "path_repeats",
    "path_trap",
    "processing_failed",
    "proportional",
    "read_seeds",
    "read_sitemap",
    "refresh_link",
    "resolve_link",
    "retry_after",
    "retry_delay",
    "robots_token",
    "site_of",
    "sitemap_reading",
    "sniff",
    "type_family",
]
