"""A shard's commits put on disk through a machine's crash: its WAL file synced.

The shard runs with ``synchronous=NORMAL``: a commit survives the process's kill, not
the machine's, the WAL being synced only at checkpoints (see
:meth:`ubipy.store.Shard.sync`, and the WARC files, which a file's final name must not
outrun).
"""

from __future__ import annotations

import os
from pathlib import Path

from ubipy.errors import StorageError

__all__ = ["sync_directory", "sync_wal"]


def sync_wal(path: Path, *, directory: bool) -> bool:
    """Sync the WAL of the shard at ``path`` (first the directory holding it, if
    ``directory``); False when there is none (nothing written since the last checkpoint
    emptied it). Raises StorageError."""
    wal = path.with_name(path.name + "-wal")
    try:
        fd = os.open(wal, os.O_RDONLY)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise StorageError(f"{wal}: cannot sync: {exc}") from exc
    try:
        if directory:
            sync_directory(path.parent)
        os.fsync(fd)
    except OSError as exc:
        raise StorageError(f"{wal}: cannot sync: {exc}") from exc
    finally:
        os.close(fd)
    return True


def sync_directory(path: Path) -> None:
    """Put the directory's entries on disk (a file made in it, or renamed there, has
    its data synced under a name an OS crash can still lose). Raises OSError."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
