"""Export the pages of one or many shards to WARC or JSON Lines.

Each shard is opened read-only (SQLite URI ``mode=ro``) inside one read transaction,
so a live peer's shard can be exported while the peer writes: the export sees one
consistent snapshot and never blocks or changes the peer. (The shard file is never
written; as for any reader of a WAL-mode database, SQLite may create its empty ``-wal``
and ``-shm`` beside it; and while the read lasts, the peer's checkpoints cannot pass
it, so its WAL may grow until the export ends.) Pages are streamed, ordered by fetch
time across all shards (a k-way merge), with one body in memory per shard.

What a WARC holds, and what it cannot
-------------------------------------
A shard keeps a page's status, bare media type, ``Last-Modified``, ``ETag`` and its
body, decoded (no ``Content-Encoding``, no chunking): it does not keep the request
or the response headers. So the HTTP parts of the WARC records are *reconstructed*:

* the response record's block is ``HTTP/1.1 <status> <reason>`` and a minimal header
  block built from what is stored (``Content-Type``, ``Content-Length`` of the stored
  body, ``Last-Modified``, ``ETag``), followed by the stored body. The charset the
  server declared, a redirect's ``Location`` and every other header are not there;
* the request record is ``GET <path> HTTP/1.1`` with a ``Host`` header only.

The warcinfo record says so. A truncated body (cut at ``--max-body``) gets
``WARC-Truncated: length``. Only real HTTP responses go into a WARC: a page with no
status (the request failed), one whose processing failed, or one whose body was not
kept (``--no-bodies``) is left out and counted; JSON Lines has every page.
"""

from __future__ import annotations

import errno
import gzip
import heapq
import http
import io
import json
import os
import secrets
import sqlite3
import stat
import zlib
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal, Protocol
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser
from warcio.warcwriter import WARCWriter

from ubipy import PROJECT_URL, __version__
from ubipy.errors import ExportError, ExportWriteError
from ubipy.store.idn import unicode_url
from ubipy.store.shard import SCHEMA_VERSION, SHARD_FILE

Format = Literal["warc", "jsonl"]
FORMATS: tuple[Format, ...] = ("warc", "jsonl")

# The peer keeps its id under this key of the shard's meta table (see ubipy.peer.peer).
PEER_ID_META = "peer_id"

_COLUMNS = (
    "fp, url, status, content_type, length, truncated, title, fetched_at, "
    "last_modified, etag, depth, error, encoding, encoding_source"
)
# Version 1 shards have no encoding columns: NULL (read-only, so never migrated).
_COLUMNS_V1 = _COLUMNS.replace("encoding, encoding_source", "NULL, NULL")


@dataclass(frozen=True, slots=True)
class StoredPage:
    """One row of a shard's ``pages`` table, with its body when asked for."""

    peer: str | None
    url: str
    status: int | None
    content_type: str | None
    length: int
    truncated: bool
    title: str | None
    fetched_at: float
    last_modified: str | None
    etag: str | None
    depth: int
    error: str | None
    body: bytes | None  # None: not loaded, or not kept in the shard
    # The encoding an HTML page was read in and what decided it (None: not parsed).
    encoding: str | None = None
    encoding_source: str | None = None

    @property
    def is_response(self) -> bool:
        """A real HTTP response: a status, and nothing went wrong after it."""
        return self.status is not None and self.error is None


@dataclass(frozen=True, slots=True)
class ExportSummary:
    shards: int
    pages: int  # pages read from the shards
    records: int  # WARC records (warcinfo included) or JSON lines written
    left_out: int  # pages not in a WARC: errors, or a body the shard did not keep


