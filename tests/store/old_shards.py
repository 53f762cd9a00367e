"""Shards as older versions of ubipy left them, for the migration tests: a current
shard with what each later version added taken away again."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from ubipy.store.shard import SHARD_FILE

# What version N + 1 added to version N, undone.
_UNDO = {
    1: ("ALTER TABLE pages DROP COLUMN encoding", "ALTER TABLE pages DROP COLUMN encoding_source"),
    2: ("DROP TABLE lastmod",),
    3: ("ALTER TABLE frontier DROP COLUMN score", "ALTER TABLE outbox DROP COLUMN score"),
    4: ("DROP TABLE refresh", "DROP TABLE visits", "DROP TABLE visit_bodies"),
    5: (
        "ALTER TABLE refresh DROP COLUMN lastmod_checks",
        "ALTER TABLE refresh DROP COLUMN lastmod_agreed",
    ),
    6: ("DROP TABLE warc",),
    7: (
        "CREATE TABLE seen (fp INTEGER PRIMARY KEY) WITHOUT ROWID",
        "INSERT INTO seen SELECT fp FROM frontier",
        "CREATE TABLE frontier_v7 (fp INTEGER PRIMARY KEY, seq INTEGER NOT NULL UNIQUE, "
        "url TEXT NOT NULL, host TEXT NOT NULL, depth INTEGER NOT NULL, "
        "state INTEGER NOT NULL DEFAULT 0, reason TEXT, score REAL NOT NULL DEFAULT 0)",
        "INSERT INTO frontier_v7 SELECT fp, seq, url, host, depth, state, reason, score "
        "FROM frontier",
        "DROP TABLE frontier",
        "ALTER TABLE frontier_v7 RENAME TO frontier",
        "CREATE INDEX frontier_pending ON frontier (host, seq) WHERE state = 0",
    ),
    8: ("ALTER TABLE visits DROP COLUMN truncated",),
    9: ("DROP INDEX frontier_done",),
    10: ("ALTER TABLE outbox DROP COLUMN redirects",),
    11: ("DROP TABLE given_up",),
    12: ("DROP INDEX outbox_spilled", "ALTER TABLE outbox DROP COLUMN spilled"),
    13: ("DROP TABLE replica_sources",),
    14: (
        "ALTER TABLE refresh DROP COLUMN failures",
        "ALTER TABLE refresh DROP COLUMN missing",
    ),
    15: ("DROP TABLE robots",),
    17: ("ALTER TABLE pages DROP COLUMN location", "ALTER TABLE visits DROP COLUMN location"),
    18: ("ALTER TABLE pages DROP COLUMN noindex", "ALTER TABLE visits DROP COLUMN noindex"),
    19: ("DROP TABLE tries", "ALTER TABLE hosts DROP COLUMN robots_tries"),
}


def _keyed_by_fingerprint(conn: sqlite3.Connection) -> list[str]:
    """Version 16's pages, warc and visits tables, keyed by fingerprint (17 keeps them
    in the order written), made from the current ones."""
    out = []
    for table, key, old_key in (
        ("pages", "fp            INTEGER NOT NULL UNIQUE", "fp INTEGER PRIMARY KEY"),
        ("warc", None, None),
        ("visits", None, None),
    ):
        (sql,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (table,)).fetchone()
        # Renamed by the migration, its name is quoted: CREATE TABLE "pages" (...).
        sql = sql.replace(f'CREATE TABLE "{table}"', f"CREATE TABLE {table}_v16", 1)
        sql = sql.replace(key, old_key) if key and old_key else sql + " WITHOUT ROWID"
        out += [
            sql,
            f"INSERT INTO {table}_v16 SELECT * FROM {table}",
            f"DROP TABLE {table}",
            f"ALTER TABLE {table}_v16 RENAME TO {table}",
        ]
    return out


def downgrade(data_dir: Path, version: int) -> None:
    """Make the (closed, current) shard in ``data_dir`` one of ``version``."""
    conn = sqlite3.connect(data_dir / SHARD_FILE)
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    for v in range(current - 1, version - 1, -1):
        for statement in _keyed_by_fingerprint(conn) if v == 16 else _UNDO[v]:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version={version}")
    conn.commit()
    conn.close()
