"""The WARC export of WARC-backed shards (``--bodies warc``): the peers' own files,
copied or linked rather than written again.

A peer's closed files (final names) are whole and never written again: a directory
export hard-links them (copies them across file systems), a file export appends their
bytes. Of the open file only what the shard had committed at the export's snapshot is
taken (its warcinfo included): the part past it may be a commit in progress. Pages
whose records are not in WARC files (stored with ``--bodies shard``, or before #20)
are written as before, by :mod:`ubipy.store.warc`, after them.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ubipy.errors import ExportError, ExportWriteError
from ubipy.store.outfile import create_part, identity
from ubipy.store.snapshot import ShardReader
from ubipy.store.warcfiles import OPEN_SUFFIX, WARC_DIR
from ubipy.store.warcindex import peer_of

__all__ = ["Made", "Part", "copy_part", "link_part", "parts_of", "unmake"]

_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Part:
    """A file to export: its path now, its final name, and how much of it (None: all)."""

    path: Path
    name: str
    length: int | None
    # How long a closed file is at least: where the shard says its last capture ends.
    least: int = 0


def parts_of(reader: ShardReader, *, missing_ok: bool = False) -> list[Part]:
    """The peer's WARC files as the reader's snapshot sees them, in name order (their
    names sort by time): the closed ones whole, the open one to its committed mark.
    ``missing_ok``: those gone are left out, not refused (an export that reads no
    bodies).

    Only the peer's own: those its shard has captures in and those named as it names
    them (``ubipy-<its id>-...``). Any other file there (an export the user wrote into
    the directory) is not the peer's: taken, its records went into the export a second
    time, uncounted (a review found)."""
    directory = reader.path.parent / WARC_DIR
    if not reader.has_warc:
        return []
    mark = reader.warc_mark()
    ends = reader.warc_ends()
    # A peer with no id yet names its files ubipy-local-...
    peer = reader.peer_id or "local"
    parts = {
        p.name: Part(p, p.name, None, ends.get(p.name, 0))
        for p in (directory.glob("*.warc.gz") if directory.is_dir() else ())
        if (p.name in ends or peer_of(p) == peer) and p.is_file()
    }
    # A file whose close failed (a rotation on a full disk) stays open, holding
    # captures, until the peer's next start closes it: taken to its last capture (it
    # was refused as missing until then; a review).
    unlisted = ends.keys() - parts.keys() - ({mark[0]} if mark else set())
    for name in unlisted:
        if (left_open := directory / (name + OPEN_SUFFIX)).is_file():
            parts[name] = Part(left_open, name, ends[name])
    # Files the shard has captures in, gone (moved, deleted): their pages were left
    # out without a word, the summary counting them all the same (a review found).
    missing = sorted(n for n in unlisted if n not in parts)
    if missing and not missing_ok:
        more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
        named = ", ".join(missing[:3]) + more
        raise ExportError(
            f"{directory}: WARC files its shard has pages in are missing ({named}); "
            "put them back to export those pages"
        )
    if mark is not None and mark[0] not in parts:
        name, end = mark
        # Renamed meanwhile (closed): then it is whole, and under its final name.
        opened = directory / (name + OPEN_SUFFIX)
        closed = directory / name
        parts[name] = Part(opened if opened.exists() else closed, name, end)
    return [parts[n] for n in sorted(parts)]


def _open(part: Part) -> IO[bytes]:
    try:
        f = part.path.open("rb")
    except FileNotFoundError:
        # The open file was closed (renamed) since it was listed.
        final = part.path.with_name(part.name)
        try:
            f = final.open("rb")
        except OSError as exc:
            raise ExportError(f"{part.path}: cannot read: {exc.strerror or exc}") from exc
    except OSError as exc:
        raise ExportError(f"{part.path}: cannot read: {exc.strerror or exc}") from exc
    try:
        _check_size(part, os.fstat(f.fileno()).st_size)
    except BaseException:
        f.close()
        raise
    return f


def _check_size(part: Part, size: int) -> None:
    """A closed file cut short (a damaged disk, a copy gone wrong) would be exported
    with records shorter than their Content-Length: refused."""
    if part.length is None and size < part.least:
        raise ExportError(
            f"{part.path}: shorter than the shard says ({size} bytes, its captures "
            f"end at {part.least})"
        )


def _chunks(part: Part) -> Iterator[bytes]:
    left = part.length
    with _open(part) as f:
        while left is None or left > 0:
            chunk = f.read(_CHUNK if left is None else min(_CHUNK, left))
            if not chunk:
                break
            if left is not None:
                left -= len(chunk)
            yield chunk
    if left:
        raise ExportError(f"{part.path}: shorter than the shard says ({left} bytes missing)")


def copy_part(part: Part, sink: IO[bytes], *, gunzip: bool) -> int:
    """Append a part to ``sink`` as it is, or decompressed (every gzip member in turn);
    returns the bytes read from it. Each member is checked either way: a damaged file's
    bytes, copied as they were, hid every record after them from a reader, and the
    export said it wrote them all (QA)."""
    read = 0
    z = zlib.decompressobj(31)
    begun = False  # a gzip member begun and not yet ended
    try:
        for chunk in _chunks(part):
            read += len(chunk)
            if not gunzip:
                sink.write(chunk)
            while chunk:
                begun = True
                out = z.decompress(chunk)
                if gunzip:
                    sink.write(out)
                if not z.eof:
                    break
                begun = False
                chunk = z.unused_data
                z = zlib.decompressobj(31)
    except zlib.error as exc:
        raise ExportError(f"{part.path}: not a whole WARC file: {exc}") from exc
    if begun:
        raise ExportError(f"{part.path}: not a whole WARC file: its last gzip member is cut short")
    return read


@dataclass(frozen=True, slots=True)
class Made:
    """What :func:`link_part` did to a name, for :func:`unmake` to undo: made it (a
    file of ``identity``), or extended the file of ``identity`` that was there, an
    earlier export's copy of ``size`` bytes."""

    identity: tuple[int, int]
    size: int | None = None