class ShardReader:
    """A shard opened read-only, for export; it never writes, so it is safe on a live peer."""

    def __init__(self, data_dir: Path) -> None:
        if not data_dir.exists():
            raise ExportError(f"{data_dir}: no such directory")
        # The data directory, or the shard file itself.
        path = data_dir / SHARD_FILE if data_dir.is_dir() else data_dir
        if not path.is_file():
            raise ExportError(f"{data_dir}: not a ubipy data directory (no {SHARD_FILE})")
        self.path = path
        try:
            conn = sqlite3.connect(
                path.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise ExportError(f"{path}: cannot open shard: {exc}") from exc
        # A title or URL that is not valid UTF-8 is replaced, not fatal.
        conn.text_factory = lambda b: b.decode("utf-8", "replace")
        self._conn = conn
        try:
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version == 0:
                raise ExportError(f"{path}: not a ubipy shard (no schema version)")
            if not 1 <= version <= SCHEMA_VERSION:
                raise ExportError(
                    f"{path}: shard schema version {version} is not supported by this "
                    f"ubipy (expects {SCHEMA_VERSION})"
                )
            self._columns = _COLUMNS if version >= 2 else _COLUMNS_V1
            # One snapshot for the whole export, whatever the peer commits meanwhile.
            conn.execute("BEGIN")
            conn.execute(f"SELECT {self._columns} FROM pages LIMIT 0")
            conn.execute("SELECT fp, codec, body FROM bodies LIMIT 0")
            row = conn.execute("SELECT value FROM meta WHERE key = ?", (PEER_ID_META,)).fetchone()
        except ExportError:
            conn.close()
            raise
        except sqlite3.Error as exc:
            conn.close()
            raise ExportError(f"{path}: not a readable ubipy shard: {exc}") from exc
        self.peer_id: str | None = None if row is None else str(row[0])

    def close(self) -> None:
        self._conn.close()

    def pages(self, *, bodies: bool) -> Iterator[StoredPage]:
        """Every stored page in fetch order; with ``bodies``, each with its body."""
        try:
            cur = self._conn.execute(f"SELECT {self._columns} FROM pages ORDER BY fetched_at, fp")
            for (
                fp, url, status, ctype, length, trunc, title, at, lm, etag, depth, error,
                encoding, source,
            ) in cur:  # fmt: skip
                yield StoredPage(
                    peer=self.peer_id,
                    url=str(url),
                    status=None if status is None else int(status),
                    content_type=ctype,
                    length=int(length),
                    truncated=bool(trunc),
                    title=title,
                    fetched_at=float(at),
                    last_modified=lm,
                    etag=etag,
                    depth=int(depth),
                    error=error,
                    body=self._body(int(fp)) if bodies else None,
                    encoding=encoding,
                    encoding_source=source,
                )
        except sqlite3.Error as exc:
            raise ExportError(f"{self.path}: reading pages failed: {exc}") from exc

    def _body(self, fp: int) -> bytes | None:
        row = self._conn.execute("SELECT codec, body FROM bodies WHERE fp = ?", (fp,)).fetchone()
        if row is None:
            return None
        codec, blob = row
        if codec != "zlib":
            raise ExportError(f"{self.path}: unknown body codec {codec!r}")
        try:
            return zlib.decompress(blob)
        except zlib.error as exc:
            raise ExportError(f"{self.path}: a stored body is corrupt: {exc}") from exc


def export(
    data_dirs: Sequence[Path],
    fmt: Format,
    out: Path | IO[bytes],
    *,
    gzipped: bool | None = None,
) -> ExportSummary:
    """Write the pages of every shard in ``data_dirs`` to ``out``.

    ``out`` is a path, or an open binary stream (the command line's standard output),
    which is written and flushed but not closed. ``gzipped`` asks for gzip (per record
    for WARC); ``None`` means gzip when ``out`` is a path ending in ``.gz``.

    Every shard is opened and checked before anything is written, and a shard named
    twice (``A``, ``A/``, a link to ``A``, its shard file) is read once. What a path
    names decides how it is written (see :func:`_write_path`): a new or regular file
    appears only once complete; a character device or a FIFO is written in place; a
    directory, a link to nothing or anything else is refused. Raises
    :class:`ExportError` with a one-line message, :class:`ExportWriteError` when the
    output fails part-way.
    """
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r} (expected one of {', '.join(FORMATS)})")
    with ExitStack() as stack:
        readers: list[ShardReader] = []
        inputs: set[tuple[int, int]] = set()
        for d in data_dirs:
            reader = ShardReader(d)
            stack.callback(reader.close)
            files = _identities(reader.path)
            if files[0] in inputs:
                continue
            inputs.update(files)
            readers.append(reader)
        if gzipped is None:
            gzipped = isinstance(out, Path) and out.name.endswith(".gz")
        compress = gzipped
        filename = out.name if isinstance(out, Path) else ""
        peers = sorted({r.peer_id for r in readers if r.peer_id is not None})

        def write(sink: IO[bytes]) -> ExportSummary:
            pages = heapq.merge(
                *(r.pages(bodies=fmt == "warc") for r in readers),
                key=lambda p: p.fetched_at,
            )
            if fmt == "warc":
                return _write_warc(pages, sink, filename, peers, len(readers), compress)
            if compress:
                with gzip.GzipFile(filename="", mode="wb", fileobj=sink, mtime=0) as gz:
                    return _write_jsonl(pages, gz, len(readers))
            return _write_jsonl(pages, sink, len(readers))

        if not isinstance(out, Path):
            try:
                summary = write(out)
                out.flush()
            except OSError as exc:
                raise ExportWriteError(f"standard output: cannot write: {_why(exc)}") from exc
            return summary
        return _write_path(out, write, inputs)


