"""Pages as JSON Lines: one object per page, failed ones included, with the visits a
continuous crawl made of it after the first fetch (docs/storage.md, "Export formats")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Protocol

from ubipy.store.idn import unicode_url
from ubipy.store.snapshot import ExportSummary, PageHistory, StoredPage, StoredVisit, iso_utc

__all__ = ["page_json", "visit_json", "write_jsonl"]


def page_json(page: StoredPage) -> dict[str, Any]:
    return {
        "url": page.url,
        "url_unicode": unicode_url(page.url),
        "status": page.status,
        # Where a redirect pointed (absolute, normalised as a link is); null otherwise.
        "location": page.location,
        # The page said noindex (meta robots, X-Robots-Tag): for a search index to leave
        # out; null for an error or a redirect, and for pages stored before schema 19.
        "noindex": page.noindex,
        "title": page.title,
        "content_type": page.content_type,
        "length": page.length,
        "truncated": page.truncated,
        "fetched_at": iso_utc(page.fetched_at),
        "depth": page.depth,
        # A sitemap's fetch is a row like a page's; its depth (1,000,000 or 999,999) is
        # the shard's mark, which a reader should not have to know (QA).
        "sitemap": page.is_sitemap,
        "peer": page.peer,
        "error": page.error,
        "encoding": page.encoding,
        "encoding_source": page.encoding_source,
        # What a visit says of itself, the first fetch too: duplicates found by the
        # digest, a conditional GET's validators (QA: only the visits had them).
        "digest": page.digest,
        "etag": page.etag,
        "last_modified": page.last_modified,
    }


def visit_json(visit: StoredVisit) -> dict[str, Any]:
    """A visit after the first fetch. An unchanged one saw the version held, so it has
    no type, length or validators of its own: null, and 0 for the length (and false for
    truncated); one answered with something else (a 404, a redirect) has that answer's."""
    return {
        "at": iso_utc(visit.at),
        "status": visit.status,
        "location": visit.location,
        "noindex": visit.noindex,
        "changed": visit.changed,
        "digest": visit.digest,
        "content_type": visit.content_type,
        "length": visit.length,
        "etag": visit.etag,
        "last_modified": visit.last_modified,
        "truncated": visit.truncated,
    }


class _Sink(Protocol):
    def write(self, data: bytes, /) -> object: ...


def write_jsonl(histories: Iterator[PageHistory], out: _Sink, shards: int) -> ExportSummary:
    n = visits = sitemaps = 0
    for history in histories:
        sitemaps += history.page.is_sitemap
        row = page_json(history.page)
        seen = [visit_json(v) for v in history.visits]
        # Only a page visited again has the key: a one-off crawl's lines stay as they were.
        if seen:
            row["visits"] = seen
            visits += len(seen)
        line = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
        out.write(line.encode("utf-8") + b"\n")
        n += 1
    return ExportSummary(
        shards=shards, pages=n, records=n, left_out=0, visits=visits, sitemaps=sitemaps
    )
