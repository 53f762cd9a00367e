"""What the shard keeps of an answer: its page record, and its head as received for
its WARC records."""

from __future__ import annotations

import time

from ubipy.fetch import Entry, FetchResult
from ubipy.store import HttpHead, PageRecord

__all__ = ["head_of", "page_record"]


def page_record(
    entry: Entry,
    host: str,
    result: FetchResult,
    *,
    keep_body: bool,
    digest: str | None,
    title: str | None = None,
    encoding: str | None = None,
    encoding_source: str | None = None,
    fetched_at: float | None = None,
    noindex: bool | None = None,
) -> PageRecord:
    """What the shard keeps of an answered (or failed) request for ``entry``, which
    ended at ``fetched_at`` (the wall clock; None: now)."""
    return PageRecord(
        fp=entry.fp,
        url=entry.url,
        host=host,
        status=result.status,
        content_type=result.content_type,
        length=len(result.body),
        truncated=result.truncated,
        title=title,
        fetched_at=time.time() if fetched_at is None else fetched_at,
        last_modified=result.last_modified,
        etag=result.etag,
        digest=digest,
        depth=entry.depth,
        error=result.detail,
        body=result.body if keep_body and result.body else None,
        encoding=encoding,
        encoding_source=encoding_source,
        head=head_of(result),
        location=result.target,
        noindex=noindex,
    )


def head_of(result: FetchResult) -> HttpHead | None:
    """The answer's head as received (None: no answer), for its WARC records."""
    if result.status is None:
        return None
    return HttpHead(
        result.status,
        result.reason,
        result.http_version,
        result.raw_headers,
        result.request_headers,
    )
