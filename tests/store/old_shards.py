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
}


def downgrade(data_dir: Path, version: int) -> None:
    """Make the (closed, current) shard in ``data_dir`` one of ``version``."""
    conn = sqlite3.connect(data_dir / SHARD_FILE)
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    for v in range(current - 1, version - 1, -1):
        for statement in _UNDO[v]:
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version={version}")
    conn.commit()
    conn.close()
