"""The shard's schema: its tables, its version, and the migrations that bring a shard
of an older version up to this one (``docs/storage.md`` says what each column holds).
"""

from __future__ import annotations

import logging
import sqlite3

log = logging.getLogger(__name__)

SCHEMA_VERSION = 20
SHARD_FILE = "shard.sqlite3"
# The shard and the files SQLite keeps beside it.
SHARD_FILES = (SHARD_FILE, f"{SHARD_FILE}-wal", f"{SHARD_FILE}-shm", f"{SHARD_FILE}-journal")
# The peer keeps its id under this key of the meta table (ubipy.peer.ids).
PEER_ID_META = "peer_id"
# A row at this depth or deeper is a sitemap (ubipy.fetch.sitemaps marks them so:
# SITEMAP_DEPTH, and one below it for a sitemap an index listed).
SITEMAP_DEPTHS_FROM = 999_999

# A page's row after its fingerprint (the key: its primary key until version 17).
_PAGES_COLUMNS = """
    url           TEXT    NOT NULL,
    host          TEXT    NOT NULL,
    status        INTEGER,
    content_type  TEXT,
    length        INTEGER NOT NULL,
    truncated     INTEGER NOT NULL DEFAULT 0,
    title         TEXT,
    fetched_at    REAL    NOT NULL,
    last_modified TEXT,
    etag          TEXT,
    digest        TEXT,
    depth         INTEGER NOT NULL,
    error         TEXT,
    encoding        TEXT,
    encoding_source TEXT
);"""

# Version 3: what sitemaps said of when each URL last changed (a W3C datetime, as
# written), kept for recrawling; nothing reads it yet but export and queries.
_LASTMOD = """
-- What the sitemaps read here said of when each URL last changed, for recrawling.
CREATE TABLE IF NOT EXISTS lastmod (
    fp      INTEGER PRIMARY KEY,
    url     TEXT NOT NULL,
    host    TEXT NOT NULL,
    lastmod TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS lastmod_host ON lastmod (host);
"""

# Version 5: a continuous crawl's state (--recrawl): each fetched page's history and
# when it is due again, and every visit after the first.
_VISITS_COLUMNS = """
    fp            INTEGER NOT NULL,
    at            REAL    NOT NULL,
    status        INTEGER,
    changed       INTEGER NOT NULL,
    digest        TEXT,
    content_type  TEXT,
    length        INTEGER NOT NULL DEFAULT 0,
    etag          TEXT,
    last_modified TEXT,"""
_RECRAWL = f"""
-- Each fetched page's revisit state: what was seen of its changes, when it is due again.
CREATE TABLE IF NOT EXISTS refresh (
    fp            INTEGER PRIMARY KEY,
    url           TEXT    NOT NULL,
    host          TEXT    NOT NULL,
    depth         INTEGER NOT NULL,
    visits        INTEGER NOT NULL,
    changes       INTEGER NOT NULL,
    observed      REAL    NOT NULL,
    last_visit    REAL    NOT NULL,
    due           REAL    NOT NULL,
    importance    REAL    NOT NULL DEFAULT 0,
    etag          TEXT,
    last_modified TEXT,
    digest        TEXT
);
-- Every visit of a page after its first (the first is its pages row): a revisit record
-- in a WARC when unchanged, a response when changed (its body in visit_bodies).
CREATE TABLE IF NOT EXISTS visits ({_VISITS_COLUMNS}
    PRIMARY KEY (fp, at)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS visit_bodies (
    fp    INTEGER NOT NULL,
    at    REAL    NOT NULL,
    codec TEXT    NOT NULL,
    body  BLOB    NOT NULL,
    PRIMARY KEY (fp, at)
);
"""

# Version 6: per page, the checks its visits made of its host's sitemap lastmods and
# how many agreed; summed per host on load, they say whether the host is trusted.
_LASTMOD_CHECKS = """
ALTER TABLE refresh ADD COLUMN lastmod_checks INTEGER NOT NULL DEFAULT 0;
ALTER TABLE refresh ADD COLUMN lastmod_agreed INTEGER NOT NULL DEFAULT 0;
"""

