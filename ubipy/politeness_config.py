"""The configuration's section about how hard each host is asked: delays, requests in
flight, robots.txt's retries, the per-IP rule and the delay that listens to the
server. Re-exported by :mod:`ubipy.config`, the one place to import it from."""

from __future__ import annotations

from dataclasses import dataclass

from ubipy.errors import ConfigError
from ubipy.options import option
from ubipy.validation import at_least, positive


@dataclass(frozen=True, slots=True)
class PolitenessConfig:
    """How hard a host is asked: the delay between its requests, the requests in
    flight over all hosts, and robots.txt's retries."""

    # From one request's end to the next's start; a Crawl-delay raises it, never lowers it.
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
    # A robots.txt that answers 5xx or 429 or cannot be reached: its host's URLs wait,
    # and are given up after the last attempt.
    robots_retry_base: float = option(
        30.0,
        flag="--robots-retry",
        metavar="SECONDS",
        help="first wait before asking again for a robots.txt that failed with 5xx or 429 "
        "or could not be reached; it doubles each time, or is the server's Retry-After if "
        "longer, {robots_max_attempts} attempts in all (default: {default})",
    )
    robots_max_attempts: int = option(
        3, help="attempts at a failing robots.txt before its host's URLs are given up"
    )
    # RFC 9309 §2.4: a robots.txt is not used for more than a day unless it cannot be
    # reached; a refetch that fails keeps the old rules and is tried again.
    robots_ttl: float = option(
        86400.0,
        flag="--robots-ttl",
        metavar="SECONDS",
        help="robots.txt is asked again once this old (its old rules stand while that fails); "
        "a host given up for want of it or its name is tried again after it (default: {default})",
    )
    # Shared hosting puts thousands of sites on one server: the rule per address
    # keeps a crawl of all of them as gentle as a crawl of one.
    ip_delay: float | None = option(
        None,
        flag="--ip-delay",
        metavar="SECONDS",
        help="delay between two requests to one IP address, one in flight at a time, on "
        "top of each host's rules (default: the --delay)",
    )
    # Behind a CDN a few addresses front thousands of unrelated sites: the rule would
    # have them crawled one request at a time (QA), and one's 429 hold them all.
    per_ip: bool = option(
        True,
        flag="--no-per-ip",
        negated=True,
        help="do not hold an IP address to one request in flight, --ip-delay apart (for "
        "sites behind a CDN); each host's own rules still hold (default: the rule holds)",
    )
    # A delay that listens to the server (ubipy/fetch/throttle.py): a slow host gets
    # fewer requests, an overloaded one (503, 429) is left alone longer and longer.
    delay_factor: float = option(
        1.0,
        flag="--delay-factor",
        metavar="N",
        help="a host waits N times its response time (an average of its last answers', "
        "as AutoThrottle's) between two requests, never less than --delay or its "
        "Crawl-delay (Heritrix's delay factor); 0 turns it off (default: {default})",
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
        if not self.per_ip and self.ip_delay is not None:
            raise ConfigError("has no use without the per-IP rule (--no-per-ip)", "ip_delay")
        at_least(self, 0, "delay", "robots_retry_base", "ip_delay")
        at_least(self, 0, "max_crawl_delay", infinite=True)
        at_least(self, 1, "concurrency", "robots_max_attempts")
        positive(self, "robots_ttl")
        at_least(self, 0, "delay_factor", "backoff_base")
        at_least(self, 0, "max_delay", infinite=True)
