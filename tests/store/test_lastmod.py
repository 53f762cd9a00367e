"""What sitemaps said of when URLs last changed: kept in the shard (schema version 3),
the latest reading winning, queryable by host; a version 2 shard gains the table."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.store.old_shards import downgrade
from ubipy.store import Lastmod
from ubipy.store.shard import SCHEMA_VERSION, SHARD_FILE, Shard


def test_lastmods_are_kept_and_the_latest_reading_wins(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    with shard.transaction():
        shard.save_lastmods(
            [
                Lastmod(1, "http://a.test/1", "a.test", "2024-01-01"),
                Lastmod(2, "http://b.test/2", "b.test", "2024-02"),
            ]
        )
    shard.save_lastmods([Lastmod(1, "http://a.test/1", "a.test", "2025-06-07T08:09:10Z")])
    shard.close()
    shard = Shard.open(tmp_path)
    assert shard.lastmods() == [
        Lastmod(1, "http://a.test/1", "a.test", "2025-06-07T08:09:10Z"),
        Lastmod(2, "http://b.test/2", "b.test", "2024-02"),
    ]
    assert shard.lastmods("b.test") == [Lastmod(2, "http://b.test/2", "b.test", "2024-02")]
    shard.close()


def test_a_version_2_shard_gains_the_lastmod_table(tmp_path: Path) -> None:
    Shard.open(tmp_path).close()
    downgrade(tmp_path, 2)
    shard = Shard.open(tmp_path)
    shard.save_lastmods([Lastmod(7, "http://a.test/", "a.test", "2024")])
    assert shard.lastmods() == [Lastmod(7, "http://a.test/", "a.test", "2024")]
    shard.close()
    conn = sqlite3.connect(tmp_path / SHARD_FILE)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()
