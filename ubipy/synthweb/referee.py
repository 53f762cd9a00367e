"""The referee: judges a crawl from the server's request log and the model.

Each check returns the offending items; an empty list (or set) is a pass. URLs are
compared in normalised form, so a crawler that requests both `/%7Edocs/` and `/~docs/`
shows up as a duplicate; `unnormalized()` lists requests whose raw target was not sent in
normalised form at all.

A response is *final* when it was sent whole (`Request.complete`) with a status other than
5xx or 429; asking for a URL again before it had a final response is a retry (bounded by
`hammering`), after it a duplicate. For the hostile web: `retry_after_violations`,
`hammering`, `unfinished`, `over_budget`, `repeated_segments` and
`unexpected(truth, ignore_hosts=web.trap_hosts())`.
"""

from __future__ import annotations

import email.utils
import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ubipy.synthweb.log import Request, RequestLog
from ubipy.synthweb.model import SyntheticWeb
from ubipy.synthweb.urls import normalize_target, segment_repeats, split_url

MAX_ROBOTS_REDIRECTS = 5


@dataclass(frozen=True, slots=True)
class RobotsViolation:
    request: Request
    reason: str  # "disallowed" or "before-robots"


@dataclass(frozen=True, slots=True)
class Overlap:
    first: Request
    second: Request


@dataclass(frozen=True, slots=True)
class ShortGap:
    previous: Request
    next: Request
    gap: float
    required: float


@dataclass(frozen=True, slots=True)
class RetryAfterViolation:
    response: Request  # the response that carried Retry-After
    next: Request  # the host's next request, which started too early
    not_before: float  # on the log's (trio) clock


@dataclass(frozen=True, slots=True)
class Hammering:
    url: str
    requests: int  # before (and including) its first final response
    allowed: int


def _is_final(request: Request) -> bool:
    """A response after which asking again is a duplicate: sent whole, and not 5xx or 429
    (those invite a retry, as does a response that never arrived whole, status 0 included)."""
    return request.complete and request.status < 500 and request.status != 429


