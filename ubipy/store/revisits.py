"""A continuous crawl's records (``--recrawl``): each fetched page's revisit state and
each visit after the first, as the shard keeps them (tables ``refresh`` and ``visits``,
docs/storage.md)."""

from __future__ import annotations

from dataclasses import dataclass

from ubipy.store.warcrecords import HttpHead

__all__ = ["RefreshRow", "Visit"]


@dataclass(frozen=True, slots=True)
class RefreshRow:
    """A fetched page's history and when it is due again (wall-clock seconds)."""

    fp: int
    url: str
    host: str
    depth: int
    visits: int
    changes: int
    # Seconds from its first visit to its last.
    observed: float
    last_visit: float
    due: float
    # Its score under the crawl order when it was first fetched (0 under bfs).
    importance: float
    # The validators and digest of the copy kept: a conditional GET sends them.
    etag: str | None
    last_modified: str | None
    digest: str | None
    # Checks of its host's sitemap lastmods its visits made, and how many agreed
    # (ubipy.peer.hints): summed per host, whether the host's lastmods are trusted.
    lastmod_checks: int = 0
    lastmod_agreed: int = 0
    # Failed answers in a row, and of those the 404s: a start keeps its back-off and
    # its way to retirement (ubipy.peer.refreshing).
    failures: int = 0
    missing: int = 0


@dataclass(frozen=True, slots=True)
class Visit:
    """One visit of a page after its first (wall-clock ``at``): whether it had changed
    since the visit before (a 304, or the same digest, is unchanged). Unchanged, a row
    of a few dozen bytes: the page is not stored again; changed, the new version, its
    body (when bodies are kept) stored with it. The page's ``pages`` row stays its
    first version: an archive holds each version once."""

    fp: int
    at: float
    status: int | None
    changed: bool
    digest: str | None
    content_type: str | None = None
    length: int = 0
    etag: str | None = None
    last_modified: str | None = None
    body: bytes | None = None
    # The page's URL and the answer's head as received: what its WARC records say
    # (--bodies warc); a visit given without a head gets no records.
    url: str | None = None
    head: HttpHead | None = None
    # A changed version's body was cut at --max-body.
    truncated: bool = False
    # A redirect's target, as a page's (PageRecord.location).
    location: str | None = None
    noindex: bool | None = None  # a new version's, as a page's
