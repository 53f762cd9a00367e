"""What a sync of the WARC files covers: each file whose records the shard counts (open,
left open by a failed close or a failed cut-back), and the directory's entries for them,
whatever happened between two syncs; two syncs at once (a close's, on the loop, and a
group sync's, in a thread) do each other no harm."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tests.store.fsyncs import record_fsyncs
from ubipy.errors import StorageError
from ubipy.store import warcfiles
from ubipy.store.warcfiles import WarcFiles


def _files(data: Path, **options: object) -> WarcFiles:
    kwargs: dict[str, object] = {
        "max_size": 10**9,
        "fsync": False,
        "prefix": lambda: "ubipy-p",
        "warcinfo": lambda name: b"INFO" * 10,
    }
    kwargs.update(options)
    return WarcFiles(data / "warc", **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def synced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of what is fsynced, files and directories, in order."""
    return record_fsyncs(monkeypatch)


def test_a_file_made_and_closed_between_two_syncs_has_its_name_synced(
    tmp_path: Path, synced: list[str]
) -> None:
    files = _files(tmp_path, max_size=100)
    files.append(b"R" * 200)
    files.flush()
    files.committed()  # full: closed, renamed, none open now
    synced.clear()
    files.sync()
    assert synced == [tmp_path.name, "warc"]
    synced.clear()
    files.sync()
    assert synced == []  # nothing new


def test_a_file_that_could_not_be_cut_back_is_synced_by_the_next_sync(
    tmp_path: Path, synced: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _files(tmp_path)
    files.append(b"A" * 50)
    files.flush()
    files.committed()  # its records count
    name = files.name
    files.append(b"B" * 50)
    files.flush()

    def failing(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    real = os.ftruncate
    monkeypatch.setattr(os, "ftruncate", failing)
    files.rollback()  # cannot cut back: closed, to be cut at the next start
    monkeypatch.setattr(os, "ftruncate", real)
    synced.clear()
    files.sync()
    assert f"{name}.open" in synced


def test_two_syncs_at_once_over_a_file_left_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused() -> None:
        raise StorageError("the WAL cannot be synced")

    files = _files(tmp_path, max_size=100, shard_synced=refused)
    files.append(b"R" * 200)
    files.flush()
    files.committed()  # the close fails: the file stays open on disk
    real = os.fsync
    inner: list[bool] = []

    def fsync(fd: int) -> None:
        if not inner:  # the other sync runs to its end during this one's first fsync
            inner.append(True)
            files.sync()
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    files.sync()  # a ValueError out of the close's sync ended the committer


def test_a_directory_that_cannot_be_synced_is_a_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = _files(tmp_path)
    files.ensure_open()

    def failing(path: Path) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(warcfiles, "sync_directory", failing)
    with pytest.raises(StorageError, match="warc: cannot sync"):
        files.sync()