def _extended(part: Part, copy: Path, size: int) -> bool:
    """If ``copy`` (``size`` bytes) is a beginning of the part, add the rest of the part
    to it and say True; else leave it as it is and say False. Its bytes are all
    compared before any is written; a failure while they are added (a full disk, a
    part found short) cuts the copy back to what it was."""
    try:
        f = copy.open("r+b")
    except OSError:
        return False  # not one this export can have made
    with f:
        at = 0
        try:
            for chunk in _chunks(part):
                if at < size:
                    mine = f.read(min(len(chunk), size - at))
                    if mine != chunk[: len(mine)]:
                        return False
                if at + len(chunk) > size:
                    f.write(chunk[max(0, size - at) :])
                at += len(chunk)
            f.flush()
        except BaseException as exc:
            with contextlib.suppress(OSError):
                f.truncate(size)
            if isinstance(exc, OSError):
                raise ExportWriteError(f"{copy}: cannot write: {exc.strerror or exc}") from exc
            raise
    return at > size


def link_part(part: Part, directory: Path) -> Made | None:
    """Put a part into ``directory`` under its final name: a hard link to a closed file
    (a copy across file systems), a copy of the open file's committed part. A file of
    that name already there is left as it is if it is the same file or the same size
    (an export made again), else refused. Returns what it made or extended, for
    :func:`unmake` (None: neither)."""
    target = directory / part.name
    if part.length is None:
        try:
            _check_size(part, part.path.stat().st_size)
        except OSError as exc:
            raise ExportError(f"{part.path}: cannot read: {exc.strerror or exc}") from exc
    if target.exists():
        same = os.path.samefile(target, part.path) if part.path.exists() else False
        size = target.stat().st_size
        want = part.length if part.length is not None else part.path.stat().st_size
        if same or size == want:
            return None
        own = target.is_file() and not target.is_symlink() and target.stat().st_nlink == 1
        # An earlier export's copy of this file while it was being written: the rest
        # is added (it was refused, so a live peer could be exported once). Not a
        # file with other names (a snapshot's link): that would change too.
        found = identity(target, follow=False)
        if size < want and own and found is not None and _extended(part, target, size):
            return Made(found, size)
        raise ExportError(f"{target}: already there, and not the peer's file")
    if part.length is None:
        try:
            os.link(part.path, target)
            return _made(target)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                raise ExportError(f"{target}: cannot link: {exc.strerror or exc}") from exc
    # Written under a name of its own (created here, never one of the user's), then
    # linked to the target: a link, unlike a rename, never replaces what is there.
    # Its mode is the umask's, as every other file's there (NamedTemporaryFile's 0600
    # made it the one file of the export others could not read, a review found).
    fd, partial = create_part(target, target)
    try:
        with open(fd, "wb") as out:
            if part.length is None:
                with _open(part) as f:
                    shutil.copyfileobj(f, out, _CHUNK)
            else:
                copy_part(part, out, gunzip=False)
        os.link(partial, target)
        return _made(target)
    except FileExistsError:
        raise ExportError(f"{target}: appeared during the export; left as it is") from None
    except OSError as exc:
        # The world refused it (a full disk), not the command: exit 1, as the README says.
        raise ExportWriteError(f"{target}: cannot write: {exc.strerror or exc}") from exc
    finally:
        partial.unlink(missing_ok=True)


def _made(path: Path) -> Made | None:
    found = identity(path, follow=False)
    return None if found is None else Made(found)


def unmake(path: Path, made: Made) -> None:
    """Undo what :func:`link_part` did to ``path`` if it still names that regular
    file: the name it made goes (a link to a peer's file goes, the file stays), the
    copy it extended is cut back to what the earlier export left. Anything else that
    took the name meanwhile is left as it is."""
    try:
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) == made.identity:
            if made.size is None:
                path.unlink()
            else:
                os.truncate(path, made.size)
    except OSError:
        pass  # left: the error being reported is the one that matters
