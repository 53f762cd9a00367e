"""The pages a peer fetched, as the shard keeps them: each page's row, its body, a
continuous crawl's revisit state and visits, and what sitemaps said of last changes.

A part of :class:`ubipy.store.shard.Shard` (a mixin over its connection): the
frontier, the outbox and the hosts are the shard's own.
"""

from __future__ import annotations

import enum
import sqlite3
import zlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import astuple, dataclass

from ubipy.errors import ShardError
from ubipy.store.revisits import RefreshRow, Visit

__all__ = ["FrontierState", "Lastmod", "PageRecord", "PagesMixin"]


class FrontierState(enum.IntEnum):
    PENDING = 0
    DONE = 1
    SKIPPED = 2


@dataclass(frozen=True, slots=True)
class PageRecord:
    fp: int
    url: str
    host: str
    status: int | None
    content_type: str | None
    length: int
    truncated: bool
    title: str | None
    fetched_at: float
    last_modified: str | None
    etag: str | None
    digest: str | None
    depth: int
    error: str | None
    body: bytes | None
    # The encoding an HTML page was read in (WHATWG name) and what decided it
    # (bom, header, meta, detected, default); None for pages that were not parsed.
    encoding: str | None = None
    encoding_source: str | None = None


@dataclass(frozen=True, slots=True)
class Lastmod:
    """What a sitemap said of when a URL last changed (a W3C datetime, as written)."""

    fp: int
    url: str
    host: str
    lastmod: str


class PagesMixin:
    """The shard's pages, bodies, revisits and lastmods (see the module's docstring)."""

    _conn: sqlite3.Connection

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    # -- pages --------------------------------------------------------------
    def record_pages(self, pages: Sequence[PageRecord]) -> None:
        """Store fetched pages and mark their frontier entries done."""
        with self.transaction():
            self._conn.executemany(
                "INSERT OR REPLACE INTO pages (fp, url, host, status, content_type, length, "
                "truncated, title, fetched_at, last_modified, etag, digest, depth, error, "
                "encoding, encoding_source) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        p.fp,
                        p.url,
                        p.host,
                        p.status,
                        p.content_type,
                        p.length,
                        int(p.truncated),
                        p.title,
                        p.fetched_at,
                        p.last_modified,
                        p.etag,
                        p.digest,
                        p.depth,
                        p.error,
                        p.encoding,
                        p.encoding_source,
                    )
                    for p in pages
                ],
            )
            bodies = [(p.fp, "zlib", zlib.compress(p.body, 6)) for p in pages if p.body]
            if bodies:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO bodies (fp, codec, body) VALUES (?, ?, ?)", bodies
                )
            self._conn.executemany(
                "UPDATE frontier SET state = ? WHERE fp = ?",
                [(FrontierState.DONE, p.fp) for p in pages],
            )

    def save_refresh(self, rows: Sequence[RefreshRow], visits: Sequence[Visit]) -> None:
        """A continuous crawl's pages' revisit state, and their visits after the first."""
        with self.transaction():
            self._conn.executemany(
                f"INSERT OR REPLACE INTO refresh VALUES ({', '.join('?' * 15)})",
                [astuple(r) for r in rows],
            )
            self._conn.executemany(
                "INSERT OR REPLACE INTO visits VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        v.fp,
                        v.at,
                        v.status,
                        int(v.changed),
                        v.digest,
                        v.content_type,
                        v.length,
                        v.etag,
                        v.last_modified,
                    )
                    for v in visits
                ],
            )
            self._conn.executemany(
                "INSERT OR REPLACE INTO visit_bodies VALUES (?, ?, 'zlib', ?)",
                [(v.fp, v.at, zlib.compress(v.body, 6)) for v in visits if v.body],
            )

    def refresh_rows(self) -> list[RefreshRow]:
        cur = self._conn.execute("SELECT * FROM refresh ORDER BY due")
        return [RefreshRow(*row) for row in cur]

    def save_lastmods(self, items: Sequence[Lastmod]) -> None:
        """Keep what sitemaps said of URLs' last changes; the latest reading wins."""
        with self.transaction():
            self._conn.executemany(
                "INSERT INTO lastmod (fp, url, host, lastmod) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(fp) DO UPDATE SET lastmod = excluded.lastmod",
                [(m.fp, m.url, m.host, m.lastmod) for m in items],
            )

    def lastmods(self, host: str | None = None) -> list[Lastmod]:
        """The lastmod dates kept (of one host's URLs, if given), by URL."""
        where, args = ("WHERE host = ?", (host,)) if host is not None else ("", ())
        cur = self._conn.execute(
            f"SELECT fp, url, host, lastmod FROM lastmod {where} ORDER BY url", args
        )
        return [Lastmod(int(a), str(b), str(c), str(d)) for a, b, c, d in cur]

    def page_body(self, fp: int) -> bytes | None:
        row = self._conn.execute("SELECT codec, body FROM bodies WHERE fp = ?", (fp,)).fetchone()
        if row is None:
            return None
        codec, blob = row
        if codec != "zlib":
            raise ShardError(f"unknown body codec {codec!r}")
        return zlib.decompress(blob)

    def iter_pages(self) -> Iterator[sqlite3.Row]:
        cur = self._conn.cursor()
        cur.row_factory = sqlite3.Row
        yield from cur.execute("SELECT * FROM pages ORDER BY fetched_at")
