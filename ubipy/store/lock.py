"""One peer per data directory: an exclusive lock on ``DIR/lock``.

Two peers on one directory would share an id and a shard and each crawl
everything. The lock is an ``flock`` on a file of the directory, held as long as
the lock's descriptor is open: the kernel drops it with the process, ``kill -9``
included, so a crash never leaves a stale lock behind. The file itself only says
who holds it (pid and address), for the message the next one gets.

A peer that never started removes the directory it made, lock file included (see
:meth:`DataLock.release`). A process that had opened that file before could then
lock it, a file no longer in the directory, while a third locks a new one: so a lock
is taken only once the file locked is the one the directory holds, and tried again
(the directory made again) where it is not.

Readers (``ubipy export``) take no lock: SQLite lets them read a live shard.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import weakref
from collections.abc import Collection
from contextlib import suppress
from pathlib import Path

from ubipy.errors import DataDirInUse, ShardError

LOCK_FILE = "lock"
# Takes of a directory whose lock file goes each time before it is held.
_TRIES = 5
# What DataLock.note writes, or what a crash in its write may leave of it: a prefix
# (a pid, an address cut short), or zeros (a file system that had not written it).
_NOTE = re.compile(rb"(?:[0-9]+(?: [^\n]*)?\n?)?")


class DataLock:
    """The exclusive hold of a data directory by this process."""

    def __init__(
        self, data_dir: Path, fd: int, made: tuple[Path, ...] = (), *, created: bool = False
    ) -> None:
        self.data_dir = data_dir
        self._fd: int | None = fd
        # The directories taking it made, innermost first: a peer that never starts
        # leaves none of them behind (see release); and whether it made the lock file.
        self.made = made
        self.created = created
        # A lock dropped without release() (a Peer made but never run) still lets go.
        self._finalizer = weakref.finalize(self, os.close, fd)

    @classmethod
    def take(cls, data_dir: Path, address: str) -> DataLock:
        """Create ``data_dir`` if need be and hold it; ``address`` is what the next
        process that tries is told along with this one's pid.

        ShardError if the directory cannot be made or is not one; DataDirInUse,
        naming the holder, if another process (or another lock in this one) holds it.
        """
        for _ in range(_TRIES):
            if (lock := cls._take(data_dir, address)) is not None:
                return lock
        raise ShardError(f"cannot lock {data_dir}: its {LOCK_FILE} is removed as it is taken")

    @classmethod
    def _take(cls, data_dir: Path, address: str) -> DataLock | None:
        """One try of :meth:`take`; None where the lock file went meanwhile (a peer
        that failed to start removed the directory)."""
        try:
            made = _make(data_dir)
        except OSError as exc:
            raise ShardError(
                f"cannot use {data_dir} as the data directory: {exc.strerror or exc}"
            ) from None
        if not data_dir.is_dir():
            raise ShardError(f"cannot use {data_dir} as the data directory: not a directory")
        path, flags = data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
        created = True
        try:
            # Not through a link: what it points at is not ours to write.
            try:
                fd = os.open(path, flags | os.O_EXCL, 0o644)
            except FileExistsError:
                created = False
                fd = os.open(path, flags, 0o644)
        except FileNotFoundError:
            return None
        except OSError as exc:
            why = "a link, not a ubipy lock file" if exc.errno == errno.ELOOP else exc.strerror
            raise ShardError(
                f"cannot use {data_dir} as the data directory: its {LOCK_FILE}: {why or exc}"
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            pid, holder = _holder(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise ShardError(f"cannot lock {data_dir}: {exc.strerror or exc}") from None
            raise DataDirInUse(data_dir, pid, holder) from None
        if not _still_there(fd, data_dir / LOCK_FILE):
            os.close(fd)
            return None
        if not _ours(fd):
            os.close(fd)
            # A file of the user's under that name was written over (QA).
            raise ShardError(
                f"{data_dir / LOCK_FILE} is not a ubipy lock file: the directory holds "
                "another program's files? Give --data a directory of its own (or, if "
                "the file is this peer's own, remove it)"
            )
        # Only where the innermost directory made is the data directory itself: made
        # for `new/../peer-a`, `new` is not, and peer-a's shard is not the peer's to
        # remove (a review).
        if made and not os.path.samefile(made[0], data_dir):
            made = ()
        lock = cls(data_dir, fd, made, created=created)
        lock.note(address)
        return lock

    def note(self, address: str) -> None:
        """Say who holds the lock: this pid and ``address`` (once it is known)."""
        if self._fd is None:
            return
        text = f"{os.getpid()} {address}\n".encode()
        try:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, text, 0)
        except OSError:
            pass  # only the next one's message is poorer; the lock holds regardless

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self, *, unmake: Collection[str] = ()) -> None:
        """Let go (closing the descriptor drops the flock); the file stays, unless:

        A peer that never started names its files in ``unmake``: where taking the lock
        made the directory, they go, then the lock file (last, while still held: one
        who locks it after is told it went, see :meth:`take`), then each directory it
        made that is empty. A start that failed (an address in use) left a new
        directory of a lock and an empty shard (QA). Where the directory was there,
        only the lock file goes, if taking it made it (QA: a directory of another
        program's files, refused, was left a lock file of ubipy's)."""
        if self._fd is None:
            return
        if unmake and (self.made or self.created):
            for name in (*unmake, LOCK_FILE) if self.made else (LOCK_FILE,):
                with suppress(OSError):
                    (self.data_dir / name).unlink(missing_ok=True)
        self._fd = None
        self._finalizer()
        if self.made and unmake:
            for directory in self.made:
                try:
                    directory.rmdir()
                except OSError:
                    break  # something else is in it: it stays, and so do those above it


def _still_there(fd: int, path: Path) -> bool:
    """Whether ``fd`` is the file at ``path`` now."""
    try:
        there = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


def _make(data_dir: Path) -> tuple[Path, ...]:
    """Make ``data_dir`` and its missing parents; those this call made, innermost
    first (one made meanwhile by another process is not among them)."""
    missing: list[Path] = []
    path = data_dir
    while not path.exists() and not path.is_symlink() and path.parent != path:
        missing.append(path)
        path = path.parent
    made: list[Path] = []
    for directory in reversed(missing):
        try:
            directory.mkdir()
        except FileExistsError:
            continue
        made.append(directory)
    return tuple(reversed(made))


def _ours(fd: int) -> bool:
    """Whether the file says what :meth:`DataLock.note` writes (a pid and an address),
    or what a crash may leave of that: nothing, a part of it, zeros."""
    try:
        text = os.pread(fd, 512, 0)
    except OSError:
        return False
    return _NOTE.fullmatch(text.rstrip(b"\0")) is not None


def _holder(fd: int) -> tuple[int | None, str | None]:
    """The pid and address the holder wrote (None for what it has not written yet)."""
    try:
        words = os.pread(fd, 512, 0).decode("utf-8", "replace").split()
    except OSError:
        words = []
    pid = int(words[0]) if words and words[0].isdigit() else None
    return pid, words[1] if len(words) > 1 else None
