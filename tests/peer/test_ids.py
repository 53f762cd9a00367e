"""A peer's id, made once in its data directory: a new one is said, with the whole
path, and a directory of someone else's files is warned of (QA: `--data ~` wrote the
shard among the user's files, and a --data relative to another working directory
made a new peer, said nowhere)."""

from __future__ import annotations

import logging
import random
import subprocess
import sys
from pathlib import Path

import pytest

from ubipy.errors import ShardError
from ubipy.peer.ids import load_peer_id, open_data
from ubipy.store import PEER_ID_META, SHARD_FILE, Shard
from ubipy.store_config import StoreConfig


def test_a_new_peer_says_where_its_data_is_and_an_old_one_says_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="ubipy.peer.ids")
    shard = Shard.open(tmp_path / "new")
    peer_id = load_peer_id(shard, random.Random(1))
    assert [r.getMessage() for r in caplog.records] == [
        f"a new peer, {peer_id}: its data in {(tmp_path / 'new').resolve()}"
    ]
    caplog.clear()
    assert load_peer_id(shard, random.Random(2)) == peer_id
    assert caplog.records == []
    shard.close()


def test_a_directory_of_other_files_is_warned_of(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for name in ("notes.txt", "photos", ".bashrc", "work"):
        (home / name).touch()
    shard = Shard.open(home)
    load_peer_id(shard, random.Random(1))
    shard.close()
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(f"{home.resolve()} holds files that are not this peer's")
    assert "(.bashrc, notes.txt, photos, ...)" in warning


@pytest.mark.parametrize("edited", ["", "12345", "zz not hex !!", "ab\ncd\x1b[31m", "A" * 5000])
def test_a_peer_id_edited_by_hand_is_one_clear_error(tmp_path: Path, edited: str) -> None:
    """An empty one died in a traceback of the wire's checks, a newline or a terminal
    escape reached the screen, and any other was taken as it was (QA)."""
    shard = Shard.open(tmp_path)
    with shard.transaction():
        shard.set_meta(PEER_ID_META, edited)
    with pytest.raises(ShardError, match="is not one ubipy made") as refused:
        load_peer_id(shard, random.Random(1))
    message = str(refused.value)
    assert "\n" not in message and "\x1b" not in message and len(message) < 200
    shard.close()


@pytest.mark.parametrize("inside", ["warc", "warc/b", "warc/b/c"])
def test_a_new_peer_in_another_peers_warc_directory_is_refused(tmp_path: Path, inside: str) -> None:
    """Only warned of as a directory of others' files, its shard went among the files
    the other peer keeps there (QA). Refused, nothing is made; a directory named warc
    of no peer's is a directory like another."""
    Shard.open(tmp_path / "a").close()
    (tmp_path / "a" / "warc").mkdir()
    before = sorted(tmp_path.rglob("*"))
    cmd = [sys.executable, "-m", "ubipy.cli", "peer", "--listen", "127.0.0.1:0"]
    ran = subprocess.run(
        [*cmd, "--data", str(tmp_path / "a" / inside)], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 2
    assert ran.stderr == (
        f"ubipy peer: {tmp_path / 'a' / inside}: in the WARC directory of the peer in "
        f"{(tmp_path / 'a').resolve()}: give --data a directory of its own\n"
    )
    assert sorted(tmp_path.rglob("*")) == before
    (tmp_path / "a" / SHARD_FILE).unlink()
    shard = Shard.open(tmp_path / "a" / "warc" / "b")
    assert load_peer_id(shard, random.Random(1))
    shard.close()


@pytest.mark.parametrize("empty", [False, True])
def test_a_shard_file_that_is_empty_is_a_new_one(tmp_path: Path, empty: bool) -> None:
    """SQLite makes a new database of an empty file: the peer said "its data" of it,
    as if resuming (QA)."""
    if empty:
        (tmp_path / SHARD_FILE).write_bytes(b"")
    lock, shard, _, new = open_data(tmp_path, StoreConfig(), "127.0.0.1:7000", random.Random(1))
    shard.close()
    lock.release()
    assert new
    lock, shard, _, new = open_data(tmp_path, StoreConfig(), "127.0.0.1:7000", random.Random(1))
    shard.close()
    lock.release()
    assert not new  # its own now