# Version 7: where each capture's WARC records lie (--bodies warc, #20): a page's first
# fetch and a continuous crawl's later visits, keyed as ``visits`` is; no body.
_WARC_COLUMNS = """(
    fp             INTEGER NOT NULL,
    at             REAL    NOT NULL,
    kind           INTEGER NOT NULL,
    file           TEXT    NOT NULL,
    offset         INTEGER NOT NULL,
    length         INTEGER NOT NULL,
    end            INTEGER NOT NULL,
    record_id      TEXT    NOT NULL,
    payload_digest TEXT,
    PRIMARY KEY (fp, at)
)"""
_WARC = f"""
-- Per capture (a page's first fetch, or a later visit at ``at``): the file in DATA/warc
-- (its final name), the offset and length of its response or revisit record (kind 0 or
-- 1, or 2: a later visit's answer that was not the page, a 404, or 3: a robots.txt
-- answer, fp its URL's), where its last record ends, its record id and payload digest
-- (for revisits).
CREATE TABLE IF NOT EXISTS warc {_WARC_COLUMNS} WITHOUT ROWID;
"""

# Version 8: the frontier's rows in admission order (seq is the rowid, so a new URL is
# appended, not inserted at a random place), its fingerprints in a unique index, which is
# also the exact set behind admission's Bloom filter: the ``seen`` table was that set, one
# more random insert a URL (bench/admission.py: a third of a new URL's cost).
_FRONTIER_COLUMNS = """(
    seq    INTEGER PRIMARY KEY,
    fp     INTEGER NOT NULL UNIQUE,
    url    TEXT    NOT NULL,
    host   TEXT    NOT NULL,
    depth  INTEGER NOT NULL,
    state  INTEGER NOT NULL DEFAULT 0,
    reason TEXT,
    score  REAL    NOT NULL DEFAULT 0
)"""
# A host's pending URLs in admission order: the index's (host, rowid) is (host, seq).
_FRONTIER_PENDING = (
    "CREATE INDEX IF NOT EXISTS frontier_pending ON frontier (host) WHERE state = 0;"
)
_FRONTIER = f"""
-- Every URL this shard admitted, in admission order.
CREATE TABLE IF NOT EXISTS frontier {_FRONTIER_COLUMNS};
{_FRONTIER_PENDING}
"""

# 7 -> 8: the frontier rebuilt. A fingerprint in ``seen`` with no frontier row (an early
# version's hand-off wrote only ``seen``) becomes a done row of no host: still known.
_FRONTIER_V8 = f"""
CREATE TABLE frontier_v8 {_FRONTIER_COLUMNS};
INSERT INTO frontier_v8 (seq, fp, url, host, depth, state, reason, score)
    SELECT seq, fp, url, host, depth, state, reason, score FROM frontier ORDER BY seq;
INSERT INTO frontier_v8 (seq, fp, url, host, depth, state, reason)
    SELECT (SELECT COALESCE(MAX(seq), 0) FROM frontier) + ROW_NUMBER() OVER (ORDER BY fp),
        fp, '', '', 0, 1, 'fetched elsewhere'
    FROM seen WHERE fp NOT IN (SELECT fp FROM frontier);
DROP TABLE frontier;
DROP TABLE seen;
ALTER TABLE frontier_v8 RENAME TO frontier;
{_FRONTIER_PENDING}
"""

# Version 17: a page's row, its captures' and its later visits' rows in the order they
# are written (rowid tables, the fingerprint in a unique index), not in the order of
# fingerprints, which are hashes: each commit wrote all over these tables, every leaf
# it touched copied whole into the WAL. Shard.record_pages on bench/speed.py's pages,
# 160 a commit: 64 us a page against 74 at 20,000 pages, 69 against 87 at 80,000.
_IN_ORDER = f"""
CREATE TABLE pages_v17 (
    fp            INTEGER NOT NULL UNIQUE,{_PAGES_COLUMNS}
INSERT INTO pages_v17 SELECT * FROM pages ORDER BY fetched_at, fp;
DROP TABLE pages;
ALTER TABLE pages_v17 RENAME TO pages;
CREATE TABLE warc_v17 {_WARC_COLUMNS};
INSERT INTO warc_v17 SELECT * FROM warc ORDER BY file, offset;
DROP TABLE warc;
ALTER TABLE warc_v17 RENAME TO warc;
CREATE TABLE visits_v17 ({_VISITS_COLUMNS}
    truncated     INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (fp, at)
);
INSERT INTO visits_v17 SELECT * FROM visits ORDER BY at, fp;
DROP TABLE visits;
ALTER TABLE visits_v17 RENAME TO visits;
"""

