"""Everything that touches the web: the HTTP client and its transport, robots.txt,
the per-host politeness scheduler, HTML parsing, URL normalisation and
fingerprints, scope rules and seed files.
"""

from ubipy.fetch.client import make_client
from ubipy.fetch.fetcher import FetchOutcome, FetchResult, failed, fetch, processing_failed
from ubipy.fetch.parse import content_digest, parse_html
from ubipy.fetch.politeness import Entry, HostRobots, Job, JobKind, Scheduler
from ubipy.fetch.retry import asked_wait, is_retryable, retry_after
from ubipy.fetch.robots import ROBOTS_MAX_BYTES, retry_delay
from ubipy.fetch.scope import ScopeFilter, path_repeats
from ubipy.fetch.seeds import parse_seeds
from ubipy.fetch.urls import BadURL, fingerprint, host_key, normalize, normalize_reporting

__all__ = [
    "ROBOTS_MAX_BYTES",
    "BadURL",
    "Entry",
    "FetchOutcome",
    "FetchResult",
    "HostRobots",
    "Job",
    "JobKind",
    "Scheduler",
    "ScopeFilter",
    "asked_wait",
    "content_digest",
    "failed",
    "fetch",
    "fingerprint",
    "host_key",
    "is_retryable",
    "make_client",
    "normalize",
    "normalize_reporting",
    "parse_html",
    "parse_seeds",
    "path_repeats",
    "processing_failed",
    "retry_after",
    "retry_delay",
]
