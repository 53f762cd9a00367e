"""Writing an export to the file the user named, safely: a regular file appears only
once complete, a device or a FIFO is written in place, and nothing that is not a
regular file is ever replaced (docs/storage.md, "Export formats")."""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Callable, Collection
from pathlib import Path
from typing import IO, TypeVar

from ubipy.errors import ExportError, ExportWriteError
from ubipy.store.lock import LOCK_FILE
from ubipy.store.schema import SHARD_FILE
from ubipy.store.warcfiles import WARC_DIR

__all__ = ["create_part", "identities", "identity", "peer_files", "why", "write_path"]

T = TypeVar("T")


def identities(shard: Path) -> list[tuple[int, int]]:
    """The (device, inode) of a shard file and of its WAL files that exist, the shard first."""
    found = []
    for suffix in ("", "-wal", "-shm"):
        try:
            st = os.stat(f"{shard}{suffix}")
        except OSError:
            continue
        found.append((st.st_dev, st.st_ino))
    return found


def identity(path: Path, *, follow: bool = True) -> tuple[int, int] | None:
    """The (device, inode) of the file ``path`` names (through links unless not
    ``follow``), if it exists."""
    try:
        st = os.stat(path, follow_symlinks=follow)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def peer_files(data_dir: Path) -> list[tuple[int, int]]:
    """The (device, inode) of a data directory's own files that exist: its shard, the
    shard's WAL files and its lock (a new file in the lock's place would leave a
    running peer's lock on the old one, and let a second peer start over the
    directory)."""
    found = identities(data_dir / SHARD_FILE)
    if (lock := identity(data_dir / LOCK_FILE)) is not None:
        found.append(lock)
    return found


def refuse_input(out: Path, inputs: set[tuple[int, int]], paths: Collection[Path] = ()) -> None:
    """Refuse ``out`` at once, before any work, if it names one of the ``inputs``, or
    one of the ``paths`` (absolute, without links), there or not: files the command
    writes before ``out``, that do not exist yet."""
    if identity(out) in inputs or Path(os.path.realpath(out)) in paths:
        raise ExportError(f"{out}: {_AN_INPUT}")
    if (whose := _a_peers(Path(os.path.realpath(out)))) is not None:
        raise ExportError(f"{out}: {whose}; left as it is")


def _a_peers(real: Path) -> str | None:
    """What ``real`` (a path without links) is, if it is a peer's own that an output
    must not take, whichever peers the command reads: a data directory or its WARC
    directory (their files were linked onto themselves), a file of the WARC directory,
    a shard's files or the lock (another peer's shard was written over with JSON, its
    WARC file replaced: QA), or an SQLite database anywhere. A new file counts too:
    one in the WARC directory is read as the peer's own by ``ubipy index`` (its pages
    counted twice), and SQLite takes a new ``shard.sqlite3-journal`` for a hot journal
    of the shard (QA: the next export refused the shard, the next start deleted it).
    Any other file of a data directory (an earlier export written there) is the user's."""
    home = real if real.is_dir() else real.parent
    in_warc = home.name == WARC_DIR
    if in_warc:
        home = home.parent
    if (home / SHARD_FILE).is_file() and (
        real.is_dir() or in_warc or real.name.startswith(SHARD_FILE) or real.name == LOCK_FILE
    ):
        return f"is a peer's own (its data directory is {home})"
    if not real.is_file():
        return None  # a FIFO's open would wait for a writer; a device is no database
    try:
        with real.open("rb") as f:
            magic = f.read(16)
    except OSError:
        return None
    return "is an SQLite database" if magic == b"SQLite format 3\x00" else None


# Never written over: a shard, a peer's own WARC file or its index, that a command reads.
_AN_INPUT = (
    "is one of the peers' own files (a shard, its lock, a WARC file or its index); left as it is"
)


