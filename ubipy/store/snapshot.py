"""A shard as an export reads it: opened read-only in one read transaction, its pages
in fetch order, each with the visits a continuous crawl made of it after the first.

Opened for reading only (SQLite's ``mode=ro``, or, for a stopped peer's shard, a
connection whose writes to it are refused: see ``_connect``), the shard is never
changed and never migrated, so a live peer's shard can be read while the peer
writes, and a shard of any version from 1 on is read as it is: a column or a table
it does not have yet reads as null or as nothing (version 1 has no encoding columns,
versions before 5 no visits).
"""

from __future__ import annotations

import os
import sqlite3
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from ubipy.errors import ExportError
from ubipy.store.schema import PEER_ID_META as PEER_ID_META
from ubipy.store.schema import SITEMAP_DEPTHS_FROM, unsupported
from ubipy.store.shard import SCHEMA_VERSION, SHARD_FILE
from ubipy.store.warcrecords import iso_utc as iso_utc
from ubipy.store.warcstore import CaptureKind

__all__ = [
    "PEER_ID_META",
    "ExportSummary",
    "PageHistory",
    "ShardReader",
    "StoredPage",
    "StoredVisit",
    "iso_utc",
]


_FIRST_PAGE_COLUMNS = (
    "fp url status content_type length truncated title fetched_at last_modified etag depth error"
)
_FIRST_VISIT_COLUMNS = "at status changed digest content_type length etag last_modified"
# The columns read, each with the schema version that brought it and what an older
# shard gives instead (a shard is read, never migrated).
_PAGE_COLUMNS = (
    *((name, 1, "NULL") for name in _FIRST_PAGE_COLUMNS.split()),
    ("encoding", 2, "NULL"),
    ("encoding_source", 2, "NULL"),
    ("digest", 1, "NULL"),
    ("location", 18, "NULL"),  # a redirect's target
    ("noindex", 19, "NULL"),
)
_VISIT_COLUMNS = (
    *((name, 5, "NULL") for name in _FIRST_VISIT_COLUMNS.split()),
    ("truncated", 9, "0"),  # before, a visit did not say whether its body was cut
    ("location", 18, "NULL"),
    ("noindex", 19, "NULL"),
)
# The first version with the visits of a continuous crawl.
_VISITS_SINCE = 5


def _columns(columns: tuple[tuple[str, int, str], ...], version: int) -> str:
    return ", ".join(name if version >= since else instead for name, since, instead in columns)


# The first version whose bodies may be in WARC files (table warc).
_WARC_SINCE = 7
# A visit of the page that a WARC must hold (a response or a revisit). One answered
# with something else (a 404, a 503, a redirect) is in a peer's WARC files only in a
# shard that wrote such records, and one with no answer never is: counted as ones
# outside them, a crawl whose captures were all there was exported with a file of
# nothing beside them and its failures reported as visits left out (a review).
_ANSWERED = "(changed OR status IN (200, 304))"
# A page (or visit) whose capture is in the peer's WARC files.
_IN_WARC = "EXISTS (SELECT 1 FROM warc w WHERE w.fp = {t}.fp AND w.at = {t}.{at})"


@dataclass(frozen=True, slots=True)
class InWarc:
    """A capture whose records are in the peer's WARC files: its response's (or
    revisit's) record id and payload digest, what a revisit written beside them refers
    to."""

    record_id: str
    payload_digest: str | None


@dataclass(frozen=True, slots=True)
class StoredPage:
    """One row of a shard's ``pages`` table (a page's first fetch), with its body when
    asked for."""

    peer: str | None
    url: str
    status: int | None
    content_type: str | None
    length: int
    truncated: bool
    title: str | None
    fetched_at: float
    last_modified: str | None
    etag: str | None
    depth: int
    error: str | None
    body: bytes | None  # None: not loaded, or not kept in the shard
    # The encoding an HTML page was read in and what decided it (None: not parsed).
    encoding: str | None = None
    encoding_source: str | None = None
    # The body's xxh3-128 digest (duplicate content); None when no body was kept.
    digest: str | None = None
    # Read beside the WARC files (``outside_warc``): its first fetch is in them.
    in_warc: InWarc | None = None
    # A redirect's target, its Location resolved against ``url`` (None: not a
    # redirect, or a shard before version 18).
    location: str | None = None
    # A meta robots or X-Robots-Tag said noindex (for this crawler's token, or all);
    # None: not an answer read for it (an error, a redirect), or a shard before 19.
    noindex: bool | None = None

    @property
    def is_response(self) -> bool:
        """A real HTTP response: a status, and nothing went wrong after it."""
        return self.status is not None and self.error is None

    @property
    def is_sitemap(self) -> bool:
        """A sitemap's fetch, not a page's: its row is at a sitemap's depth."""
        return self.depth >= SITEMAP_DEPTHS_FROM