def _identities(shard: Path) -> list[tuple[int, int]]:
    """The (device, inode) of a shard file and of its WAL files that exist, the shard first."""
    found = []
    for suffix in ("", "-wal", "-shm"):
        try:
            st = os.stat(f"{shard}{suffix}")
        except OSError:
            continue
        found.append((st.st_dev, st.st_ino))
    return found


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _write_path(
    out: Path, write: Callable[[IO[bytes]], ExportSummary], inputs: set[tuple[int, int]]
) -> ExportSummary:
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
            raise ExportError(f"{out}: cannot write: {_why(exc)}") from exc
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
        raise ExportError(f"{out}: cannot write: {_why(exc)}") from exc
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise ExportError(f"{out}: is a directory")
        if (st.st_dev, st.st_ino) in inputs:
            raise ExportError(f"{out}: is one of the shards being exported")
        if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
            # Neither created nor truncated: a device or a FIFO is written as it is.
            try:
                fd = os.open(out, os.O_WRONLY | os.O_NOCTTY)
            except OSError as exc:
                raise ExportError(f"{out}: cannot write: {_why(exc)}") from exc
            return _write_in_place(out, fd, write, inputs)
        if not stat.S_ISREG(st.st_mode):
            raise ExportError(
                f"{out}: not a regular file, a character device or a FIFO; not writing to it"
            )
    # Through a link, the file it points to is the one replaced; the link stays.
    target = Path(os.path.realpath(out)) if st is not None else out
    fd, part = _create_part(out, target)
    try:
        with open(fd, "wb") as f:
            if st is not None:
                os.fchmod(f.fileno(), stat.S_IMODE(st.st_mode) & 0o777)
            summary = write(f)
            f.flush()
            os.fsync(f.fileno())  # a disk that fills late fails here, not after the rename
        _install(out, part, target)
    except OSError as exc:
        part.unlink(missing_ok=True)
        raise ExportWriteError(f"{out}: cannot write: {_why(exc)}") from exc
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return summary


def _create_part(out: Path, target: Path) -> tuple[int, Path]:
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
            raise ExportError(f"{out}: cannot write: {_why(exc)}") from exc
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
    write: Callable[[IO[bytes]], ExportSummary],
    inputs: set[tuple[int, int]],
) -> ExportSummary:
    """Write to ``fd``, open on ``out``, and close it; only a device, a FIFO or (through
    a descriptor the shell opened) a regular file is written, never a shard."""
    st = os.fstat(fd)
    why = None
    if (st.st_dev, st.st_ino) in inputs:
        why = "is one of the shards being exported"
    elif not (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode) or stat.S_ISREG(st.st_mode)):
        why = "not a regular file, a character device or a FIFO; not writing to it"
    elif stat.S_ISREG(st.st_mode) and _named_descriptor(out) is None:
        why = "changed while being opened; left as it is"
    if why is not None:
        os.close(fd)
        raise ExportError(f"{out}: {why}")
    try:
        with open(fd, "wb") as f:
            summary = write(f)
            f.flush()
    except OSError as exc:
        raise ExportWriteError(f"{out}: cannot write: {_why(exc)}") from exc
    return summary


# -- JSON Lines ---------------------------------------------------------------------


