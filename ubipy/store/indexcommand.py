"""``ubipy index``: the CDXJ of every closed WARC file of some data directories, or
one Parquet file of their captures (docs/storage.md, "Index").

A closed file has its final name (``*.warc.gz``) and never changes again, so its
CDXJ is rewritten only when missing or older than the file (``force`` rewrites
them all). The file a peer is writing (``*.warc.gz.open``) has no CDXJ; its whole
records go into a Parquet index only when asked (``include_open``): it is renamed
when closed, and after a ``kill -9`` the peer cuts it back to its last commit, so
rows from it may come to name a file that is gone or records that were cut.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Literal

from ubipy.errors import ExportError, ExportWriteError
from ubipy.store.export import format_of, refuse_misnamed
from ubipy.store.outfile import identity, peer_files, refuse_input, write_path
from ubipy.store.warcindex import (
    cdxj_of,
    closed_files,
    final_of,
    has_current_index,
    merge_cdxj,
    open_files,
    warc_dir,
    write_cdxj,
)
from ubipy.store.warcparquet import require_pyarrow, write_parquet
from ubipy.wording import counted

__all__ = [
    "INDEX_FORMATS",
    "IndexFormat",
    "IndexSummary",
    "describe_index",
    "index_data",
    "index_format",
]

IndexFormat = Literal["cdxj", "parquet"]
INDEX_FORMATS: tuple[IndexFormat, ...] = ("cdxj", "parquet")
# What -o - writes to: the descriptor itself (see ubipy.store.outfile.write_path).
_STDOUT = Path("/dev/stdout")


@dataclass(frozen=True, slots=True)
class IndexSummary:
    """What ``ubipy index`` did."""

    files: int  # WARC files read
    up_to_date: int  # closed files whose CDXJ was current, left as it was
    captures: int  # CDXJ lines or Parquet rows written (into OUT, when one is named)
    open_files: int  # files being written
    open_read: bool  # whether their whole records were read
    unkeyed: int  # captures left out: no SURT key could be made of their URL
    torn: tuple[tuple[Path, int], ...]  # files with bytes that are not whole records
    without: tuple[Path, ...] = ()  # peers' data directories with no WARC files


def index_format(fmt: IndexFormat | None, out: Path | None) -> IndexFormat:
    """The format asked for, else the one ``out``'s name says (``.parquet``,
    ``.cdxj``), else cdxj. (One that disagrees with the name is refused by
    :func:`index_data`.)"""
    if fmt is not None:
        return fmt
    return "parquet" if _named(out) == "parquet" else "cdxj"


def _named(out: Path | None) -> str | None:
    """The kind of file ``out``'s name says, if any: an index's, or an export's."""
    if out is None:
        return None
    name = out.name.lower().removesuffix(".gz")
    for kind in INDEX_FORMATS:
        if name.endswith(f".{kind}"):
            return kind
    return format_of(out)


