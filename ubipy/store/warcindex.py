"""Indexes of a peer's WARC files that other tools read where the files lie: a CDXJ
file beside each closed WARC file (what pywb loads from a collection's index
directory), and, through :mod:`ubipy.store.warcparquet`, one Parquet file with
Common Crawl's columnar-index columns (docs/storage.md, "Index").

A CDXJ line is ``<SURT key> <14-digit timestamp> <JSON>``, the JSON and the lines'
order exactly as pywb's own indexer writes them (``cdx-indexer --cdxj --sort``), so
that pywb's binary search finds them: lines sorted as bytes. The SURT key is made by
the ``surt`` package, the one pywb makes its lookup keys with. Sorting is done in
runs of bounded size merged from temporary files, so a 1 GB WARC file is indexed in
a few megabytes of memory.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import re
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import IO

from ubipy.errors import ExportError
from ubipy.store.outfile import write_path
from ubipy.store.schema import SHARD_FILE
from ubipy.store.surtkey import surt_key
from ubipy.store.warcscan import Capture, ScanCounts, scan_file

__all__ = [
    "CDXJ_SUFFIX",
    "IndexedFile",
    "cdxj_line",
    "cdxj_of",
    "closed_files",
    "final_of",
    "index_lines",
    "index_warc",
    "merge_cdxj",
    "open_files",
    "peer_of",
    "surt_key",
    "warc_dir",
    "write_cdxj",
]

# pywb loads every file of an index directory whose name ends in .cdx or .cdxj.
CDXJ_SUFFIX = ".cdxj"
_CLOSED = ".warc.gz"
# Lines held in memory before a sorted run goes to a temporary file.
_RUN_BYTES = 16 << 20
# A peer's files: ubipy-<peer id>-<UTC timestamp>-<serial>.warc.gz.
_NAME = re.compile(r"ubipy-(?P<peer>[0-9A-Za-z]+)-\d")


@dataclass(frozen=True, slots=True)
class IndexedFile:
    """A WARC file indexed: where its CDXJ went, and what the scan found."""

    warc: Path
    cdxj: Path
    captures: int  # lines written
    records: int  # whole records read
    skipped: int  # stretches that were not whole records (a torn tail, garbage)
    skipped_bytes: int
    unkeyed: int  # captures left out: no SURT key could be made of their URL


def cdxj_line(capture: Capture, key: str, filename: str, timestamp: str | None = None) -> bytes:
    """One CDXJ line, as pywb's indexer writes it: its JSON's fields in its order, as
    ``json.dumps`` writes them (built by hand: a peer makes a line for every page);
    ``timestamp``: the capture's, if known (its 14 digits)."""
    text = encode_basestring_ascii  # a JSON string, as json.dumps writes it
    parts = []
    if capture.json_metadata:
        parts.append(f'"metadata": {text(capture.json_metadata)}')
    parts.append(f'"url": {text(capture.url)}')
    if mime := capture.mime:  # pywb leaves out an empty one (Content-Type: ;x)
        parts.append(f'"mime": {text(mime)}')
    if capture.mime_detected:
        parts.append(f'"mime-detected": {text(capture.mime_detected)}')
    if capture.record_type == "response" and capture.status is not None:
        parts.append(f'"status": "{capture.status}"')
    if capture.digest:
        parts.append(f'"digest": {text(capture.digest)}')
    parts.append(
        f'"length": "{capture.length}", "offset": "{capture.offset}", "filename": {text(filename)}'
    )
    return f"{key} {timestamp or capture.timestamp} {{{', '.join(parts)}}}\n".encode()


def cdxj_of(warc: Path) -> Path:
    """Where the CDXJ of a WARC file goes: beside it, ``<name>.cdxj``."""
    return warc.with_name(warc.name + CDXJ_SUFFIX)


def has_current_index(warc: Path) -> bool:
    """Whether a WARC file's CDXJ is there and no older than the file."""
    try:
        return os.stat(cdxj_of(warc)).st_mtime_ns >= os.stat(warc).st_mtime_ns
    except FileNotFoundError:
        return False


def peer_of(warc: Path, warcinfo: dict[str, str] | None = None) -> str | None:
    """The id of the peer that wrote a WARC file: from its name, else its warcinfo."""
    if found := _NAME.match(warc.name):
        return found["peer"]
    info = warcinfo or {}
    for field in ("ubipy-peer", "peer-id", "peer"):
        if info.get(field):
            return info[field]
    peers = info.get("ubipy-peers", "").split()
    return peers[0] if len(peers) == 1 else None


def warc_dir(data: Path) -> Path | None:
    """The WARC directory of a data directory (``DATA/warc``), or ``data`` itself when
    it holds WARC files; None for a peer's data directory with none (it has fetched
    nothing yet, or keeps bodies in its shard); ExportError when it is neither."""
    if (data / "warc").is_dir():
        return data / "warc"
    if data.is_dir() and any(p.name.endswith(_CLOSED) for p in data.iterdir()):
        return data
    if not data.is_dir():
        raise ExportError(f"{data}: not a directory")
    if (data / SHARD_FILE).is_file():
        return None
    raise ExportError(f"{data}: neither a peer's data directory nor one of WARC files")


