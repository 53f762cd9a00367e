"""Export the pages of one or many shards to WARC or JSON Lines.

Each shard is opened for reading only inside one read transaction (see
:mod:`ubipy.store.snapshot`), so a live peer's shard can be exported while the peer
writes: the export sees one consistent snapshot and never blocks or changes the peer.
(The export never changes a shard. As for any reader of a WAL-mode database, SQLite
shares the live peer's ``-wal`` and ``-shm``, and makes them for a stopped peer's
shard and removes them again as the export ends, after checkpointing what a peer
that started and stopped meanwhile committed; and while the read lasts, the
peer's checkpoints cannot pass it, so its WAL may grow until the export ends.) Pages
are streamed, ordered by first fetch time across all shards (a k-way merge), each
followed by the visits a continuous crawl made of it, with one body in memory per
shard.

The parts: :mod:`ubipy.store.snapshot` reads a shard, :mod:`ubipy.store.warc` and
:mod:`ubipy.store.jsonl` write the formats, :mod:`ubipy.store.outfile` puts the
output where the user asked without harming what is there.
"""

from __future__ import annotations

import dataclasses
import gzip
import heapq
import io
import os
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import IO, Literal

from ubipy.errors import ExportError, ExportWriteError
from ubipy.store.jsonl import page_json, write_jsonl
from ubipy.store.outfile import identities, identity, peer_files, refuse_input, why, write_path
from ubipy.store.snapshot import (
    PEER_ID_META,
    ExportSummary,
    ShardReader,
    StoredPage,
    StoredVisit,
    iso_utc,
)
from ubipy.store.strays import Refetched, Strays
from ubipy.store.warc import WARC_VERSION, write_warc
from ubipy.store.warcexport import Made, Part, copy_part, link_part, parts_of, unmake
from ubipy.store.warcindex import cdxj_of

__all__ = [
    "FORMATS",
    "PEER_ID_META",
    "WARC_VERSION",
    "ExportSummary",
    "Format",
    "ShardReader",
    "StoredPage",
    "StoredVisit",
    "export",
    "format_of",
    "iso_utc",
    "page_json",
]

Format = Literal["warc", "jsonl"]
FORMATS: tuple[Format, ...] = ("warc", "jsonl")
# Where a directory export puts the pages whose bodies are not in the peers' files.
_BESIDE = "ubipy-export.warc.gz"


def format_of(out: Path | IO[bytes]) -> Format | None:
    """The format a path's name says (``.warc``, ``.jsonl``, ``.json``, each maybe
    ``.gz``), if any."""
    name = out.name.lower().removesuffix(".gz") if isinstance(out, Path) else ""
    if name.endswith(".warc"):
        return "warc"
    return "jsonl" if name.endswith((".jsonl", ".json")) else None


def refuse_misnamed(fmt: str, named: str | None) -> None:
    """ExportError if the output's name says another format (``named``) than ``fmt``:
    WARC went into a.jsonl without a word (QA)."""
    if named is not None and named != fmt:
        raise ExportError(
            f"--format {fmt}, but the output's name says {named}: name it for the format, "
            "or leave --format out"
        )