# Version 9: a later visit's body cut at --max-body says so, as a first fetch's does
# (pages.truncated): its WARC response says WARC-Truncated.
_VISIT_TRUNCATED = """
ALTER TABLE visits ADD COLUMN truncated INTEGER NOT NULL DEFAULT 0;
"""

# Version 10: a host's rows no longer pending (done, skipped), by host: a host handed
# over, or copied to its replica, was found by a scan of the whole frontier (at 2M rows
# 0.1 s a host for its state, 0.3 s to drop it). Partial, so that a URL admitted
# (pending) pays nothing for it and a page marked done one entry; a host's pending rows
# are frontier_pending's.
_FRONTIER_DONE = "CREATE INDEX IF NOT EXISTS frontier_done ON frontier (host) WHERE state != 0;"

# Version 12: hosts given up, why and when (store/givenup.py): a host given up for a
# reason that may pass is tried again a while later, and a restart forgot when.
_GIVEN_UP = """
CREATE TABLE IF NOT EXISTS given_up (
    host   TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    at     REAL NOT NULL
) WITHOUT ROWID;
"""

# Version 13: outbox rows the router keeps on disk alone (their owner does not answer,
# or holds its cap in memory), indexed by host to be read back an owner at a time;
# rows on their way are not in the index, so forwarding pays nothing for it.
_OUTBOX_SPILLED = """
ALTER TABLE outbox ADD COLUMN spilled INTEGER NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS outbox_spilled ON outbox (host) WHERE spilled = 1;
"""

# Version 14: which peers each host's replica rows came from. A host's copy follows the
# host from owner to owner, so rows of several may be here: one whose sender died before
# handing the host over goes from here to its owner (ubipy.peer.replica).
_REPLICA_SOURCES = """
CREATE TABLE IF NOT EXISTS replica_sources (
    source TEXT NOT NULL,
    host   TEXT NOT NULL,
    PRIMARY KEY (source, host)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS replica_sources_host ON replica_sources (host);
"""

# Version 15: a page's failed answers in a row (any failure; 404s alone), so that a
# restart keeps a failing page's back-off and its count towards retirement.
_REFRESH_FAILURES = """
ALTER TABLE refresh ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE refresh ADD COLUMN missing INTEGER NOT NULL DEFAULT 0;
"""

# Version 16: each host's robots.txt of each scheme as last answered (its rules, not a
# failure's), so that a restart within --robots-ttl asks none again (the body
# zlib-compressed; NULL: nothing restricts, a 4xx or a redirect past the limit).
_ROBOTS = """
CREATE TABLE IF NOT EXISTS robots (
    host   TEXT NOT NULL,
    scheme TEXT NOT NULL,
    at     REAL NOT NULL,
    body   BLOB,
    PRIMARY KEY (host, scheme)
) WITHOUT ROWID;
"""

# Version 18: where a redirect pointed, its Location resolved against the page's URL,
# for a first fetch and a later visit: exports had the status and not the target, and a
# WARC made from the shard replayed a redirect to nowhere.
_LOCATION = """
ALTER TABLE pages ADD COLUMN location TEXT;
ALTER TABLE visits ADD COLUMN location TEXT;
"""

# Version 19: whether a page (a later visit's new version) said noindex, in a meta robots
# or X-Robots-Tag: the crawler read it and follows the page's links all the same, and a
# search index built from the export must leave the page out (1, else 0; NULL: an answer
# not read for it, an error or a redirect).
_NOINDEX = """
ALTER TABLE pages ADD COLUMN noindex INTEGER;
ALTER TABLE visits ADD COLUMN noindex INTEGER;
"""

