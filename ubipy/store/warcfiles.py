"""The peer's WARC files in ``DATA/warc``: one open for appending, rotated at a size,
and the open file's torn tail cut off after a crash.

A file being written is named ``<name>.open``; once closed (its size reached, or the
peer stopping) it is synced and renamed to ``<name>``, so a file with its final name is
whole and never written again: tools may copy, link or index it. The shard keeps the
final name of each record's file (a reader looks for ``<name>.open`` while it is not
there yet) and, at each commit, how far the open file is committed (``warc_end`` in
its meta table): records are written past that mark, flushed, and only then is the
mark moved, in the shard's transaction. A refused transaction cuts the file back to
the mark, so the next commit writes the batch again where it was: no duplicate, no gap.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ubipy.errors import StorageError
from ubipy.store.walsync import sync_directory
from ubipy.store.warcrecords import LARGE_BODY, RecordReader

__all__ = ["OPEN_SUFFIX", "WARC_DIR", "Recovered", "WarcFiles", "recover"]

log = logging.getLogger(__name__)

WARC_DIR = "warc"
OPEN_SUFFIX = ".open"
_SERIAL = re.compile(r"-(\d{5,})\.warc\.gz(?:\.open)?$")


class _Refused(StorageError):
    """The WARC file could not be written (disk full, read-only)."""


@dataclass(frozen=True, slots=True)
class Recovered:
    """What recovery did: the files it closed, and the name and end of each open file
    that was shorter than committed (an OS crash before its data reached the disk): the
    records committed past ``end`` are gone."""

    closed: tuple[Path, ...]
    short: tuple[tuple[str, int], ...] = ()


def _whole(path: Path, *, past_first: bool = False) -> int:
    """Where the last whole record of a file ends (0: not even its first; with
    ``past_first``, 0 also when its first, a file's warcinfo, is all it holds)."""
    reader = RecordReader()
    end = records = 0
    try:
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                for _, offset, length in reader.feed(chunk):
                    end = offset + length
                    records += 1
    except StorageError:
        pass  # garbage past the last whole record
    return 0 if past_first and records < 2 else end


def close_file(path: Path) -> Path:
    """Sync an open file and give it its final name."""
    with path.open("rb+") as f:
        os.fsync(f.fileno())
    final = path.with_name(path.name.removesuffix(OPEN_SUFFIX))
    os.replace(path, final)
    return final


def recover(
    directory: Path,
    committed: tuple[str, int] | None,
    ends: Callable[[str, int | None], int | None],
    own: str,
) -> Recovered:
    """Close the files a crash left open, each cut back to where it is committed: the
    one the shard's mark names to the mark (its torn or uncommitted tail), any other to
    the end of its last capture (``ends(name, within)``: where the last capture in it
    ends, of those ending by ``within`` if given; None when none). A file whose close
    failed (a full disk at rotation) holds captures the shard counts on; only one
    holding none goes. A file shorter than committed is cut to the end of the last
    capture its whole records hold: cut to its last whole record, a capture's request
    and response stayed while its metadata was lost, its page went back to the
    frontier, and its second fetch left the page twice in the file. The mark's file
    missing altogether is short at 0. A short file stays open (cut): it is closed, or
    removed when nothing whole is left in it, once the shard has forgotten what it
    lost (``recover_warc``), or a crash between the two left a closed file the shard
    read past, or none at all (a review), and its pages never fetched again.

    Only this peer's files are touched: those named with ``own`` (``ubipy-<its id>-``)
    or holding captures the shard counts. Another peer's open files in the directory
    (copied there, a data directory shared by mistake) were cut, or removed when they
    held nothing whole, as its own were (QA)."""
    closed: list[Path] = []
    short: list[tuple[str, int]] = []
    opened = sorted(directory.glob(f"*{OPEN_SUFFIX}")) if directory.is_dir() else []
    if committed is not None and not any(
        (directory / n).exists() for n in (committed[0], committed[0] + OPEN_SUFFIX)
    ):
        # Neither open nor closed (an OS crash before its directory entry reached the
        # disk): as short as can be, its captures go back to the frontier.
        log.warning("warc: %s, committed to %d bytes, is missing", directory / committed[0],
                    committed[1])  # fmt: skip
        short.append((committed[0], 0))
    for path in opened:
        name = path.name.removesuffix(OPEN_SUFFIX)
        if _SERIAL.search(name) is None:
            log.warning("warc: leaving %s alone: not a name this peer gives its files", path)
            continue
        ours = name.startswith(own) or (committed is not None and name == committed[0])
        if not ours and ends(name, None) is None:
            log.warning("warc: leaving %s alone: not this peer's (its files are %s*)", path, own)
            continue
        if committed is not None and name == committed[0]:
            end = committed[1]
        elif (last := ends(name, None)) is not None:
            end = last
        elif committed is None and (kept := _whole(path, past_first=True)):
            # A shard with no mark: a new one beside an earlier one's files (the user
            # started afresh and kept the archive). Their records are not this shard's
            # to remove (3 captures were, a review): cut to the last whole and closed.
            log.warning("warc: %s holds records no shard here knows of: kept, closed", path)
            end = kept
        else:
            log.info("warc: removing %s, which holds nothing committed", path)
            path.unlink()
            continue
        size = path.stat().st_size
        if size < end:
            log.warning("warc: %s ends at %d, before its committed %d", path, size, end)
            end = ends(name, _whole(path)) or 0
            short.append((name, end))
        if end == 0 and not (short and short[-1][0] == name):
            path.unlink()
            continue
        if size != end:
            log.info("warc: cutting %s from %d to %d bytes (its uncommitted tail)", path, size, end)
            os.truncate(path, end)
        if short and short[-1][0] == name:
            continue
        closed.append(close_file(path))
    return Recovered(tuple(closed), tuple(short))


def _serial_after(directory: Path) -> int:
    found = [int(m.group(1)) for p in directory.iterdir() if (m := _SERIAL.search(p.name))]
    return max(found, default=0) + 1


class WarcFiles:
    """Appends records to the open file; rotates it at ``max_size`` bytes, or once it
    has been open ``max_age`` seconds (the monotonic clock's), at the commit after."""

    def __init__(
        self,
        directory: Path,
        *,
        max_size: int,
        max_age: float = math.inf,
        fsync: bool,
        prefix: Callable[[], str],
        warcinfo: Callable[[str], bytes],
        on_closed: Callable[[Path], None] = lambda path: None,
        shard_synced: Callable[[], None] = lambda: None,
    ) -> None:
        """``prefix``: the file names' start (``ubipy-<peer>``), asked when a file is
        begun; ``warcinfo``: a file's first record for its name; ``fsync``: sync the
        file at each commit (else at each close only, as the shard syncs its WAL);
        ``shard_synced``: puts the shard's commits on disk (raises StorageError),
        before a file takes its final name."""
        self.directory = directory
        self._max_size = max_size
        self._max_age = max_age
        self._opened_at = 0.0
        self._fsync = fsync
        self._prefix = prefix
        self._warcinfo = warcinfo
        self._on_closed = on_closed
        self._shard_synced = shard_synced
        self._serial = 0
        self._fd: int | None = None
        self._name: str | None = None
        # Changes to the directory's entries (a file made, renamed, left open by a failed
        # close) and how many of them the last directory sync covered: counted, as a
        # sync in another thread may overlap the next change.
        self._entries = self._entries_synced = 0
        self._dir_made_synced = False  # the directory's own entry, in the data dir
        # Files whose close failed: left open on disk (closed at the next start), their
        # records synced by each sync until one succeeds.
        self._unclosed: list[Path] = []
        self._committed = 0  # the open file's size at the last commit
        self._buffer: list[bytes] = []
        self._size = 0  # committed plus buffered
        self.bytes_written = 0

    @property
    def name(self) -> str | None:
        """The open file's final name (None: none open)."""
        return self._name

    @property
    def end(self) -> int:
        """Where the next record would start."""
        return self._size

    def _begin(self) -> None:
        try:
            # A full disk or a read-only one at the first page: an OSError here ended
            # the committer, and the peer with it (a review).
            self.directory.mkdir(parents=True, exist_ok=True)
            if not self._serial:
                self._serial = _serial_after(self.directory)
        except OSError as exc:
            raise _Refused(f"{self.directory}: {exc.strerror or exc}") from exc
        stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
        name = f"{self._prefix()}-{stamp}-{self._serial:05d}.warc.gz"
        self._serial += 1
        info = self._warcinfo(name)
        path = self.directory / (name + OPEN_SUFFIX)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
        except OSError as exc:
            raise _Refused(f"{path}: cannot create: {exc.strerror or exc}") from exc
        try:
            os.write(fd, info)
        except OSError as exc:
            os.close(fd)
            path.unlink(missing_ok=True)
            raise _Refused(f"{path}: cannot write: {exc.strerror or exc}") from exc
        self._fd, self._name = fd, name
        self._entries += 1
        self._committed = self._size = len(info)
        self._opened_at = time.monotonic()

    def ensure_open(self) -> None:
        """Begin a file, its warcinfo record first, unless one is open."""
        if self._fd is None:
            self._begin()

    def append(self, record: bytes | list[bytes]) -> tuple[str, int]:
        """Buffer a record (a gzip member, or its pieces) for the next flush: its file
        and offset."""
        self.ensure_open()
        assert self._name is not None
        offset = self._size
        if isinstance(record, bytes):
            self._buffer.append(record)
            self._size += len(record)
        else:
            self._buffer.extend(record)
            self._size += sum(map(len, record))
        return self._name, offset

    def flush(self) -> None:
        """Write what was appended since the last commit (and sync, if asked)."""
        if not self._buffer or self._fd is None:
            return
        try:
            for data in _runs(self._buffer):
                written = os.write(self._fd, data)
                while written < len(data):
                    written += os.write(self._fd, data[written:])
                self.bytes_written += len(data)
            if self._fsync:
                os.fsync(self._fd)
        except OSError as exc:
            raise _Refused(f"{self._path}: cannot write: {exc.strerror or exc}") from exc
        self._buffer = []

    def sync(self) -> None:
        """Put the open file's records on disk, through a machine's crash (what a
        commit wrote of them; buffered records are not committed yet), those of files
        whose close failed, and the directory's entries for them. Safe in another thread:
        a file closed meanwhile was synced by its close. Raises StorageError."""
        entries = self._entries
        for path in list(self._unclosed):
            try:
                with path.open("rb") as f:
                    os.fsync(f.fileno())
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise StorageError(f"{path}: cannot sync: {exc.strerror or exc}") from exc
            with contextlib.suppress(ValueError):  # another sync took it meanwhile
                self._unclosed.remove(path)
        fd, name = self._fd, self._name
        if fd is not None:
            try:
                os.fsync(fd)
            except OSError as exc:
                if self._fd == fd:  # else closed meanwhile (its number another file's now)
                    path = self.directory / f"{name}{OPEN_SUFFIX}"
                    raise StorageError(f"{path}: cannot sync: {exc.strerror or exc}") from exc
        if entries != self._entries_synced:
            # Records synced under a name an OS crash could still lose: the directory's
            # entries too, and the first time the directory's own.
            try:
                if not self._dir_made_synced:
                    sync_directory(self.directory.parent)
                    self._dir_made_synced = True
                sync_directory(self.directory)
            except OSError as exc:
                raise StorageError(f"{self.directory}: cannot sync: {exc.strerror or exc}") from exc
            self._entries_synced = max(self._entries_synced, entries)

    def rollback(self) -> None:
        """The shard refused the commit: the file goes back to its last committed end."""
        self._buffer = []
        self._size = self._committed
        if self._fd is not None:
            try:
                os.ftruncate(self._fd, self._committed)
            except OSError as exc:
                # The next commit's records would land after the stray ones: close
                # the file here instead (recovery cuts it back at the next start).
                log.error("warc: cannot cut %s back: %s; starting a new file", self._path, exc)
                # What earlier commits wrote in it still counts: later syncs take it.
                self._unclosed.append(self._path)
                os.close(self._fd)
                self._fd = self._name = None

    def committed(self) -> None:
        """The shard took the commit: its records count; a full or old file is closed."""
        self._committed = self._size
        if self._fd is not None and (
            self._size >= self._max_size or time.monotonic() - self._opened_at >= self._max_age
        ):
            self.close()

    def close(self) -> bool:
        """Close the open file (synced, renamed to its final name), if one is; whether
        every file this wrote is now closed."""
        if self._fd is None:
            return not self._unclosed
        path, fd = self._path, self._fd
        self._fd = self._name = None
        self._buffer, self._size = [], 0
        try:
            # Raised past the shard's COMMIT, an error here ended the committer task,
            # and the peer (a review): the file is left open, closed at the next start.
            try:
                os.ftruncate(fd, self._committed)
            finally:
                os.close(fd)
            # A closed file is never cut back: what it holds must be what the shard
            # holds through a machine's crash. Its WAL unsynced (synchronous=NORMAL),
            # a power cut lost the last commit and kept the file whole, and its pages,
            # pending again, were fetched and archived twice (a review).
            self._shard_synced()
            final = close_file(path)
            self._entries += 1  # renamed
        except (OSError, StorageError) as exc:
            log.error("warc: cannot close %s: %s (closed at the next start)", path, exc)
            # Its records still count (the shard's rows point into it), and a later sync
            # that vouches for them to another peer must reach them (a review).
            self._unclosed.append(path)
            return False
        self._on_closed(final)
        return not self._unclosed

    @property
    def _path(self) -> Path:
        return self.directory / f"{self._name}{OPEN_SUFFIX}"


def _runs(pieces: list[bytes]) -> Iterator[bytes]:
    """What one write each takes: pieces in a row joined up to LARGE_BODY bytes, a
    large one alone (not copied whole into a join: a sitemap's record may be 50 MB)."""
    run: list[bytes] = []
    size = 0
    for piece in pieces:
        if run and size + len(piece) > LARGE_BODY:
            yield b"".join(run)
            run, size = [], 0
        run.append(piece)
        size += len(piece)
    if run:
        yield b"".join(run)
