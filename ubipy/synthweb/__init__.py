"""The synthetic web: a seeded generator of hosts, pages and links, an HTTP server for it
on loopback (or an httpx2 transport that answers in process, on trio's clock), its
request log, the ground truth of a correct crawl and a referee; optionally pages that
change over time (`WebSpec(changing=True)`), with the truth of when and the exact
freshness and age of a crawler's copies (`measure_freshness`).

It imports nothing else from ubipy: it is the independent judge of the crawler.
"""

from ubipy.synthweb.changing import ChangingPage, ChangingWeb
from ubipy.synthweb.freshness import (
    Freshness,
    PageFreshness,
    fetches,
    measure_freshness,
    page_freshness,
)
from ubipy.synthweb.hostile import HostileWeb
from ubipy.synthweb.inprocess import SynthTransport, in_process
from ubipy.synthweb.lastmods import LastmodKind, LastmodSitemaps
from ubipy.synthweb.log import Request, RequestLog
from ubipy.synthweb.model import SyntheticWeb
from ubipy.synthweb.pagerank import PageRank, pagerank
from ubipy.synthweb.ranked import RankedWeb
from ubipy.synthweb.referee import (
    Hammering,
    Overlap,
    Referee,
    RetryAfterViolation,
    RobotsViolation,
    ShortGap,
)
from ubipy.synthweb.robots import RobotsKind
from ubipy.synthweb.server import SynthServer, serve
from ubipy.synthweb.spec import Response, WebSpec
from ubipy.synthweb.truth import expected_encodings, expected_titles, ground_truth
from ubipy.synthweb.urls import normalize_url

__all__ = [
    "ChangingPage",
    "ChangingWeb",
    "Freshness",
    "Hammering",
    "HostileWeb",
    "LastmodKind",
    "LastmodSitemaps",
    "Overlap",
    "PageFreshness",
    "PageRank",
    "RankedWeb",
    "Referee",
    "Request",
    "RequestLog",
    "Response",
    "RetryAfterViolation",
    "RobotsKind",
    "RobotsViolation",
    "ShortGap",
    "SynthServer",
    "SynthTransport",
    "SyntheticWeb",
    "WebSpec",
    "expected_encodings",
    "expected_titles",
    "fetches",
    "ground_truth",
    "in_process",
    "measure_freshness",
    "normalize_url",
    "page_freshness",
    "pagerank",
    "serve",
]
