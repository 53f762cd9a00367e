"""What the crawl loop counts, and what seeding answers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ubipy.fetch import DnsFailure, FetchOutcome, FetchResult, Filtered, type_family

# Reasons for closing a host's URLs whose text goes on to name the host.
_NAMING_HOSTS = ("certificate error", DnsFailure.REFUSED.value)


@dataclass(slots=True)
class CrawlStats:
    started_at: float = 0.0
    pages: int = 0
    bytes_in: int = 0
    errors: int = 0
    timeouts: int = 0
    # Pages whose server's certificate did not verify (errors too; never retried).
    certificate_errors: int = 0
    # Requests (pages, robots.txt) refused as they connected: their address may not be
    # reached (one the DNS stage did not see, as a robots.txt redirect's target).
    refused_addresses: int = 0
    truncated: int = 0
    retries: int = 0
    # Requests cut short because the peer lost sight of a majority.
    abandoned: int = 0
    # Requests put back, not the host's failure: the proxy down, no socket to be had.
    put_back: Counter[FetchOutcome] = field(default_factory=Counter)
    robots_requests: int = 0
    robots_disallowed: int = 0
    robots_given_up: int = 0
    # Sitemaps answered (counted here, not as pages), the URLs they listed, the URLs
    # past the protocol's limits (skipped), the sitemaps read only in part, and those
    # read up to a fault (malformed XML, a bad gzip stream, not a sitemap at all).
    sitemaps: int = 0
    sitemap_urls: int = 0
    sitemap_skipped: int = 0
    sitemaps_cut: int = 0
    sitemaps_faulty: int = 0
    links_cut: int = 0  # hrefs past a page's MAX_LINKS, not followed
    links_seen: int = 0
    out_of_scope: int = 0
    too_deep: int = 0
    # URLs (seeds, links, redirects) whose userinfo was stripped before admission.
    credentials_stripped: int = 0
    # Seeds and links dropped by --include / --exclude, by which; and what an earlier
    # run admitted that they drop now (ubipy.peer.refiltering).
    filtered: Counter[Filtered] = field(default_factory=Counter)
    # Answers of a type not accepted (--accept), by family (image, application, ...).
    skipped_types: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    # Pages whose last try still said "not now" (a 503, a 500...) once their retries
    # were spent, by status: fetched, and counted as pages, but not what was asked for.
    given_up: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    storage_failures: int = 0

    def closed(self, why: str, n: int = 1) -> None:
        """``n`` URLs closed without a request, counted by the kind of ``why``: a
        certificate's or a refused address's reason names its host, and a count by
        host would grow with the crawl (and the status with it)."""
        for kind in _NAMING_HOSTS:
            if why.startswith(kind):
                why = kind
                break
        self.skipped[why[:80]] += n

    def answered(self, result: FetchResult) -> None:
        """Count a page's final answer, or failure."""
        if not result.ok:
            self.errors += 1
            self.timeouts += result.outcome is FetchOutcome.TIMEOUT
            self.certificate_errors += result.outcome is FetchOutcome.CERTIFICATE_ERROR
            self.refused_addresses += result.outcome is FetchOutcome.REFUSED
            return
        self.pages += 1
        self.bytes_in += len(result.body)
        self.truncated += result.truncated
        assert result.status is not None
        self.statuses[result.status] += 1
        if not result.accepted:
            self.skipped_types[type_family(result.content_type)] += 1


@dataclass(frozen=True, slots=True)
class SeedResult:
    offered: int
    admitted: int
    refused: tuple[tuple[str, str], ...]
    forwarded: int = 0
