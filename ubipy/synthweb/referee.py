"""The referee: judges a crawl from the server's request log and the model.

Each check returns the offending items; an empty list (or set) is a pass. URLs are
compared in normalised form, so a crawler that requests both `/%7Edocs/` and `/~docs/`
shows up as a duplicate; `unnormalized()` lists requests whose raw target was not sent in
normalised form at all.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from ubipy.synthweb.log import Request, RequestLog
from ubipy.synthweb.model import SyntheticWeb
from ubipy.synthweb.urls import normalize_target, split_url

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


def _is_final(status: int) -> bool:
    """A response after which asking again is a duplicate (5xx and 429 invite a retry)."""
    return status < 500 and status != 429


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
            if 200 <= r.status < 300 or 400 <= r.status < 500:
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
            elif _is_final(r.status):
                finished.add(url)
        return dups

    def missing(self, truth: Iterable[str]) -> set[str]:
        return set(truth) - self.requested()

    def unexpected(self, truth: Iterable[str]) -> set[str]:
        return self.requested() - set(truth)

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
        self, truth: Iterable[str] | None = None, delay: float = 0.0
    ) -> dict[str, list[object]]:
        """Every check that failed, by name; empty when the crawl is clean."""
        checks: dict[str, list[object]] = {
            "duplicates": list(self.duplicates()),
            "robots_violations": list(self.robots_violations()),
            "overlaps": list(self.overlaps()),
            "short_gaps": list(self.short_gaps(delay)),
        }
        if truth is not None:
            truth = set(truth)
            checks["missing"] = list(sorted(self.missing(truth)))
            checks["unexpected"] = list(sorted(self.unexpected(truth)))
        return {name: items for name, items in checks.items() if items}

    def summary(self, truth: Iterable[str] | None = None, delay: float = 0.0) -> dict[str, int]:
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
        }
        if truth is not None:
            truth = set(truth)
            counts["truth"] = len(truth)
            counts["missing"] = len(self.missing(truth))
            counts["unexpected"] = len(self.unexpected(truth))
        return counts

    def assert_clean(self, truth: Iterable[str] | None = None, delay: float = 0.0) -> None:
        found = self.problems(truth, delay)
        if found:
            lines = [f"{name}: {len(items)}: {items[:5]!r}" for name, items in found.items()]
            raise AssertionError("crawl is not clean:\n" + "\n".join(lines))