def export(
    data_dirs: Sequence[Path],
    fmt: Format | None,
    out: Path | IO[bytes],
    *,
    gzipped: bool | None = None,
) -> ExportSummary:
    """Write the pages of every shard in ``data_dirs`` to ``out``, each with the visits
    a continuous crawl made of it after its first fetch.

    ``fmt`` None: the one ``out``'s name says (:func:`format_of`).
    ``out`` is a path, or an open binary stream (the command line's standard output),
    which is written and flushed but not closed. ``gzipped`` asks for gzip (per record
    for WARC); ``None`` means gzip when ``out`` is a path ending in ``.gz``.

    A WARC export of shards whose bodies are in WARC files (``--bodies warc``) takes
    those files as they are (see :mod:`ubipy.store.warcexport`): into a directory
    ``out``, linked or copied one by one (the pages stored otherwise in
    ``ubipy-export.warc.gz`` beside them); into a file or a stream, one after the
    other, then the pages stored otherwise, written as before.

    Every shard is opened and checked before anything is written, and a shard named
    twice (``A``, ``A/``, a link to ``A``, its shard file) is read once. What a path
    names decides how it is written (see :func:`ubipy.store.outfile.write_path`): a new
    or regular file appears only once complete; a character device or a FIFO is written
    in place; a directory, a link to nothing or anything else is refused. Raises
    :class:`ExportError` with a one-line message, :class:`ExportWriteError` when the
    output fails part-way.
    """
    if fmt is None and (fmt := format_of(out)) is None:
        # As a user names the file, not a second time with --format (QA).
        raise ExportError("--format warc or jsonl is needed: the output's name says neither")
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
    with ExitStack() as stack:
        readers: list[ShardReader] = []
        inputs: set[tuple[int, int]] = set()
        for d in data_dirs:
            reader = ShardReader(d)
            stack.callback(reader.close)
            files = identities(reader.path)
            if files[0] in inputs:
                continue
            inputs.update(files)
            # Its lock and WAL files too, in the directory that holds the shard (and
            # the one a link to it is in), however it was named: `--data DIR/shard.sqlite3
            # --out DIR/lock` replaced a running peer's lock (a review found).
            for home in {reader.path.parent, Path(os.path.realpath(reader.path)).parent}:
                inputs.update(peer_files(home))
            # A copy of a peer's directory beside it (cp -r): its WARC files went out
            # twice, every record twice (QA).
            twin = next((r for r in readers if r.peer_id == reader.peer_id), None)
            if twin is not None and reader.peer_id is not None:
                raise ExportError(
                    f"{twin.path.parent} and {reader.path.parent} are the same peer "
                    f"({reader.peer_id}): a copy? give one of them"
                )
            readers.append(reader)
        if gzipped is None:
            gzipped = isinstance(out, Path) and out.name.lower().endswith(".gz")
        compress = gzipped
        filename = out.name if isinstance(out, Path) else ""
        peers = sorted({r.peer_id for r in readers if r.peer_id is not None})

        # The peers' own WARC files are inputs too, whatever the format: an --out
        # naming one must not replace the bodies of pages the shard keeps, nor its
        # index (`ubipy index` would then keep the replacement, newer than its WARC).
        # JSON Lines reads no body: WARC files moved away (archived) do not stop it (QA).
        parts = [p for r in readers for p in parts_of(r, missing_ok=fmt == "jsonl")]
        for part in parts:
            for path in (part.path, part.path.with_name(part.name), cdxj_of(part.path)):
                if (found := identity(path)) is not None:
                    inputs.add(found)
        if isinstance(out, Path):
            # A file's index not there yet (deleted, or the file still open) too, by
            # its path: written there, the export would be taken for it. And the open
            # file's final name: the peer's close would rename over the export.
            finals = [Path(os.path.realpath(p.path.parent), p.name) for p in parts]
            refuse_input(out, inputs, {*finals, *(cdxj_of(p) for p in finals)})
            refuse_misnamed(fmt, format_of(out))
            if out.is_dir() and not (fmt == "warc" and parts):
                # QA: "is a directory" alone, for peers whose bodies are in no WARC file.
                took = "JSON Lines go to one file" if fmt == "jsonl" else _NO_FILES
                raise ExportError(f"{out}: is a directory; {took}: name a file in it")
        strays = Strays(readers)
        if fmt == "warc" and parts:
            summary = _from_files(readers, strays, parts, out, filename, peers, compress, inputs)
            # Those in the peers' files are there; the others have nothing to go with.
            return _with_unjoined(summary, strays.unjoined_outside)

        def write(sink: IO[bytes]) -> ExportSummary:
            bodies = fmt == "warc"
            histories = strays.join(
                heapq.merge(
                    *(r.histories(bodies=bodies) for r in readers),
                    key=lambda h: h.page.fetched_at,
                ),
                bodies=bodies,
            )
            if fmt == "warc":
                return write_warc(histories, sink, filename, peers, len(readers), compress)
            histories = Refetched(readers).join(histories)
            if compress:
                with gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0) as gz:
                    return write_jsonl(histories, gz, len(readers))
            return write_jsonl(histories, sink, len(readers))

        if not isinstance(out, Path):
            try:
                summary = write(out)
                out.flush()
            except OSError as exc:
                raise ExportWriteError(f"standard output: cannot write: {why(exc)}") from exc
        else:
            summary = write_path(out, write, inputs)
        return _with_unjoined(summary, strays.unjoined)