def index_data(
    data_dirs: Sequence[Path],
    fmt: IndexFormat,
    out: Path | None = None,
    *,
    force: bool = False,
    include_open: bool = False,
) -> IndexSummary:
    """Index the WARC files of each data directory's ``warc/`` (see the module's
    docstring). ``cdxj``: a CDXJ beside each closed file, and with ``out`` all of them
    merged, sorted, into that file too (``-``: standard output). ``parquet``: one file
    at ``out`` (required). ``out`` is written as ``ubipy export`` writes (complete or
    not at all).
    Raises ExportError with a one-line message."""
    if include_open and fmt != "parquet":
        # A CDXJ is made of closed files only: the flag would do nothing, silently.
        raise ExportError("--include-open needs --format parquet (a CDXJ is of closed files only)")
    if out is not None and str(out) == "-":
        if fmt == "parquet":
            # Its readers seek to its footer, at the end: a pipe is of no use to them.
            raise ExportError("--format parquet needs -o FILE, not standard output (-o -)")
        # Standard output, as for `ubipy export --out -`: written to the descriptor
        # (the path would be a file named "-", made in the current directory).
        out = _STDOUT
    if fmt == "parquet":
        if out is None:
            raise ExportError("--format parquet needs -o FILE")
        require_pyarrow()  # before any work
    given = {d: warc_dir(d) for d in data_dirs}
    # A peer with no WARC files (nothing fetched yet, --bodies shard): its cluster's
    # others are indexed all the same (QA: one such peer refused them all).
    without = tuple(d for d, w in given.items() if w is None)
    dirs = list(dict.fromkeys(w.resolve() for w in given.values() if w is not None))
    closed = [p for d in dirs for p in closed_files(d)]
    opened = [p for d in dirs for p in open_files(d)]
    # What is read (the WARC files, their CDXJ) is never what -o replaces: refused
    # before any work.
    inputs = {
        found
        for p in (*closed, *opened, *(cdxj_of(p) for p in closed))
        if (found := identity(p)) is not None
    }
    # Nor is a peer's shard, its WAL files or its lock, in the data directory however
    # it was named: the one given, or the one whose warc/ was given (`index DATA/warc`
    # wrote a Parquet file over a running peer's shard, a review found).
    for home in {*(w.parent for w in dirs), *data_dirs}:
        inputs.update(peer_files(home))
    if out is not None:
        # Nor, by its path, the CDXJ of each closed file: one not there yet is written
        # before -o is (and -o replaced it: a file's own index held other files' lines,
        # a review found), or later taken for the file's index, newer than it. Nor an
        # open file's final name and its CDXJ: the peer's close would rename over the
        # one and take the other for the file's index (a review).
        finals = [final_of(p) for p in opened]
        refuse_input(out, inputs, {*(cdxj_of(p) for p in (*closed, *finals)), *finals})
        # CDXJ went into x.parquet without a word (QA), as an export's name is checked.
        if (named := _named(out)) is not None and named not in INDEX_FORMATS:
            raise ExportError(
                f"the output's name says {named}, not an index: name it .cdxj or .parquet"
            )
        refuse_misnamed(fmt, named)
    if fmt == "parquet":
        assert out is not None
        files = closed + opened if include_open else closed
        counts = write_path(out, lambda f: write_parquet(files, f), inputs)
        torn = [(p, c.skipped_bytes) for p, c in counts.scans.items() if c.skipped_bytes]
        return IndexSummary(
            len(files), 0, counts.rows, len(opened), include_open, counts.unkeyed, tuple(torn),
            without,
        )  # fmt: skip
    up_to_date = captures = unkeyed = 0
    torn = []
    for warc in closed:
        if not force and has_current_index(warc):
            up_to_date += 1
            continue
        done = write_cdxj(warc)
        captures += done.captures
        unkeyed += done.unkeyed
        if done.skipped_bytes:
            torn.append((warc, done.skipped_bytes))
    if out is not None:

        def merged(f: IO[bytes]) -> int:
            return merge_cdxj([cdxj_of(p) for p in closed], f)

        try:
            captures = write_path(out, merged, inputs)
        except ExportWriteError as exc:
            if out != _STDOUT:
                raise
            # As `ubipy export --out -` says it (QA: "/dev/stdout: cannot write").
            raise ExportWriteError(str(exc).replace(str(_STDOUT), "standard output", 1)) from exc
    return IndexSummary(
        len(closed) - up_to_date, up_to_date, captures, len(opened), False, unkeyed, tuple(torn),
        without,
    )  # fmt: skip


def describe_index(summary: IndexSummary, fmt: IndexFormat, out: Path | None) -> list[str]:
    """What the command says it did, a line each."""
    s = summary
    if fmt == "parquet":
        files = counted(s.files, "WARC file")
        lines = [f"wrote {counted(s.captures, 'row')} from {files} to {out}"]
    else:
        kept = f" ({s.up_to_date} up to date, kept)" if s.up_to_date else ""
        lines = [f"wrote the CDXJ of {counted(s.files, 'WARC file')}{kept}"]
        if out is not None:
            into = "standard output" if str(out) == "-" else out
            lines.append(f"merged {counted(s.captures, 'CDXJ line')} into {into}")
    if s.open_files and not s.open_read:
        lines.append(f"{counted(s.open_files, 'file')} being written left out")
    for path, skipped in s.torn:
        lines.append(f"{path}: {counted(skipped, 'byte')} not in whole records, skipped")
    if s.unkeyed:
        lines.append(f"{counted(s.unkeyed, 'record')} left out: no SURT key for their URLs")
    for data in s.without:
        lines.append(f"{data}: no WARC files (nothing fetched yet, or --bodies shard)")
    return lines
