"""What a page's answer becomes: its stored record (digest, title, encoding) and the
URLs it reveals (a redirect's target at the same depth, an HTML page's links one hop
deeper, none past ``--max-depth``), counted in the crawl's figures."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Protocol

from ubipy.config import CrawlConfig
from ubipy.fetch import Entry, FetchResult, content_digest, parse_html
from ubipy.peer.commits import page_record
from ubipy.peer.crawlstats import CrawlStats
from ubipy.store import NewURL, PageRecord

__all__ = ["Candidates", "read_page"]


class Candidates(Protocol):
    """Links (relative to a base URL, or None: absolute, with their host keys when
    known) at a depth -> the URLs to admit."""

    def __call__(
        self,
        links: Sequence[str],
        base: str | None,
        depth: int,
        /,
        *,
        hosts: Sequence[str] | None = None,
    ) -> list[NewURL]: ...


def read_page(
    entry: Entry,
    host: str,
    result: FetchResult,
    *,
    config: CrawlConfig,
    candidates: Candidates,
    stats: CrawlStats,
    seed_redirect: Callable[[str, str], object] = lambda location, seed: None,
    fetched_at: float | None = None,
) -> tuple[PageRecord, list[NewURL]]:
    """The page's record and the URLs it revealed; ``seed_redirect(location, seed)``
    is told where a URL at depth 0 (a seed, or where one led) redirects, first.
    ``fetched_at``: when the answer ended (the wall clock; None: now)."""
    discovered: list[NewURL] = []
    title = encoding = encoding_source = None
    digest = None
    stats.answered(result)
    if result.ok and result.accepted:
        digest = content_digest(result.body)
        if result.is_redirect:
            assert result.location is not None
            # A redirect is not a link hop: the target keeps the depth.
            if entry.depth == 0:
                seed_redirect(result.location, entry.url)
            discovered = candidates([result.location], entry.url, entry.depth)
        elif result.is_html:
            parsed = parse_html(result.body, entry.url, encoding=result.charset)
            title, encoding = parsed.title, parsed.encoding
            if parsed.encoding_source is not None:
                encoding_source = parsed.encoding_source.value
            stats.refused["link"] += parsed.links_refused
            stats.credentials_stripped += parsed.links_stripped
            if entry.depth + 1 > (config.bounds.max_depth or math.inf):
                stats.too_deep += len(parsed.links)
            else:
                discovered = candidates(parsed.links, None, entry.depth + 1, hosts=parsed.hosts)
    page = page_record(
        entry,
        host,
        result,
        keep_body=config.fetch.store_bodies,
        digest=digest,
        title=title,
        encoding=encoding,
        encoding_source=encoding_source,
        fetched_at=fetched_at,
    )
    return page, discovered