@dataclass(frozen=True, slots=True)
class StoredVisit:
    """One row of ``visits``: a visit of a page after its first fetch. Unchanged (a 304,
    or a 200 of the same digest), it has no type, length, validators or body of its
    own: it saw the version held. Changed, they are the new version's; answered with
    something else (a 404, a redirect), that answer's."""

    at: float
    status: int | None
    changed: bool
    digest: str | None
    content_type: str | None
    length: int
    etag: str | None
    last_modified: str | None
    body: bytes | None  # a changed (or not-the-page) visit's, when asked for and kept
    truncated: bool = False  # a changed visit's body was cut at --max-body
    # Read beside the WARC files (``outside_warc``): the visit is in them.
    in_warc: InWarc | None = None
    location: str | None = None  # a redirect's target, as a page's
    noindex: bool | None = None  # a changed version's, as a page's

    @property
    def is_unchanged_answer(self) -> bool:
        """The server said, or showed, that the version held is still current."""
        return not self.changed and self.status in (200, 304)


@dataclass(frozen=True, slots=True)
class PageHistory:
    """A page's first fetch and its visits after it, in time order. The visits are read
    from the shard as they are iterated (at most one body in memory), once."""

    page: StoredPage
    visits: Iterator[StoredVisit]
    fp: int = 0


@dataclass(frozen=True, slots=True)
class ExportSummary:
    shards: int
    pages: int  # pages read from the shards
    records: int  # WARC records (warcinfo included) or JSON lines written
    left_out: int  # pages not in a WARC: errors, or a body the shard did not keep
    visits: int = 0  # visits after the first fetch, read from the shards
    visits_left_out: int = 0  # visits not in a WARC (see ubipy.store.warc)
    files: int = 0  # peers' WARC files copied or linked (--bodies warc)
    sitemaps: int = 0  # of the pages written, sitemaps' fetches
    sitemaps_left_out: int = 0  # of those left out, sitemaps' fetches


# What a read-write connection may not do to the shard's own tables (and see below).
_WRITES = frozenset(
    {
        sqlite3.SQLITE_INSERT,
        sqlite3.SQLITE_UPDATE,
        sqlite3.SQLITE_DELETE,
        sqlite3.SQLITE_CREATE_TABLE,
        sqlite3.SQLITE_CREATE_INDEX,
        sqlite3.SQLITE_CREATE_TRIGGER,
        sqlite3.SQLITE_CREATE_VIEW,
        sqlite3.SQLITE_DROP_TABLE,
        sqlite3.SQLITE_DROP_INDEX,
        sqlite3.SQLITE_DROP_TRIGGER,
        sqlite3.SQLITE_DROP_VIEW,
        sqlite3.SQLITE_ALTER_TABLE,
        sqlite3.SQLITE_REINDEX,
        sqlite3.SQLITE_ANALYZE,
    }
)


def _reads_only(
    action: int, _arg1: str | None, arg2: str | None, db: str | None, _t: str | None
) -> int:
    if action in _WRITES and db == "main":
        return sqlite3.SQLITE_DENY
    # A pragma given a value may set one (user_version, journal_mode). VACUUM begins
    # with an ATTACH of its own, and a shard's reader attaches nothing.
    if (action == sqlite3.SQLITE_PRAGMA and arg2 is not None) or action == sqlite3.SQLITE_ATTACH:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def _connect(path: Path) -> sqlite3.Connection:
    """``path`` opened for reading only. A shard in WAL mode is read through its
    ``-shm`` file, which SQLite makes beside it if missing, with an empty ``-wal``.

    A shard with neither (its peer stopped, every commit in the file) in a directory
    this user can write is opened read-write, with its writes to the shard refused (an
    authorizer: ``query_only`` would refuse the export's temporary tables too). The
    last connection to close removes the two files it made, which a ``mode=ro`` one
    cannot: they were left beside a stopped peer's shard (QA). A peer that starts
    meanwhile shares them. Whichever of the two closes last removes them, and that
    may be the export: it then checkpoints into the shard file what the peer
    committed, as the peer would have; the export's own writes never reach it.

    Where SQLite cannot make them (a read-only mount, another user's directory, a
    snapshot), a shard with no write-ahead log left is opened as immutable, which
    needs none; one with a log may be live, or holds commits the file lacks, and is
    refused with SQLite's error."""
    real = path.resolve()
    wal = real.with_name(real.name + "-wal")
    shm = real.with_name(real.name + "-shm")
    if os.access(real.parent, os.W_OK) and not wal.exists() and not shm.exists():
        try:
            conn = sqlite3.connect(real, isolation_level=None)
        except sqlite3.Error:
            pass  # read as below, and reported as it is read
        else:
            try:
                conn.set_authorizer(_reads_only)
                conn.execute("PRAGMA user_version").fetchone()
            except sqlite3.Error:
                conn.close()  # not a database, say: as below
            else:
                return conn
    uri = real.as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA user_version").fetchone()
    except sqlite3.OperationalError:
        if os.access(real.parent, os.W_OK) or (wal.exists() and wal.stat().st_size > 0):
            return conn  # the error is met again, and reported, as the shard is read
        conn.close()
        conn = sqlite3.connect(uri + "&immutable=1", uri=True, isolation_level=None)
    except sqlite3.Error:
        pass  # not a database, say: reported as the shard is read
    return conn