# Why a directory takes no WARC export of shards whose peers wrote no WARC file.
_NO_FILES = (
    "a directory takes the peers' own WARC files (--bodies warc, the default), and "
    "these shards have none (--bodies shard, --no-bodies, or nothing fetched yet)"
)


def _with_unjoined(summary: ExportSummary, unjoined: int) -> ExportSummary:
    """The visits of pages no shard exported holds: read, and left out."""
    return dataclasses.replace(
        summary,
        visits=summary.visits + unjoined,
        visits_left_out=summary.visits_left_out + unjoined,
    )


def _from_files(
    readers: list[ShardReader],
    strays: Strays,
    parts: list[Part],
    out: Path | IO[bytes],
    filename: str,
    peers: list[str],
    compress: bool,
    inputs: set[tuple[int, int]],
) -> ExportSummary:
    """The WARC export of WARC-backed shards (see :func:`export`)."""
    counts = [r.warc_counts() for r in readers]
    # Visits of pages no shard here holds have nothing to be written with.
    others = sum(c[2] for c in counts) - strays.unjoined_outside

    def rest(sink: IO[bytes], filename: str = filename, compress: bool = compress) -> ExportSummary:
        """The pages (and visits) not in WARC files, written as before; counted only
        (nothing written) when none of them is an answer to write."""
        histories = strays.join(
            heapq.merge(
                *(r.histories(bodies=True, outside_warc=True) for r in readers),
                key=lambda h: h.page.fetched_at,
            ),
            bodies=True,
            outside_warc=True,
        )
        target = sink if others else io.BytesIO()
        summary = write_warc(histories, target, filename, peers, len(readers), compress)
        return summary if others else dataclasses.replace(summary, records=0)

    def whole(sink: IO[bytes]) -> ExportSummary:
        for part in parts:
            copy_part(part, sink, gunzip=not compress)
        return rest(sink)

    if isinstance(out, Path) and out.is_dir():

        def beside(sink: IO[bytes]) -> ExportSummary:
            # A file of the directory, beside the peers' .warc.gz: gzip, whatever the
            # directory's name, and named as it is in its warcinfo.
            return rest(sink, _BESIDE, True)

        # Nothing is left of an export that fails: the names it made go (a peer's
        # files linked before another's was found cut were left, a review found); the
        # files that were there before it stay as they were (an earlier export's copy
        # of an open file it extended is cut back).
        made: list[tuple[Path, Made]] = []
        try:
            for part in parts:
                if (mine := link_part(part, out)) is not None:
                    made.append((out / part.name, mine))
            legacy = write_path(out / _BESIDE, beside, inputs) if others else rest(io.BytesIO())
        except BaseException:
            for path, mine in reversed(made):
                unmake(path, mine)
            raise
    elif isinstance(out, Path):
        legacy = write_path(out, whole, inputs)
    else:
        try:
            legacy = whole(out)
            out.flush()
        except OSError as exc:
            raise ExportWriteError(f"standard output: cannot write: {why(exc)}") from exc
    first = sum(c[0] for c in counts)
    captures = sum(c[1] for c in counts)
    robots = sum(c[3] for c in counts)
    return dataclasses.replace(
        legacy,
        pages=legacy.pages + first,
        # Each capture is three records (request, response or revisit, metadata), a
        # robots.txt answer's too, and each file begins with its warcinfo.
        records=legacy.records + 3 * (captures + robots) + len(parts),
        visits=legacy.visits + captures - first,
        files=len(parts),
        sitemaps=legacy.sitemaps + sum(c[4] for c in counts),
    )
