"""The outbox on disk: what the router reads back of one owner's hosts when it holds
no more of them in memory."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ubipy.store.shard import NewURL, Shard


def _url(fp: int, host: str) -> NewURL:
    return NewURL(fp, f"http://{host}/{fp}", host, 1, 0.5, fp % 3)


def test_an_owners_hosts_are_read_back_in_order_and_a_read_left_early_blocks_no_write(
    tmp_path: Path,
) -> None:
    shard = Shard.open(tmp_path)
    try:
        hosts = ["a.test", "b.test", "c.test"]
        rows = [_url(fp, hosts[fp % 3]) for fp in range(30, 0, -1)]
        shard.outbox_add(rows)
        assert sorted(shard.outbox_hosts()) == ["a.test", "b.test", "c.test"]
        read = list(shard.outbox_of(["a.test", "c.test"]))
        assert read == sorted((u for u in rows if u.host != "b.test"), key=lambda u: u.fp)
        assert list(shard.outbox_of([])) == [] and list(shard.outbox_of(["x.test"])) == []
        with contextlib.closing(shard.outbox_of(["a.test", "b.test"])) as lazily:
            assert next(lazily).fp == 1
            shard.outbox_remove([1, 2])  # a write while the read is open
        assert [u.fp for u in shard.outbox_of(["a.test", "b.test"])][:2] == [3, 4]
    finally:
        shard.close()