# Version 20: the failed tries of each URL still pending, and of each host's robots.txt,
# kept for a restart: in memory only, each restart gave them their tries afresh (QA: a
# page that always answered 500 was asked 14 times across 8 restarts, --retries 2
# allowing 3; a robots.txt answering 500, 6 times where 3 are made).
_TRIES = """
CREATE TABLE IF NOT EXISTS tries (
    fp      INTEGER PRIMARY KEY,
    attempt INTEGER NOT NULL,
    free    INTEGER NOT NULL
) WITHOUT ROWID;
ALTER TABLE hosts ADD COLUMN robots_tries INTEGER NOT NULL DEFAULT 0;
"""

SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"""
    + _FRONTIER
    + """
CREATE TABLE IF NOT EXISTS pages (
    fp            INTEGER PRIMARY KEY,"""
    + _PAGES_COLUMNS
    + """
-- URLs found here that belong to other peers, kept until their owner acknowledges them.
CREATE TABLE IF NOT EXISTS outbox (
    fp    INTEGER PRIMARY KEY,
    url   TEXT    NOT NULL,
    host  TEXT    NOT NULL,
    depth INTEGER NOT NULL,
    score REAL    NOT NULL DEFAULT 0,
    redirects INTEGER NOT NULL DEFAULT 0
);
-- Copies of another peer's frontier and history, kept for when it dies.
CREATE TABLE IF NOT EXISTS replica (
    fp    INTEGER PRIMARY KEY,
    host  TEXT    NOT NULL,
    url   TEXT,
    depth INTEGER NOT NULL,
    done  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS replica_host ON replica (host);
-- And of its politeness marks, so a successor that takes a host over stays polite.
CREATE TABLE IF NOT EXISTS replica_marks (
    host     TEXT PRIMARY KEY,
    last_end REAL NOT NULL,
    delay    REAL NOT NULL,
    pages    INTEGER NOT NULL
) WITHOUT ROWID;
-- When each host was last asked for something, so a restarted peer stays polite.
CREATE TABLE IF NOT EXISTS hosts (
    host     TEXT PRIMARY KEY,
    last_end REAL NOT NULL,
    delay    REAL NOT NULL,
    pages    INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS bodies (
    fp    INTEGER PRIMARY KEY,
    codec TEXT NOT NULL,
    body  BLOB NOT NULL
);
"""
    + _LASTMOD
    + _RECRAWL
    + _LASTMOD_CHECKS
    + _WARC
    + _VISIT_TRUNCATED
    + _FRONTIER_DONE
    + _GIVEN_UP
    + _OUTBOX_SPILLED
    + _REPLICA_SOURCES
    + _REFRESH_FAILURES
    + _ROBOTS
    + _IN_ORDER
    + _LOCATION
    + _NOINDEX
    + _TRIES
)


# Each entry takes a shard from the version it is keyed by to the next one, in one
# transaction; a fresh shard gets the whole schema at once.
MIGRATIONS: dict[int, str] = {
    # 1 -> 2: the encoding an HTML page was read in, and what decided it.
    1: "ALTER TABLE pages ADD COLUMN encoding TEXT;\n"
    "ALTER TABLE pages ADD COLUMN encoding_source TEXT;",
    # 2 -> 3: the sitemaps' lastmod dates.
    2: _LASTMOD,
    # 3 -> 4: a pending URL's priority under a crawl order other than breadth-first
    # (its OPIC cash, its partial PageRank), kept with the URL while it waits to be sent.
    3: "ALTER TABLE frontier ADD COLUMN score REAL NOT NULL DEFAULT 0;\n"
    "ALTER TABLE outbox ADD COLUMN score REAL NOT NULL DEFAULT 0;",
    # 4 -> 5: a continuous crawl's state.
    4: _RECRAWL,
    # 5 -> 6: the sitemap lastmod checks.
    5: _LASTMOD_CHECKS,
    # 6 -> 7: where pages' WARC records lie.
    6: _WARC,
    7: _FRONTIER_V8,
    # 8 -> 9: whether a later visit's body was cut.
    8: _VISIT_TRUNCATED,
    # 9 -> 10: the frontier's rows no longer pending indexed by host (on a big shard a
    # one-time build at the first open: 1.4-1.9 s for 1.8M done rows of 2M).
    9: _FRONTIER_DONE,
    # 10 -> 11: how many redirects in a row led to a URL waiting to be sent, so that a
    # restart does not start its chain afresh (0 for the rows already there).
    10: "ALTER TABLE outbox ADD COLUMN redirects INTEGER NOT NULL DEFAULT 0;",
    # 11 -> 12: hosts given up, why and when (those given up before are not known).
    11: _GIVEN_UP,
    # 12 -> 13: outbox rows kept on disk alone (none yet, for an older shard).
    12: _OUTBOX_SPILLED,
    # 13 -> 14: the senders of replica rows (those already here name none: they are
    # taken over as before, by a peer that owns their host when their sender dies).
    13: _REPLICA_SOURCES,
    # 14 -> 15: failure counts of pages refreshed (0 for those already here: a page
    # failing at the upgrade is asked once more, as at any start before).
    14: _REFRESH_FAILURES,
    # 15 -> 16: each host's robots.txt as last answered, for a restart (none yet: an
    # upgraded peer asks each host's once more).
    15: _ROBOTS,
    # 16 -> 17: pages, captures and visits in the order written (on a big shard a one-time copy
    # at the first open).
    16: _IN_ORDER,
    # 17 -> 18: redirects' targets (none for the rows already there).
    17: _LOCATION,
    # 18 -> 19: what pages said of noindex (not known for the rows already there).
    18: _NOINDEX,
    # 19 -> 20: pending URLs' failed tries (none known for those failing at the upgrade).
    19: _TRIES,
}

# The order --order other than bfs takes a host's pending URLs in: made only when
# such an order is asked for, so a breadth-first crawl does not keep it up to date.
RANK_INDEX = (
    "CREATE INDEX IF NOT EXISTS frontier_rank ON frontier (host, score DESC, seq) WHERE state = 0"
)


def distinct(table: str, column: str, where: str = "") -> str:
    """A query for the distinct values of ``column`` among the rows of ``table`` that
    ``where`` picks, in order, one index seek a value (a skip scan, by a recursive
    CTE): SELECT DISTINCT reads every row, millions where the values are a few
    thousand. ``column`` needs an index (partial on ``where`` will do)."""
    picked = f"{where} AND " if where else ""
    return f"""
WITH RECURSIVE found(value) AS (
    SELECT (SELECT {column} FROM {table} {"WHERE " + where if where else ""}
            ORDER BY {column} LIMIT 1)
    UNION ALL
    SELECT (
        SELECT {column} FROM {table} WHERE {picked}{column} > found.value
        ORDER BY {column} LIMIT 1
    ) FROM found WHERE found.value IS NOT NULL
)
SELECT value FROM found WHERE value IS NOT NULL
"""


def create(conn: sqlite3.Connection) -> None:
    """Give a new shard the whole schema and its version in one transaction: a first
    open cut short (a kill, a full disk) leaves a shard at version 0 with no tables,
    which the next open creates again. (executescript would commit statement by
    statement, and a rerun of the schema's ALTER TABLEs fails for ever.)"""
    _apply(conn, SCHEMA, SCHEMA_VERSION)


def _apply(conn: sqlite3.Connection, script: str, version: int) -> None:
    """Run ``script`` and set the shard's version to ``version``, all or nothing."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in script.split(";"):
            if statement.strip():
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version={version}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def unsupported(path: object, version: int) -> str:
    """Why a shard of ``version`` is refused: one a later ubipy wrote says so, and what
    to do (it said "not supported", and no more: QA)."""
    if version > SCHEMA_VERSION:
        return (
            f"{path}: shard schema version {version} was written by a later ubipy (this one "
            f"reads versions 1 to {SCHEMA_VERSION}): use that ubipy, or a later one; a "
            "shard is never migrated back"
        )
    return f"{path}: shard schema version {version} is not one ubipy knows"


def migrate(conn: sqlite3.Connection, version: int) -> None:
    """Bring a shard of an older schema up to SCHEMA_VERSION, one version per
    transaction: a migration cut short leaves the shard at the last version it reached."""
    while version < SCHEMA_VERSION:
        log.info("shard schema: migrating from version %d to %d", version, version + 1)
        _apply(conn, MIGRATIONS[version], version + 1)
        version += 1
