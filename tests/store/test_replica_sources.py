"""Which peers a host's copies came from (schema 14): a host whose copies came from a
peer that is gone is a stray until handed on, whatever other peers sent of it too."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tests.store.old_shards import downgrade
from ubipy.store.shard import SCHEMA_VERSION, SHARD_FILE, HostMark, Shard


def _pending(host: str, fp: int) -> tuple[str, str | None, int, int, bool]:
    return (host, f"http://{host}/{fp}", 1, fp, False)


def test_hosts_with_copies_from_a_peer_gone_are_strays(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    shard.replica_add([_pending("x.test", 1), _pending("y.test", 2)], source="b")
    shard.replica_add([], {"z.test": HostMark(1.0, 1.0, 1)}, source="b")
    shard.replica_add([_pending("x.test", 3)], source="a")  # x moved to a since
    shard.replica_add([_pending("w.test", 4)], source="a")
    assert shard.replica_strays(set()) == []
    assert sorted(shard.replica_strays({"b"})) == ["x.test", "y.test", "z.test"]
    assert shard.replica_strays({"a"}) == ["w.test", "x.test"]
    # x handed to its owner: a's copy, b's no more; y taken over: gone with its rows.
    shard.replica_unsource("x.test", {"a"})
    shard.replica_drop("y.test")
    assert shard.replica_strays({"b"}) == ["z.test"]
    assert shard.replica_of("x.test")[0] != []
    assert shard.replica_strays({"a"}) == ["w.test", "x.test"]
    # b swept: its copies of w and z are stale; z's rows go, x keeps a's.
    shard.replica_forget("b", ["z.test"])
    assert shard.replica_hosts() == ["w.test", "x.test"]
    shard.close()


def test_a_version_13_shards_copies_name_no_source_and_new_ones_do(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    shard.replica_add([_pending("x.test", 1)], source="b")
    shard.close()
    downgrade(tmp_path, 13)
    shard = Shard.open(tmp_path)
    # Its copies kept; whose they were is not known: no stray (taken over as before).
    assert shard.replica_hosts() == ["x.test"]
    assert shard.replica_strays({"b"}) == []
    shard.replica_add([_pending("y.test", 2)], source="b")
    assert shard.replica_strays({"b"}) == ["y.test"]
    shard.close()
    conn = sqlite3.connect(tmp_path / SHARD_FILE)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()
