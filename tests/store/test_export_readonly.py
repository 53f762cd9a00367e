"""A stopped peer's shard on a directory this user cannot write (a read-only mount, a
snapshot, another user's data directory) is exported: SQLite's WAL mode reads through
a ``-shm`` file it makes beside the shard, and the export refused the shard as "not
readable" where it could not (QA)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.store.test_export import PAGES_A, PAGES_B, PEER_A, _make_shard
from ubipy.cli import main
from ubipy.store import jsonl
from ubipy.store.jsonl import page_json
from ubipy.store.shard import SHARD_FILE, Shard
from ubipy.store.snapshot import ShardReader, StoredPage


@contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """``directory`` made unwritable for the rest of the block: remounted read-only
    (a tmpfs of its own, as root, whom permissions do not stop), else its mode."""
    if os.geteuid() != 0:
        directory.chmod(0o555)
        try:
            yield
        finally:
            directory.chmod(0o755)
        return
    kept = directory.with_name(directory.name + ".files")
    directory.rename(kept)
    directory.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(directory)])
    if mounted.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        for f in kept.iterdir():
            shutil.copy2(f, directory / f.name)
        subprocess.run(["mount", "-o", "remount,ro", str(directory)], check=True)
        yield
    finally:
        subprocess.run(["umount", str(directory)], check=True)
        directory.rmdir()
        kept.rename(directory)


def test_a_stopped_peer_s_shard_is_exported_from_a_directory_it_cannot_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "peer-a"
    _make_shard(data, PEER_A, PAGES_A)
    before = sorted(p.name for p in data.iterdir())
    assert f"{SHARD_FILE}-wal" not in before  # stopped: every commit in the file
    out = tmp_path / "pages.jsonl"
    with read_only(data):
        assert not os.access(data, os.W_OK)
        code = main(["export", "--data", str(data), "--format", "jsonl", "--out", str(out)])
        after = sorted(p.name for p in data.iterdir())
    assert code == 0, capsys.readouterr().err
    assert len(out.read_text().splitlines()) == len(PAGES_A)
    assert after == before  # nothing written beside it


def test_a_stopped_peer_s_directory_is_left_as_the_export_found_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "peer-a"
    _make_shard(data, PEER_A, PAGES_A)
    before = {p.name: p.read_bytes() for p in data.iterdir()}
    assert f"{SHARD_FILE}-wal" not in before
    out = tmp_path / "pages.jsonl"
    code = main(["export", "--data", str(data), "--format", "jsonl", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    assert len(out.read_text().splitlines()) == len(PAGES_A)
    # No -wal or -shm left beside the shard (QA), and the shard itself not written.
    assert {p.name: p.read_bytes() for p in data.iterdir()} == before


def test_a_reader_never_writes_the_shard_and_a_peer_may_start_beside_it(tmp_path: Path) -> None:
    data = tmp_path / "peer-a"
    _make_shard(data, PEER_A, PAGES_A)
    reader = ShardReader(data)
    for write in ("DELETE FROM pages", "PRAGMA user_version = 5", "VACUUM"):
        with pytest.raises(sqlite3.DatabaseError, match=r"not authorized|authorization denied"):
            reader._conn.executescript(write)  # which ends the reader's transaction first
    peer = Shard.open(data)  # the peer starts while the export reads
    peer.record_pages(PAGES_B)
    reader.close()
    assert peer.counts().pages == len(PAGES_A) + len(PAGES_B)
    peer.close()
    assert not any(p.name.endswith(("-wal", "-shm")) for p in data.iterdir())
    assert len(list(ShardReader(data).pages(bodies=False))) == len(PAGES_A) + len(PAGES_B)


def test_an_export_ended_by_sigterm_leaves_no_partial_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # timeout, systemd, a cancelled CI job: it died at once and left its .part file
    # (35 MB in QA's run), where Ctrl-C removes it and says so.
    data = tmp_path / "peer-a"
    _make_shard(data, PEER_A, PAGES_A)
    written = 0

    def terminated_on_the_third(page: StoredPage) -> dict[str, Any]:
        nonlocal written
        written += 1
        if written == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return page_json(page)

    monkeypatch.setattr(jsonl, "page_json", terminated_on_the_third)
    before = signal.getsignal(signal.SIGTERM)
    code = main(["export", "--data", str(data), "--out", str(tmp_path / "pages.jsonl")])
    assert signal.getsignal(signal.SIGTERM) == before  # put back (a review)
    assert code == 130 and written == 3
    assert capsys.readouterr().err.endswith("ubipy export: interrupted\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["peer-a"]