class ShardReader:
    """A shard opened for reading only, for export; it never changes the shard, so it
    is safe on a live peer."""

    def __init__(self, data_dir: Path) -> None:
        if not data_dir.exists():
            raise ExportError(f"{data_dir}: no such directory")
        # The data directory, or the shard file itself.
        path = data_dir / SHARD_FILE if data_dir.is_dir() else data_dir
        if not path.is_file():
            raise ExportError(f"{data_dir}: not a ubipy data directory (no {SHARD_FILE})")
        self.path = path
        try:
            conn = _connect(path)
        except sqlite3.Error as exc:
            raise ExportError(f"{path}: cannot open shard: {exc}") from exc
        # A title or URL that is not valid UTF-8 is replaced, not fatal.
        conn.text_factory = lambda b: b.decode("utf-8", "replace")
        self._conn = conn
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version == 0:
                raise ExportError(f"{path}: not a ubipy shard (no schema version)")
            if not 1 <= version <= SCHEMA_VERSION:
                raise ExportError(unsupported(path, version))
            self._columns = _columns(_PAGE_COLUMNS, version)
            self._has_visits = version >= _VISITS_SINCE
            self._visit_columns = _columns(_VISIT_COLUMNS, version)
            self.has_warc = version >= _WARC_SINCE
            # One snapshot for the whole export, whatever the peer commits meanwhile.
            conn.execute("BEGIN")
            conn.execute(f"SELECT {self._columns} FROM pages LIMIT 0")
            conn.execute("SELECT fp, codec, body FROM bodies LIMIT 0")
            if self._has_visits:
                conn.execute(f"SELECT fp, {self._visit_columns} FROM visits LIMIT 0")
                conn.execute("SELECT fp, at, codec, body FROM visit_bodies LIMIT 0")
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (PEER_ID_META,)).fetchone()
        except ExportError:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            raise ExportError(f"{path}: not a readable ubipy shard: {exc}") from exc
        self.peer_id: str | None = None if row is None else str(row[0])
        self._carried = False  # see carry()

    def close(self) -> None:
        self._conn.close()

    def pages(self, *, bodies: bool) -> Iterator[StoredPage]:
        """Every stored page in fetch order; with ``bodies``, each with its body."""
        for page, _ in self._pages(bodies=bodies):
            yield page

    def histories(self, *, bodies: bool, outside_warc: bool = False) -> Iterator[PageHistory]:
        """Every stored page in fetch order, each with its later visits; with
        ``bodies``, the first fetch's body and each changed visit's. With
        ``outside_warc``, the pages with a capture whose records are not in the
        peer's WARC files (--bodies shard, or stored before #20), each with all its
        visits: those in the WARC files say so (``in_warc``), a page whose first fetch
        is there too, so that what is written beside them refers to the version the
        page had (--bodies switched during a continuous crawl)."""
        for page, fp in self._pages(bodies=bodies, outside_warc=outside_warc):
            captures = self._in_warc(fp) if outside_warc else {}
            if captures and (first := captures.get(page.fetched_at)) is not None:
                page = replace(page, in_warc=first)
            yield PageHistory(page, self._visits(fp, bodies=bodies, in_warc=captures), fp)

    def strays(self) -> dict[int, tuple[int, int]]:
        """The visits this shard holds of pages it does not (fp -> their number, and
        of those the answers of the page not in the WARC files): a host handed to this
        peer during a continuous crawl is visited here, its first fetch kept by its
        old owner (ubipy.store.strays joins them at export)."""
        if not self._has_visits:
            return {}
        outside = f"{_ANSWERED} AND NOT " + _IN_WARC.format(t="visits", at="at")
        if not self.has_warc:
            outside = _ANSWERED
        try:
            rows = self._conn.execute(
                f"SELECT fp, COUNT(*), SUM({outside}) FROM visits "
                "WHERE fp NOT IN (SELECT fp FROM pages) GROUP BY fp"
            ).fetchall()
        except sqlite3.Error as exc:
            raise ExportError(f"{self.path}: reading visits failed: {exc}") from exc
        return {int(fp): (int(n), int(answered)) for fp, n, answered in rows}

    def carry(self, fps: Iterable[int]) -> set[int]:
        """Of ``fps``, those of pages this shard holds, which :meth:`histories` gives
        out beside the WARC files too (``outside_warc``): other shards' visits of them
        are to be written there."""
        try:
            conn = self._conn
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS carried (fp INTEGER PRIMARY KEY)")
            conn.executemany("INSERT OR IGNORE INTO temp.carried VALUES (?)", ((fp,) for fp in fps))
            conn.execute("DELETE FROM temp.carried WHERE fp NOT IN (SELECT fp FROM pages)")
            self._carried = True
            return {int(fp) for (fp,) in conn.execute("SELECT fp FROM temp.carried")}
        except sqlite3.Error as exc:
            raise ExportError(f"{self.path}: reading pages failed: {exc}") from exc

    def visits_of(self, fp: int, *, bodies: bool, outside_warc: bool) -> list[StoredVisit]:
        """A page's visits, as :meth:`histories` gives them."""
        captures = self._in_warc(fp) if outside_warc else {}
        return list(self._visits(fp, bodies=bodies, in_warc=captures))

    def _in_warc(self, fp: int) -> dict[float, InWarc]:
        """The page's captures in the WARC files, by time."""
        if not self.has_warc:
            return {}
        try:
            rows = self._conn.execute(
                "SELECT at, record_id, payload_digest FROM warc WHERE fp = ?", (fp,)
            ).fetchall()
        except sqlite3.Error as exc:
            raise ExportError(f"{self.path}: reading the WARC table failed: {exc}") from exc
        return {float(at): InWarc(str(rid), digest) for at, rid, digest in rows}

    def warc_counts(self) -> tuple[int, int, int, int, int]:
        """(pages, captures, others, robots, sitemaps): the pages whose first fetch has
        records in the peer's WARC files, the captures of pages there, the answered
        pages and visits whose records are not there (their bodies in the shard), the
        robots.txt answers there, and the sitemaps among those pages. Zeros before
        version 7."""
        if not self.has_warc:
            return 0, 0, 0, 0, 0
        try:
            first, sitemaps = self._conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(depth >= ?), 0) FROM pages WHERE "
                + _IN_WARC.format(t="pages", at="fetched_at"),
                (SITEMAP_DEPTHS_FROM,),
            ).fetchone()
            kinds = dict(
                self._conn.execute(
                    "SELECT kind = ?, COUNT(*) FROM warc GROUP BY 1", (CaptureKind.ROBOTS,)
                ).fetchall()
            )
            captures, robots = kinds.get(0, 0), kinds.get(1, 0)
            rest = self._conn.execute(
                "SELECT COUNT(*) FROM pages WHERE status IS NOT NULL AND error IS NULL AND NOT "
                + _IN_WARC.format(t="pages", at="fetched_at")
            ).fetchone()[0]
            rest += self._conn.execute(
                f"SELECT COUNT(*) FROM visits WHERE {_ANSWERED} AND NOT "
                + _IN_WARC.format(t="visits", at="at")
            ).fetchone()[0]
        except sqlite3.Error as exc:
            raise ExportError(f"{self.path}: reading the WARC table failed: {exc}") from exc
        return int(first), int(captures), int(rest), int(robots), int(sitemaps)

    def warc_ends(self) -> dict[str, int]:
        """Per WARC file, where its last capture ends: how long it is at least."""
        if not self.has_warc:
            return {}
        try:
            rows = self._conn.execute("SELECT file, MAX(end) FROM warc GROUP BY file").fetchall()
        except sqlite3.Error as exc:
            raise ExportError(f"{self.path}: reading the WARC table failed: {exc}") from exc
        return {str(file): int(end) for file, end in rows}

    def warc_mark(self) -> tuple[str, int] | None:
        """How far the peer's open WARC file was committed, at this snapshot."""
        if not self.has_warc:
            return None
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'warc_end'").fetchone()
        if row is None:
            return None
        name, _, end = str(row[0]).rpartition(" ")
        return name, int(end)

    def fps(self) -> Iterator[int]:
        """The pages' fingerprints, in order."""
        try:
            for (fp,) in self._conn.execute("SELECT fp FROM pages ORDER BY fp"):
                yield int(fp)
        except sqlite3.Error as exc:
            raise ExportError(f"{self.path}: reading pages failed: {exc}") from exc

    def history_of(self, fp: int) -> PageHistory | None:
        """A page's first fetch here and its visits (no bodies), if this shard has it."""
        for page, _ in self._pages(bodies=False, fp=fp):
            return PageHistory(page, self._visits(fp, bodies=False, in_warc={}), fp)
        return None

    def _pages(
        self, *, bodies: bool, outside_warc: bool = False, fp: int | None = None
    ) -> Iterator[tuple[StoredPage, int]]:
        where = "" if fp is None else f"WHERE fp = {int(fp)}"
        if outside_warc and self.has_warc:
            where = "WHERE NOT " + _IN_WARC.format(t="pages", at="fetched_at")
            if self._has_visits:
                where += " OR EXISTS (SELECT 1 FROM visits WHERE visits.fp = pages.fp AND "
                where += f"{_ANSWERED} AND NOT " + _IN_WARC.format(t="visits", at="at") + ")"
            if self._carried:
                where += " OR fp IN (SELECT fp FROM temp.carried)"
        try:
            cur = self._conn.execute(
                f"SELECT {self._columns} FROM pages {where} ORDER BY fetched_at, fp"
            )
            for (
                fp, url, status, ctype, length, trunc, title, at, lm, etag, depth, error,
                encoding, source, digest, location, noindex,
            ) in cur:  # fmt: skip
                page = StoredPage(
                    peer=self.peer_id,
                    url=str(url),
                    status=None if status is None else int(status),
                    content_type=ctype,
                    length=int(length),
                    truncated=bool(trunc),
                    title=title,
                    fetched_at=float(at),
                    last_modified=lm,
                    etag=etag,
                    depth=int(depth),
                    error=error,
                    body=self._body(int(fp)) if bodies else None,
                    encoding=encoding,
                    encoding_source=source,
                    digest=digest,
                    location=location,
                    noindex=None if noindex is None else bool(noindex),
                )
                yield page, int(fp)
        except sqlite3.Error as exc:
            raise ExportError(f"{self.path}: reading pages failed: {exc}") from exc

    def _visits(
        self, fp: int, *, bodies: bool, in_warc: dict[float, InWarc]
    ) -> Iterator[StoredVisit]:
        if not self._has_visits:
            return
        try:
            # The primary key (fp, at): one page's visits, in time order, by the index.
            cur = self._conn.execute(
                f"SELECT {self._visit_columns} FROM visits WHERE fp = ? ORDER BY at", (fp,)
            )
            for at, status, changed, digest, ctype, length, etag, lm, cut, location, noindex in cur:
                there = in_warc.get(float(at))
                yield StoredVisit(
                    at=float(at),
                    status=None if status is None else int(status),
                    changed=bool(changed),
                    digest=digest,
                    content_type=ctype,
                    length=int(length),
                    etag=etag,
                    last_modified=lm,
                    body=(
                        self._visit_body(fp, at)
                        if bodies and (changed or status not in (200, 304)) and there is None
                        else None
                    ),
                    truncated=bool(cut),
                    in_warc=there,
                    location=location,
                    noindex=None if noindex is None else bool(noindex),
                )
        except sqlite3.Error as exc:
            raise ExportError(f"{self.path}: reading visits failed: {exc}") from exc

    def _body(self, fp: int) -> bytes | None:
        row = self._conn.execute("SELECT codec, body FROM bodies WHERE fp = ?", (fp,)).fetchone()
        return None if row is None else self._decoded(*row)

    def _visit_body(self, fp: int, at: float) -> bytes | None:
        row = self._conn.execute(
            "SELECT codec, body FROM visit_bodies WHERE fp = ? AND at = ?", (fp, at)
        ).fetchone()
        return None if row is None else self._decoded(*row)

    def _decoded(self, codec: str, blob: bytes) -> bytes:
        if codec != "zlib":
            raise ExportError(f"{self.path}: unknown body codec {codec!r}")
        try:
            return zlib.decompress(blob)
        except zlib.error as exc:
            raise ExportError(f"{self.path}: a stored body is corrupt: {exc}") from exc