def why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def write_path(out: Path, write: Callable[[IO[bytes]], T], inputs: set[tuple[int, int]]) -> T:
    """Write to the file ``out`` names without ever replacing what is not a regular file.

    As ``cp`` does, a link is followed and what it points to is written, the link kept:
    a regular file (or nothing) is written beside it under a unique name and renamed
    onto it once complete, so a failed export leaves the old file as it was and no
    name of the user's is ever taken; a character device (``/dev/null``) or a FIFO is
    opened and written in place, as the user asked, since a rename would replace
    it by a plain file. A directory, a link to nothing (GNU ``cp`` refuses it too:
    writing through it would create a file somewhere the user never named), a socket
    or a block device is refused.

    ``/dev/stdout``, ``/dev/fd/N`` and the like are the descriptor itself, as the shell
    takes them: written where it stands, so that ``--out /dev/stdout >> log`` appends
    to the log (opening the path anew would write over its start).
    """
    descriptor = _named_descriptor(out)
    if descriptor is not None:
        try:
            fd = os.dup(descriptor)
        except OSError as exc:
            raise ExportError(f"{out}: cannot write: {why(exc)}") from exc
        return _write_in_place(out, fd, write, inputs)
    try:
        st: os.stat_result | None = os.stat(out)
    except FileNotFoundError:
        if out.is_symlink():
            raise ExportError(
                f"{out}: a symbolic link to nothing ({os.readlink(out)}); not writing through it"
            ) from None
        st = None
    except OSError as exc:
        raise ExportError(f"{out}: cannot write: {why(exc)}") from exc
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise ExportError(f"{out}: is a directory")
        if (st.st_dev, st.st_ino) in inputs:
            raise ExportError(f"{out}: {_AN_INPUT}")
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            # Neither created nor truncated: a device or a FIFO is written as it is.
            try:
                fd = os.open(out, os.O_WRONLY | os.O_NOCTTY)
            except OSError as exc:
                raise ExportError(f"{out}: cannot write: {why(exc)}") from exc
            return _write_in_place(out, fd, write, inputs)
        if not stat.S_ISREG(st.st_mode):
            raise ExportError(
                f"{out}: not a regular file, a character device or a FIFO; not writing to it"
            )
    # Through a link, the file it points to is the one replaced; the link stays.
    target = Path(os.path.realpath(out)) if st is not None else out
    fd, part = create_part(out, target)
    try:
        with open(fd, "wb") as f:
            if st is not None:
                os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode) & 0o777)
            result = write(f)
            f.flush()
            os.fsync(f.fileno())  # a disk that fills late fails here, not after the rename
        _install(out, part, target)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise ExportWriteError(f"{out}: cannot write: {why(exc)}") from exc
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return result


def create_part(out: Path, target: Path) -> tuple[int, Path]:
    """A new file beside ``target`` under a name nobody else has (``O_EXCL``), so that an
    ``X.part`` of the user's is never touched. Unlike ``mkstemp``'s 0600, it takes the
    mode a new file gets from the umask."""
    for _ in range(100):
        part = target.with_name(f".{target.name}.{secrets.token_hex(4)}.part")
        try:
            return os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), part
        except FileExistsError:
            continue
        except OSError as exc:
            raise ExportError(f"{out}: cannot write: {why(exc)}") from exc
    raise ExportError(f"{out}: cannot write: no free name for a partial file beside it")


def _install(out: Path, part: Path, target: Path) -> None:
    """Put the complete ``part`` under ``target``'s name, replacing a regular file or
    nothing: whatever else appeared there meanwhile is left as it is."""
    try:
        now = os.lstat(target)
    except FileNotFoundError:
        try:
            # A link, unlike a rename, fails if something took the name meanwhile.
            os.link(part, target)
        except FileExistsError:
            raise ExportError(
                f"{out}: appeared while the export was written; left as it is"
            ) from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK):
                raise
            os.rename(part, target)  # a file system without hard links
            return
        part.unlink()
        return
    if not stat.S_ISREG(now.st_mode):
        raise ExportError(
            f"{out}: became something other than a regular file while the export was "
            "written; left as it is"
        )
    os.replace(part, target)


_STANDARD_STREAMS = {"/dev/stdout": 1, "/dev/stderr": 2}


def _named_descriptor(out: Path) -> int | None:
    """The open descriptor of this process that ``out`` names, if it names one."""
    name = str(out)
    if name in _STANDARD_STREAMS:
        return _STANDARD_STREAMS[name]
    for prefix in ("/dev/fd/", "/proc/self/fd/"):
        number = name.removeprefix(prefix)
        if number != name and number.isdigit():
            return int(number)
    return None


def _write_in_place(
    out: Path,
    fd: int,
    write: Callable[[IO[bytes]], T],
    inputs: set[tuple[int, int]],
) -> T:
    """Write to ``fd``, open on ``out``, and close it; only a device, a FIFO or (through
    a descriptor the shell opened) a regular file is written, never an input."""
    st = os.fstat(fd)
    refused = None
    if (st.st_dev, st.st_ino) in inputs:
        refused = _AN_INPUT
    elif not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or stat.S_ISREG(st.st_mode)):
        refused = "not a regular file, a character device or a FIFO; not writing to it"
    elif stat.S_ISREG(st.st_mode) and _named_descriptor(out) is None:
        refused = "changed while being opened; left as it is"
    if refused is not None:
        os.close(fd)
        raise ExportError(f"{out}: {refused}")
    try:
        with open(fd, "wb") as f:
            result = write(f)
            f.flush()
    except OSError as exc:
        raise ExportWriteError(f"{out}: cannot write: {why(exc)}") from exc
    return result
