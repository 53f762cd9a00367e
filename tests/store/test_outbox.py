"""The outbox on disk: the rows the router keeps there alone are marked, found by host,
read back an owner at a time, and unmarked once held in memory again."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ubipy.store.shard import NewURL, Shard


def _url(fp: int, host: str) -> NewURL:
    return NewURL(fp, f"http://{host}/{fp}", host, 1, 0.5, fp % 3)


def test_rows_kept_on_disk_alone_are_read_back_by_host(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    try:
        hosts = ["a.test", "b.test", "c.test"]
        rows = [_url(fp, hosts[fp % 3]) for fp in range(30, 0, -1)]
        shard.outbox_add(rows)
        assert shard.outbox_spilled_hosts() == []  # on their way, all of them
        assert list(shard.outbox_spilled_of(hosts)) == []
        shard.outbox_spill([fp for fp in range(1, 31) if fp % 2])  # the odd ones
        assert shard.outbox_spilled_hosts() == hosts
        read = sorted(shard.outbox_spilled_of(["a.test", "c.test"]), key=lambda u: u.fp)
        assert read == [u for u in reversed(rows) if u.fp % 2 and u.host != "b.test"]
        assert list(shard.outbox_spilled_of([])) == list(shard.outbox_spilled_of(["x.test"]))
        with contextlib.closing(shard.outbox_spilled_of(["b.test"])) as lazily:
            first = next(lazily)
            shard.outbox_unspill([first.fp])  # a write while the read is open
        assert first.fp not in {u.fp for u in shard.outbox_spilled_of(["b.test"])}
        shard.outbox_remove([u.fp for u in rows if u.host == "b.test"])
        assert shard.outbox_spilled_hosts() == ["a.test", "c.test"]
        assert len(shard.outbox()) == 20  # the outbox itself: every row, marked or not
    finally:
        shard.close()


def test_marks_survive_a_restart(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    shard.outbox_add([_url(1, "a.test"), _url(2, "b.test")])
    shard.outbox_spill([2])
    shard.close()
    shard = Shard.open(tmp_path)
    try:
        assert [u.fp for u in shard.outbox_spilled_of(["a.test", "b.test"])] == [2]
    finally:
        shard.close()


def test_the_outbox_is_read_a_chunk_at_a_time(tmp_path: Path) -> None:
    """A restart reads an outbox of millions (kept for a silent owner) in chunks, not
    into memory at once; fingerprints span the signed 64-bit range."""
    shard = Shard.open(tmp_path)
    try:
        fps = [-(2**63), -5, 0, 3, 7, 11, 2**63 - 1, 12, 13, 14]
        shard.outbox_add([_url(fp, "a.test") for fp in fps])
        chunks = shard.outbox_chunks(size=3)
        first = next(chunks)
        assert [u.fp for u in first] == [-(2**63), -5, 0]
        shard.outbox_remove([11])  # gone before its chunk is read: not read
        rest = [u.fp for chunk in chunks for u in chunk]
        assert rest == [3, 7, 12, 13, 14, 2**63 - 1]
        assert [len(c) for c in shard.outbox_chunks(size=3)] == [3, 3, 3]
    finally:
        shard.close()