def iso_utc(t: float) -> str:
    """A Unix time as ISO 8601 in UTC, to the microsecond: ``2025-01-02T03:04:05.678901Z``."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def page_json(page: StoredPage) -> dict[str, Any]:
    return {
        "url": page.url,
        "url_unicode": unicode_url(page.url),
        "status": page.status,
        "title": page.title,
        "content_type": page.content_type,
        "length": page.length,
        "truncated": page.truncated,
        "fetched_at": iso_utc(page.fetched_at),
        "depth": page.depth,
        "peer": page.peer,
        "error": page.error,
        "encoding": page.encoding,
        "encoding_source": page.encoding_source,
    }


class _Sink(Protocol):
    def write(self, data: bytes, /) -> object: ...


def _write_jsonl(pages: Iterator[StoredPage], out: _Sink, shards: int) -> ExportSummary:
    n = 0
    for page in pages:
        line = json.dumps(page_json(page), ensure_ascii=False, separators=(",", ":"))
        out.write(line.encode("utf-8") + b"\n")
        n += 1
    return ExportSummary(shards=shards, pages=n, records=n, left_out=0)


# -- WARC ---------------------------------------------------------------------------

WARC_VERSION = "1.1"
_CONFORMS_TO = "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/"


def _field(value: str) -> str:
    """A header value on one line: control characters (CR, LF among them) become spaces."""
    return "".join(c if c.isprintable() else " " for c in value).strip()


def _one_line(text: str) -> str:
    """A title as a warc-fields value: every run of white space becomes one space."""
    return " ".join(_field(text).split())


def _response_headers(page: StoredPage, body: bytes) -> StatusAndHeaders:
    assert page.status is not None
    try:
        reason = http.HTTPStatus(page.status).phrase
    except ValueError:
        reason = ""
    headers: list[tuple[str, str]] = []
    if page.content_type:
        headers.append(("Content-Type", _field(page.content_type)))
    headers.append(("Content-Length", str(len(body))))
    if page.last_modified:
        headers.append(("Last-Modified", _field(page.last_modified)))
    if page.etag:
        headers.append(("ETag", _field(page.etag)))
    # The space after the code stays when there is no reason phrase (RFC 9112, 4).
    return StatusAndHeaders(f"{page.status} {reason}", headers, protocol="HTTP/1.1")


def _request_headers(url: str) -> StatusAndHeaders:
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    host = parts.netloc.rpartition("@")[2]
    return StatusAndHeaders(
        f"GET {target} HTTP/1.1", [("Host", host)], protocol="", is_http_request=True
    )


def _metadata(page: StoredPage) -> bytes:
    fields = [
        ("peer-id", page.peer or ""),
        ("fetched-at", iso_utc(page.fetched_at)),
        ("depth", str(page.depth)),
        ("truncated", "true" if page.truncated else "false"),
    ]
    if page.title is not None:
        fields.append(("title", _one_line(page.title)))
    shown = unicode_url(page.url)
    more = {"encoding": page.encoding, "encoding-source": page.encoding_source}
    more["url-unicode"] = shown if shown != page.url else None
    fields.extend((k, _field(v)) for k, v in more.items() if v is not None)
    return "".join(f"{k}: {v}\r\n" for k, v in fields).encode("utf-8")


def _write_warc(
    pages: Iterator[StoredPage],
    out: IO[bytes],
    filename: str,
    peers: list[str],
    shards: int,
    gzipped: bool,
) -> ExportSummary:
    writer = WARCWriter(out, gzip=gzipped, warc_version=WARC_VERSION)
    info = writer.create_warcinfo_record(
        filename,
        {
            "software": f"ubipy/{__version__} (+{PROJECT_URL})",
            "format": "WARC File Format 1.1",
            "conformsTo": _CONFORMS_TO,
            "ubipy-peers": " ".join(peers),
            "description": "Pages exported from ubipy shards. The shard keeps a page's "
            "status, media type, Last-Modified, ETag and decoded body, not its headers: "
            "the HTTP status lines and headers here are reconstructed from those fields, "
            "and each request record holds only the method, target and Host.",
        },
    )
    info_id = info.rec_headers.get_header("WARC-Record-ID")
    writer.write_record(info)
    records = 1
    n = left_out = 0
    for page in pages:
        n += 1
        body = page.body
        if body is None and page.length == 0:
            body = b""  # an empty body leaves no row in ``bodies``
        if not page.is_response or body is None:
            left_out += 1
            continue
        for record in _page_records(writer, page, body, info_id):
            writer.write_record(record)
            records += 1
    return ExportSummary(shards=shards, pages=n, records=records, left_out=left_out)


def _page_records(writer: WARCWriter, page: StoredPage, body: bytes, info_id: str) -> list[Any]:
    """The request, response and metadata records of one page, linked to each other."""
    response_id = StatusAndHeadersParser.make_warc_id()
    common = {"WARC-Date": iso_utc(page.fetched_at), "WARC-Warcinfo-ID": info_id}
    response_warc: dict[str, str] = {**common, "WARC-Record-ID": response_id}
    if page.truncated:
        response_warc["WARC-Truncated"] = "length"
    response = writer.create_warc_record(
        page.url,
        "response",
        payload=io.BytesIO(body),
        length=len(body),
        http_headers=_response_headers(page, body),
        warc_headers_dict=response_warc,
    )
    request = writer.create_warc_record(
        page.url,
        "request",
        http_headers=_request_headers(page.url),
        warc_headers_dict={**common, "WARC-Concurrent-To": response_id},
    )
    meta = _metadata(page)
    metadata = writer.create_warc_record(
        page.url,
        "metadata",
        payload=io.BytesIO(meta),
        length=len(meta),
        warc_content_type="application/warc-fields",
        warc_headers_dict={**common, "WARC-Refers-To": response_id},
    )
    return [request, response, metadata]