def retry_after_deadline(request: Request) -> float | None:
    """When, on the log's clock, the Retry-After of `request` lets its host be asked again.
    Delta-seconds count from the response's end; an HTTP-date is moved from wall time to
    the log's clock by the offset recorded with the entry. None: no (usable) Retry-After."""
    value = request.retry_after.strip()
    if not value:
        return None
    if value.isdigit():
        return request.end + int(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - request.clock_offset


class Referee:
    def __init__(
        self, log: RequestLog | Iterable[Request], web: SyntheticWeb, *, epsilon: float = 0.001
    ) -> None:
        self.web = web
        # Clock granularity: gaps this much under the delay still pass.
        self.epsilon = epsilon
        self.requests = sorted(log, key=lambda r: (r.start, r.end))
        self._by_host: dict[str, list[Request]] = defaultdict(list)
        for r in self.requests:
            self._by_host[r.host].append(r)

    # -- helpers -------------------------------------------------------------------------
    @staticmethod
    def url_of(request: Request) -> str:
        try:
            return normalize_target(request.host, request.target_path)
        except ValueError:
            return request.url

    def is_robots(self, request: Request) -> bool:
        _, path = split_url(self.url_of(request))
        return path in self.web.robots_paths(request.host)

    def requested(self) -> set[str]:
        return {self.url_of(r) for r in self.requests}

    def robots_resolved_at(self, host: str) -> float | None:
        """When robots.txt for `host` was first usable: a 2xx or 4xx answer, or the end of
        the redirect that exceeded the limit; None if never (5xx only, or not asked)."""
        redirects = 0
        for r in self._by_host.get(host, []):
            if not self.is_robots(r):
                continue
            # A 2xx counts even if the crawler cut it short (a robots.txt of megabytes).
            if 200 <= r.status < 300 or (400 <= r.status < 500 and r.complete):
                return r.end
            if 300 <= r.status < 400:
                redirects += 1
                if redirects > MAX_ROBOTS_REDIRECTS:
                    return r.end
        return None

    # -- checks --------------------------------------------------------------------------
    def duplicates(self) -> list[Request]:
        """Non-robots requests for a URL that already had a final (non-5xx, non-429) answer."""
        finished: set[str] = set()
        dups: list[Request] = []
        for r in self.requests:
            if self.is_robots(r):
                continue
            url = self.url_of(r)
            if url in finished:
                dups.append(r)
            elif _is_final(r):
                finished.add(url)
        return dups

    def missing(self, truth: Iterable[str]) -> set[str]:
        return set(truth) - self.requested()

    def unexpected(self, truth: Iterable[str], *, ignore_hosts: Iterable[str] = ()) -> set[str]:
        """Requested but not in the truth; requests to `ignore_hosts` (the hostile web's trap
        hosts, `web.trap_hosts()`) are left to `over_budget` and `repeated_segments`."""
        ignored = set(ignore_hosts)
        extra = self.requested() - set(truth)
        return {url for url in extra if split_url(url)[0] not in ignored}

    def unfinished(self, urls: Iterable[str]) -> set[str]:
        """Those of `urls` that never got a final response (see the module docstring): e.g.
        `web.hostile.recovering_urls()` after a crawl that retried too little."""
        done = {self.url_of(r) for r in self.requests if _is_final(r)}
        return set(urls) - done

    def retry_after_violations(self) -> list[RetryAfterViolation]:
        """Requests that started before the time asked by the Retry-After of the previous
        response from the same host (robots.txt included); `epsilon` of slack."""
        found: list[RetryAfterViolation] = []
        for requests in self._by_host.values():
            for r, nxt in itertools.pairwise(requests):
                not_before = retry_after_deadline(r)
                if not_before is not None and nxt.start < not_before - self.epsilon:
                    found.append(RetryAfterViolation(r, nxt, not_before))
        return found

    def hammering(self, max_retries: int) -> list[Hammering]:
        """URLs (robots.txt included) requested more than 1 + `max_retries` times before
        their first final response; requests after it are `duplicates`."""
        counts: dict[str, int] = defaultdict(int)
        done: set[str] = set()
        for r in self.requests:
            url = self.url_of(r)
            if url in done:
                continue
            counts[url] += 1
            if _is_final(r):
                done.add(url)
        allowed = 1 + max_retries
        return [Hammering(url, n, allowed) for url, n in counts.items() if n > allowed]

    def is_sitemap(self, request: Request) -> bool:
        """A host's /sitemap.xml (every host's is asked), or a sitemap of the web's."""
        url = self.url_of(request)
        sitemaps = self.web.sitemaps
        return (
            split_url(url)[1] == "/sitemap.xml"
            or url in sitemaps.documents
            or url in sitemaps.robots_lines(request.host)
        )

    def over_budget(self, max_pages_per_host: int) -> dict[str, int]:
        """Hosts with more distinct pages requested than the budget (robots.txt and
        sitemaps excluded: they spend none of it; retries of one URL count once), with
        their counts."""
        pages: dict[str, set[str]] = defaultdict(set)
        for r in self.requests:
            if not self.is_robots(r) and not self.is_sitemap(r):
                pages[r.host].add(self.url_of(r))
        return {h: len(p) for h, p in pages.items() if len(p) > max_pages_per_host}

    def repeated_segments(self, max_path_repeats: int) -> list[Request]:
        """Requests whose path has one segment more than `max_path_repeats` times."""
        return [
            r
            for r in self.requests
            if segment_repeats(split_url(self.url_of(r))[1]) > max_path_repeats
        ]

    def unnormalized(self) -> list[Request]:
        return [r for r in self.requests if self.url_of(r) != r.url]

    def robots_violations(self) -> list[RobotsViolation]:
        found: list[RobotsViolation] = []
        for host, requests in self._by_host.items():
            resolved = self.robots_resolved_at(host)
            for r in requests:
                if self.is_robots(r):
                    continue
                if resolved is None or r.start < resolved:
                    found.append(RobotsViolation(r, "before-robots"))
                elif not self.web.robots_allows(host, split_url(self.url_of(r))[1]):
                    found.append(RobotsViolation(r, "disallowed"))
        return found

    def overlaps(self) -> list[Overlap]:
        """Pairs of requests to one host that were in flight at the same time."""
        found: list[Overlap] = []
        for requests in self._by_host.values():
            longest: Request | None = None
            for r in requests:
                if longest is not None and r.start < longest.end:
                    found.append(Overlap(longest, r))
                if longest is None or r.end > longest.end:
                    longest = r
        return found

    def required_gap(self, host: str, delay: float) -> float:
        return max(delay, self.web.crawl_delay(host) or 0.0)

    def short_gaps(self, delay: float) -> list[ShortGap]:
        """Consecutive requests to a host (robots.txt included) closer than its delay."""
        found: list[ShortGap] = []
        for host, requests in self._by_host.items():
            required = self.required_gap(host, delay)
            for prev, nxt in itertools.pairwise(requests):
                gap = nxt.start - prev.end
                if gap < required - self.epsilon:
                    found.append(ShortGap(prev, nxt, gap, required))
        return found

    # -- reports -------------------------------------------------------------------------
    def problems(
        self,
        truth: Iterable[str] | None = None,
        delay: float = 0.0,
        *,
        ignore_hosts: Iterable[str] = (),
        max_retries: int | None = None,
        max_pages_per_host: int | None = None,
        max_path_repeats: int | None = None,
    ) -> dict[str, list[object]]:
        """Every check that failed, by name; empty when the crawl is clean. The optional
        limits switch on `hammering`, `over_budget` and `repeated_segments`."""
        checks: dict[str, list[object]] = {
            "duplicates": list(self.duplicates()),
            "robots_violations": list(self.robots_violations()),
            "overlaps": list(self.overlaps()),
            "short_gaps": list(self.short_gaps(delay)),
            "retry_after_violations": list(self.retry_after_violations()),
        }
        if max_retries is not None:
            checks["hammering"] = list(self.hammering(max_retries))
        if max_pages_per_host is not None:
            over: list[object] = [*sorted(self.over_budget(max_pages_per_host).items())]
            checks["over_budget"] = over
        if max_path_repeats is not None:
            checks["repeated_segments"] = list(self.repeated_segments(max_path_repeats))
        if truth is not None:
            truth = set(truth)
            checks["missing"] = list(sorted(self.missing(truth)))
            unexpected = self.unexpected(truth, ignore_hosts=ignore_hosts)
            checks["unexpected"] = list(sorted(unexpected))
        return {name: items for name, items in checks.items() if items}

    def summary(
        self,
        truth: Iterable[str] | None = None,
        delay: float = 0.0,
        *,
        ignore_hosts: Iterable[str] = (),
    ) -> dict[str, int]:
        counts = {
            "requests": len(self.requests),
            "urls": len(self.requested()),
            "hosts": len(self._by_host),
            "peers": len({r.peer for r in self.requests}),
            "bytes_sent": sum(r.bytes_sent for r in self.requests),
            "duplicates": len(self.duplicates()),
            "robots_violations": len(self.robots_violations()),
            "overlaps": len(self.overlaps()),
            "short_gaps": len(self.short_gaps(delay)),
            "incomplete": sum(not r.complete for r in self.requests),
            "retry_after_violations": len(self.retry_after_violations()),
        }
        if truth is not None:
            truth = set(truth)
            counts["truth"] = len(truth)
            counts["missing"] = len(self.missing(truth))
            counts["unexpected"] = len(self.unexpected(truth, ignore_hosts=ignore_hosts))
        return counts

    def assert_clean(
        self,
        truth: Iterable[str] | None = None,
        delay: float = 0.0,
        *,
        ignore_hosts: Iterable[str] = (),
        max_retries: int | None = None,
        max_pages_per_host: int | None = None,
        max_path_repeats: int | None = None,
    ) -> None:
        found = self.problems(
            truth,
            delay,
            ignore_hosts=ignore_hosts,
            max_retries=max_retries,
            max_pages_per_host=max_pages_per_host,
            max_path_repeats=max_path_repeats,
        )
        if found:
            lines = [f"{name}: {len(items)}: {items[:5]!r}" for name, items in found.items()]
            raise AssertionError("crawl is not clean:\n" + "\n".join(lines))
