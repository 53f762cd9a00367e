"""One peer per data directory: the lock names its holder, and dies with it."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from ubipy.store import SHARD_FILE, SHARD_FILES, DataDirInUse, DataLock, ShardError

# A holder in a process of its own: it says so once it holds the lock, then waits
# on its standard input (not a sleep) until it is killed.
HOLDER = """
import sys
from pathlib import Path
from ubipy.store import DataLock
lock = DataLock.take(Path(sys.argv[1]), "127.0.0.1:7123")
print("held", flush=True)
sys.stdin.read()
"""


def test_a_second_lock_is_refused_naming_the_holder_until_it_is_released(
    tmp_path: Path,
) -> None:
    data = tmp_path / "new" / "data"
    first = DataLock.take(data, "127.0.0.1:0")
    first.note("127.0.0.1:7001")  # the port, once bound
    with pytest.raises(DataDirInUse) as refused:
        DataLock.take(data, "127.0.0.1:7002")
    assert (refused.value.pid, refused.value.address) == (os.getpid(), "127.0.0.1:7001")
    message = str(refused.value)
    assert "\n" not in message
    assert f"{data} is in use by another peer (pid {os.getpid()}, listening on 127.0.0.1:7001)" in (
        message
    )
    first.release()
    DataLock.take(data, "127.0.0.1:7002").release()
    assert (data / "lock").exists()  # never removed: see ubipy.store.lock


@pytest.mark.parametrize("where", ["file", "file/below"])
def test_a_path_that_cannot_be_a_directory_is_one_clear_error(tmp_path: Path, where: str) -> None:
    (tmp_path / "file").write_text("the user's\n")
    with pytest.raises(ShardError, match=r"^cannot use .* as the data directory: ") as caught:
        DataLock.take(tmp_path / where, "127.0.0.1:0")
    assert "\n" not in str(caught.value)
    assert (tmp_path / "file").read_text() == "the user's\n"


async def test_the_lock_is_freed_when_its_holder_is_killed_with_sigkill(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-c", HOLDER, str(data)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        with trio.fail_after(30):
            said = b""
            while b"held\n" not in said:
                chunk = await proc.stdout.receive_some()
                assert chunk, "the holder exited before it held the lock"
                said += chunk
        with pytest.raises(DataDirInUse) as refused:
            DataLock.take(data, "127.0.0.1:0")
        assert (refused.value.pid, refused.value.address) == (proc.pid, "127.0.0.1:7123")
    finally:
        proc.kill()
        with trio.fail_after(10):
            await proc.wait()
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                await pipe.aclose()
    assert proc.returncode == -signal.SIGKILL
    DataLock.take(data, "127.0.0.1:0").release()


@pytest.mark.parametrize("theirs", [b"do not delete\n", b"#!/bin/sh\n", b"1234 a\nb\n"])
def test_a_file_of_anothers_named_lock_is_left_as_it_is(tmp_path: Path, theirs: bytes) -> None:
    """A directory of the user's with a file called ``lock`` had it written over with
    a pid and an address (QA): refused, the file as it was."""
    (tmp_path / "lock").write_bytes(theirs)
    with pytest.raises(ShardError, match="is not a ubipy lock file") as refused:
        DataLock.take(tmp_path, "127.0.0.1:7001")
    assert "\n" not in str(refused.value)
    assert (tmp_path / "lock").read_bytes() == theirs


def test_a_lock_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_bytes(b"")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "lock").symlink_to(target)
    with pytest.raises(ShardError, match="its lock: a link, not a ubipy lock file"):
        DataLock.take(tmp_path / "data", "127.0.0.1:7001")
    assert target.read_bytes() == b""


@pytest.mark.parametrize(
    "left",
    [
        b"",
        b"4242 127.0.0.1:7000\n",
        b"4242 ubipy demo, clearing\n",
        b"42",  # a crash mid-write: a part of it
        b"4242 127.0",
        b"\0" * 22,  # or zeros, from a file system that had not written it
    ],
)
def test_a_lock_file_a_peer_left_is_taken_again(tmp_path: Path, left: bytes) -> None:
    """What a peer writes there (or nothing, a crash between truncation and write)."""
    (tmp_path / "lock").write_bytes(left)
    lock = DataLock.take(tmp_path, "127.0.0.1:7001")
    assert (tmp_path / "lock").read_bytes() == f"{os.getpid()} 127.0.0.1:7001\n".encode()
    lock.release()


def test_a_lock_that_is_a_directory_is_named_as_such(tmp_path: Path) -> None:
    (tmp_path / "lock").mkdir()
    with pytest.raises(ShardError, match="data directory: its lock: Is a directory"):
        DataLock.take(tmp_path, "127.0.0.1:7001")


def test_a_peer_that_never_started_leaves_no_directory_it_made(tmp_path: Path) -> None:
    data = tmp_path / "new" / "peer"
    lock = DataLock.take(data, "127.0.0.1:7001")
    (data / SHARD_FILE).write_bytes(b"an empty shard")
    lock.release(unmake=SHARD_FILES)
    assert list(tmp_path.iterdir()) == []
    # Taken again, it is held until released, which frees it for the next one.
    lock = DataLock.take(data, "127.0.0.1:7001")
    with pytest.raises(DataDirInUse):
        DataLock.take(data, "127.0.0.1:7002")
    lock.release(unmake=SHARD_FILES)
    DataLock.take(data, "127.0.0.1:7002").release()
    assert sorted(p.name for p in data.iterdir()) == ["lock"]  # a started peer's stays


def test_what_a_peer_did_not_make_stays(tmp_path: Path) -> None:
    # The user's directory, with the peer's files in it: only the release of a peer
    # that crawled nothing in a directory it made removes anything.
    # Its lock file, made by the take, goes (QA: a directory of another program's
    # files, refused, was left a lock file); one an earlier run left stays.
    mine = tmp_path / "mine"
    mine.mkdir()
    lock = DataLock.take(mine, "127.0.0.1:7001")
    (mine / SHARD_FILE).write_bytes(b"a shard")
    lock.release(unmake=SHARD_FILES)
    assert sorted(p.name for p in mine.iterdir()) == [SHARD_FILE]
    DataLock.take(mine, "127.0.0.1:7001").release()  # a run that started
    lock = DataLock.take(mine, "127.0.0.1:7001")
    lock.release(unmake=SHARD_FILES)
    assert sorted(p.name for p in mine.iterdir()) == ["lock", SHARD_FILE]
    # A directory it made, where something else appeared: that stays, and what holds it.
    data = tmp_path / "made" / "peer"
    lock = DataLock.take(data, "127.0.0.1:7001")
    (data / "notes.txt").write_text("the user's\n")
    lock.release(unmake=SHARD_FILES)
    assert [p.name for p in data.iterdir()] == ["notes.txt"]


def test_a_directory_named_through_one_it_made_is_not_the_peer_s_to_remove(
    tmp_path: Path,
) -> None:
    # `new/../peer-a` made `new`, not peer-a: a failed start removed peer-a's shard.
    peer_a = tmp_path / "peer-a"
    peer_a.mkdir()
    (peer_a / SHARD_FILE).write_bytes(b"a week of crawling")
    lock = DataLock.take(tmp_path / "new" / ".." / "peer-a", "127.0.0.1:7001")
    lock.release(unmake=SHARD_FILES)
    assert (peer_a / SHARD_FILE).read_bytes() == b"a week of crawling"


def test_a_lock_file_removed_as_it_is_taken_is_taken_again_in_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A peer that failed to start removes its directory between another's opening of
    # the lock file and its flock: that one locked a file no longer there, and a third
    # could lock a new one beside it (a review).
    data = tmp_path / "new"
    failed = DataLock.take(data, "127.0.0.1:7001")
    flock = fcntl.flock

    def removed_first(fd: int, operation: int) -> None:
        monkeypatch.setattr(fcntl, "flock", flock)
        failed.release(unmake=SHARD_FILES)
        flock(fd, operation)

    monkeypatch.setattr(fcntl, "flock", removed_first)
    second = DataLock.take(data, "127.0.0.1:7002")
    assert second.held and (data / "lock").read_text().endswith(" 127.0.0.1:7002\n")
    with pytest.raises(DataDirInUse):
        DataLock.take(data, "127.0.0.1:7003")
    second.release()