def closed_files(directory: Path) -> list[Path]:
    """The closed WARC files of a directory, by name (a peer's, in the order written)."""
    return sorted(
        p
        for p in directory.iterdir()
        if p.name.endswith(_CLOSED) and not p.name.startswith(".") and _regular(p)
    )


def final_of(path: Path) -> Path:
    """The name a file being written (:func:`open_files`) takes when it is closed."""
    return path.with_name(path.name[: path.name.index(_CLOSED) + len(_CLOSED)])


def open_files(directory: Path) -> list[Path]:
    """The files being written: ``<name>.warc.gz`` and a suffix until they are closed."""
    return sorted(
        p
        for p in directory.iterdir()
        if _CLOSED + "." in p.name
        and not p.name.endswith(CDXJ_SUFFIX)
        and not p.name.startswith(".")
        and _regular(p)
    )


def _regular(path: Path) -> bool:
    """A regular file (through a link): a directory or a link to nothing that has a
    WARC file's name is not one, and is left out."""
    try:
        return path.is_file()
    except OSError:
        return False


def write_cdxj(warc: Path) -> IndexedFile:
    """Write the CDXJ of a closed WARC file beside it (see :func:`index_warc`)."""
    target = cdxj_of(warc)
    _check_ours(target, warc.name)
    counts = ScanCounts()
    unkeyed = 0
    captures = 0

    def lines() -> Iterator[bytes]:
        nonlocal unkeyed, captures
        for capture in scan_file(warc, counts):
            key = surt_key(capture.url)
            if key is None:
                unkeyed += 1
                continue
            captures += 1
            yield cdxj_line(capture, key, warc.name)

    try:
        st = os.stat(warc)
    except OSError as exc:
        raise ExportError(f"{warc}: cannot read: {exc.strerror or exc}") from exc
    write_path(target, lambda out: _write_sorted(lines(), out), {(st.st_dev, st.st_ino)})
    return IndexedFile(
        warc, target, captures, counts.records, counts.skipped, counts.skipped_bytes, unkeyed
    )


def index_warc(path: Path) -> Path:
    """Write ``<path>.cdxj``, the CDXJ index of the closed WARC file ``path``, beside
    it, and return its path.

    The file appears complete or not at all (written under a name of its own, then
    renamed), replacing only an index of this WARC file (a CDXJ whose lines name it,
    or an empty one): anything else under that name raises :class:`ExportError`, as
    does a WARC file that cannot be read. A torn or garbage tail is skipped: what is
    whole is indexed (:func:`write_cdxj` says how much was not).
    """
    return write_cdxj(path).cdxj


def index_lines(warc: Path, lines: Iterable[bytes]) -> Path:
    """Write the CDXJ of a closed WARC file from ``lines`` made as its records were
    written (:func:`cdxj_line`, in any order): a writer that knows what it wrote need
    not read the file back. The same care as :func:`index_warc` for what is there."""
    target = cdxj_of(warc)
    _check_ours(target, warc.name)
    write_path(target, lambda out: _write_sorted(lines, out), set())
    return target


def _check_ours(target: Path, filename: str) -> None:
    """Refuses to replace what is not an index of ``filename``."""
    try:
        with open(target, "rb") as f:
            first = f.readline(1 << 16)
    except FileNotFoundError:
        return
    except IsADirectoryError:
        raise ExportError(f"{target}: is a directory") from None
    except OSError as exc:
        raise ExportError(f"{target}: cannot read: {exc.strerror or exc}") from exc
    if not first:
        return
    try:
        named = json.loads(first.split(b" ", 2)[2]).get("filename")
    except (IndexError, ValueError, AttributeError):
        named = None
    if named != filename:
        raise ExportError(f"{target}: not an index of {filename}; left as it is")


def _write_sorted(lines: Iterable[bytes], out: IO[bytes]) -> None:
    """``lines`` sorted as bytes, in runs of bounded size merged from temporary files."""
    with contextlib.ExitStack() as stack:
        runs: list[IO[bytes]] = []
        run: list[bytes] = []
        size = 0
        for line in lines:
            run.append(line)
            size += len(line)
            if size >= _RUN_BYTES:
                spilled = stack.enter_context(tempfile.TemporaryFile())
                run.sort()
                spilled.writelines(run)
                spilled.seek(0)
                runs.append(spilled)
                run, size = [], 0
        run.sort()
        out.writelines(heapq.merge(iter(run), *runs) if runs else run)


def merge_cdxj(indexes: Iterable[Path], out: IO[bytes]) -> int:
    """Merge sorted CDXJ files into one sorted stream; the lines written."""
    with contextlib.ExitStack() as stack:
        files = [stack.enter_context(open(p, "rb")) for p in indexes]
        written = 0
        for line in heapq.merge(*files):
            out.write(line)
            written += 1
    return written
