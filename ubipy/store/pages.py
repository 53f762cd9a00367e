"""The pages a peer fetched, as the shard keeps them: each page's row, its body, a
continuous crawl's revisit state and visits, and what sitemaps said of last changes.

A part of :class:`ubipy.store.shard.Shard` (a mixin over its connection): the
frontier, the outbox and the hosts are the shard's own.
"""

from __future__ import annotations

import enum
import sqlite3
import zlib
from collections.abc import Collection, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import astuple, dataclass
from pathlib import Path

from ubipy.errors import ShardError
from ubipy.store.revisits import RefreshRow, Visit
from ubipy.store.warcrecords import HttpHead
from ubipy.store.warcstore import CaptureKind, WarcStore, read_payload, reconstructed

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
    # The answer's head as received, for its WARC records (None: made from the fields
    # above, as an export reconstructs one).
    head: HttpHead | None = None
    # A redirect's target: its Location resolved against ``url`` (None: not a redirect).
    location: str | None = None
    # A meta robots or X-Robots-Tag said noindex (None: an answer not read for it).
    noindex: bool | None = None


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
    path: Path
    # Bodies go to WARC files (--bodies warc) when set, else into the shard.
    _warc: WarcStore | None = None

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    @property
    def keeps_warc(self) -> bool:
        """Whether page bodies go to WARC files (--bodies warc)."""
        return self._warc is not None

    # -- the shard's transaction, for the WARC store ----------------------------
    def _before_commit(self) -> None:
        if self._warc is not None:
            self._warc.before_commit()

    def _after_commit(self) -> None:
        if self._warc is not None:
            self._warc.committed()

    def _rolled_back(self) -> None:
        if self._warc is not None:
            self._warc.rolled_back()

    # -- pages --------------------------------------------------------------
    def record_pages(self, pages: Sequence[PageRecord]) -> None:
        """Store fetched pages and mark their frontier entries done."""
        with self.transaction():
            self._conn.executemany(
                "INSERT OR REPLACE INTO pages (fp, url, host, status, content_type, length, "
                "truncated, title, fetched_at, last_modified, etag, digest, depth, error, "
                "encoding, encoding_source, location, noindex) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                        p.location,
                        p.noindex,
                    )
                    for p in pages
                ],
            )
            if self._warc is not None:
                self._pages_to_warc(self._warc, pages)
                bodies = []
            else:
                bodies = [(p.fp, "zlib", zlib.compress(p.body, 6)) for p in pages if p.body]
            if bodies:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO bodies (fp, codec, body) VALUES (?, ?, ?)", bodies
                )
            self._conn.executemany(
                "UPDATE frontier SET state = ? WHERE fp = ?",
                [(FrontierState.DONE, p.fp) for p in pages],
            )

    def save_refresh(
        self, rows: Sequence[RefreshRow], visits: Sequence[Visit], retired: Collection[int] = ()
    ) -> None:
        """A continuous crawl's pages' revisit state, and their visits after the first;
        the rows of the pages ``retired`` (no longer refreshed: gone, moved) are
        deleted, a row of theirs among ``rows`` not written. One transaction (a
        caller's, if open): a rollback keeps the retired rows."""
        gone = set(retired)
        with self.transaction():
            self._conn.executemany(
                f"INSERT OR REPLACE INTO refresh VALUES ({', '.join('?' * 17)})",
                [astuple(r) for r in rows if r.fp not in gone],
            )
            if gone:
                self._conn.executemany("DELETE FROM refresh WHERE fp = ?", [(fp,) for fp in gone])
            self._conn.executemany(
                "INSERT OR REPLACE INTO visits VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                        int(v.truncated),
                        v.location,
                        v.noindex,
                    )
                    for v in visits
                ],
            )
            if self._warc is not None:
                self._visits_to_warc(self._warc, rows, visits)
                return
            self._conn.executemany(
                "INSERT OR REPLACE INTO visit_bodies VALUES (?, ?, 'zlib', ?)",
                [(v.fp, v.at, zlib.compress(v.body, 6)) for v in visits if v.body],
            )

    @staticmethod
    def _pages_to_warc(warc: WarcStore, pages: Sequence[PageRecord]) -> None:
        """Real HTTP answers whose body was kept (or was empty), as WARC records: as an
        export, a failed request or a body not kept (--no-bodies) gets none."""
        for p in pages:
            body = p.body if p.body is not None else (b"" if not p.length else None)
            if p.status is None or p.error is not None or body is None:
                continue
            head = p.head or reconstructed(
                p.status, p.content_type, p.etag, p.last_modified, p.location
            )
            warc.page(
                p.fp,
                p.url,
                p.fetched_at,
                p.depth,
                head,
                body,
                truncated=p.truncated,
                title=p.title,
                encoding=p.encoding,
                encoding_source=p.encoding_source,
            )

    def _visits_to_warc(
        self, warc: WarcStore, rows: Sequence[RefreshRow], visits: Sequence[Visit]
    ) -> None:
        known = {r.fp: r for r in rows}
        for v in visits:
            row = known.get(v.fp)
            url = v.url or (row.url if row is not None else self._url_of(v.fp))
            if url is None or v.status is None:
                continue
            head = v.head or reconstructed(
                v.status, v.content_type, v.etag, v.last_modified, v.location
            )
            warc.visit(v, url, None if row is None else row.depth, head)

    def _url_of(self, fp: int) -> str | None:
        row = self._conn.execute("SELECT url FROM pages WHERE fp = ?", (fp,)).fetchone()
        return None if row is None else str(row[0])

    def refresh_rows(self) -> list[RefreshRow]:
        cur = self._conn.execute("SELECT * FROM refresh ORDER BY due")
        return [RefreshRow(*row) for row in cur]

    def refresh_planned(self) -> int:
        """How many pages a --recrawl run left due again."""
        return int(self._conn.execute("SELECT count(*) FROM refresh").fetchone()[0])

    def never_revisited(
        self,
    ) -> list[tuple[int, str, str, int, float, str | None, str | None, str]]:
        """The pages fetched with a 200 and a body kept (fp, url, host, depth, fetched_at,
        etag, last_modified, digest) that have no revisit row and were never visited
        again: fetched while the crawl was no --recrawl one (a retired page has its
        visits, and stays retired), oldest first. Only those whose host is still this
        shard's: a host handed to another peer keeps its pages here, not its frontier
        rows, nor its revisit rows (its new owner refreshes it)."""
        return self._conn.execute(
            "SELECT fp, url, host, depth, fetched_at, etag, last_modified, digest FROM pages p "
            "WHERE status = 200 AND error IS NULL AND digest IS NOT NULL "
            "AND EXISTS (SELECT 1 FROM frontier f WHERE f.fp = p.fp) "
            "AND NOT EXISTS (SELECT 1 FROM refresh r WHERE r.fp = p.fp) "
            "AND NOT EXISTS (SELECT 1 FROM visits v WHERE v.fp = p.fp) "
            "ORDER BY fetched_at"
        ).fetchall()

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
        """A page's first version's body, from the shard or its WARC record; None when
        none was kept (or it was empty)."""
        row = self._conn.execute("SELECT codec, body FROM bodies WHERE fp = ?", (fp,)).fetchone()
        if row is None:
            at = self._conn.execute(
                "SELECT file, offset, length FROM warc WHERE fp = ? AND kind = ? "
                "ORDER BY at LIMIT 1",
                (fp, CaptureKind.RESPONSE),
            ).fetchone()
            if at is None:
                return None
            return read_payload(self.path.parent, str(at[0]), int(at[1]), int(at[2])) or None
        codec, blob = row
        if codec != "zlib":
            raise ShardError(f"unknown body codec {codec!r}")
        return zlib.decompress(blob)

    def iter_pages(self) -> Iterator[sqlite3.Row]:
        cur = self._conn.cursor()
        cur.row_factory = sqlite3.Row
        yield from cur.execute("SELECT * FROM pages ORDER BY fetched_at")
