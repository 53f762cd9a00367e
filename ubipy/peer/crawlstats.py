"""What the crawl loop counts, and what seeding answers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(slots=True)
class CrawlStats:
    started_at: float = 0.0
    pages: int = 0
    bytes_in: int = 0
    errors: int = 0
    timeouts: int = 0
    truncated: int = 0
    retries: int = 0
    # Requests cut short because the peer lost sight of a majority.
    abandoned: int = 0
    robots_requests: int = 0
    robots_disallowed: int = 0
    robots_given_up: int = 0
    links_seen: int = 0
    out_of_scope: int = 0
    too_deep: int = 0
    # URLs (seeds, links, redirects) whose userinfo was stripped before admission.
    credentials_stripped: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    storage_failures: int = 0


@dataclass(frozen=True, slots=True)
class SeedResult:
    offered: int
    admitted: int
    refused: tuple[tuple[str, str], ...]
    forwarded: int = 0
