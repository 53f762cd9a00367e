"""Pages written as WARC records as they are committed (``--bodies warc``, #20).

For each page a peer stores: a ``request`` (the header lines sent), a ``response``
(the status line and header lines received, and the decoded body) and a ``metadata``
record (as export writes it); for a continuous crawl's later visit, the same with the
new version's response when it changed, or a ``revisit`` (WARC 1.1's profiles, as
:mod:`ubipy.store.warc` writes them at export) referring to the response holding the
version it saw. The shard keeps each capture's file, offset and length (``warc``).

The records are buffered during the shard's transaction and written, flushed (synced
if the shard's ``synchronous`` is FULL or more) just before it commits, which moves
the file's mark (meta ``warc_end``). See :mod:`ubipy.store.warcfiles`.

Each capture's CDXJ line is made as its records are written and, once committed,
appended to a hidden file beside the open one (``.<name>.cdxj.part``): a closed
file's index is those lines sorted, not the file read back (tens of seconds of CPU
for 1 GB), unless recovery after a crash closed it (its lines may be missing).
"""

from __future__ import annotations

import contextlib
import enum
import http
import logging
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import NamedTuple

from ubipy import PROJECT_URL, __version__
from ubipy.errors import ExportWriteError, ShardError, StorageError
from ubipy.store.idn import unicode_url
from ubipy.store.revisits import Visit
from ubipy.store.schema import PEER_ID_META
from ubipy.store.warcfiles import OPEN_SUFFIX, WARC_DIR, WarcFiles
from ubipy.store.warcindex import cdxj_line, index_lines, index_warc, surt_key
from ubipy.store.warcrecords import (
    CONFORMS_TO,
    GZIP_LEVEL,
    LARGE_BODY,
    NOT_MODIFIED,
    SAME_PAYLOAD,
    HttpHead,
    field_value,
    fields_text,
    iso_utc,
    member,
    member_pieces,
    metadata_block,
    read_record,
    record_id,
    record_ids,
    record_pieces,
    request_block,
    response_head,
    sha1_digest,
    warc_record,
)
from ubipy.store.warcscan import Capture as Indexed
from ubipy.store.warcscan import bare_media_type, header_text

__all__ = [
    "END_META",
    "Capture",
    "CaptureKind",
    "WarcStore",
    "index_closed",
    "named_peer",
    "read_payload",
]

log = logging.getLogger(__name__)

#: Where the open file is committed to: ``<name> <end>`` in the shard's meta table.
END_META = "warc_end"
_HTTP_RESPONSE = "application/http; msgtype=response"
_HTTP_REQUEST = "application/http; msgtype=request"
# The committed CDXJ lines of the open file, beside it: ``.<name>`` and this.
_LINES_SUFFIX = ".cdxj.part"


class CaptureKind(enum.IntEnum):
    RESPONSE = 0
    REVISIT = 1
    # A later visit's answer that was not the page (a 404, a 410, a 503, a redirect):
    # its own response, which no revisit refers to.
    OTHER = 2
    # A host's robots.txt as answered (any status): no page of the crawl, no revisit's.
    ROBOTS = 3


class Capture(NamedTuple):
    """What a capture's records are, for the ``warc`` table. This and :class:`_Page`
    are named tuples: one of each is made for every page, and a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__``, twice as slow."""

    fp: int
    at: float
    kind: CaptureKind
    file: str
    offset: int  # of the response (or revisit) record's gzip member
    length: int  # of that member
    end: int  # where the capture's last record (its metadata) ends
    record_id: str
    payload_digest: str | None


class _Page(NamedTuple):
    """What a page's records say of it (a first fetch, or a later visit)."""

    fp: int
    url: str
    at: float
    depth: int | None
    head: HttpHead
    changed: bool | None = None  # None: the first fetch
    truncated: bool = False
    title: str | None = None
    encoding: str | None = None
    encoding_source: str | None = None
    date: str = ""  # ``at`` as WARC-Date, made once for the capture's records
    uri: str = ""  # ``url`` as WARC-Target-URI


def _common(page: _Page, rid: str) -> str:
    """The header lines every record of a capture has after its WARC-Type."""
    return f"WARC-Record-ID: {rid}\r\nWARC-Date: {page.date}\r\nWARC-Target-URI: {page.uri}\r\n"


def reconstructed(
    status: int,
    content_type: str | None,
    etag: str | None,
    last_modified: str | None,
    location: str | None = None,
) -> HttpHead:
    """A head made from what a record kept, for a page given without the head it came
    with (pages stored by hand, in tests and tools): as an export reconstructs one."""
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    kept = {
        b"Content-Type": content_type,
        b"Last-Modified": last_modified,
        b"ETag": etag,
        b"Location": location,
    }
    headers = tuple((k, field_value(v).encode()) for k, v in kept.items() if v)
    return HttpHead(status, reason, "HTTP/1.1", headers)


def read_payload(data_dir: Path, file: str, offset: int, length: int) -> bytes:
    """The payload of the response record at ``offset`` of a file (closed or open)."""
    directory = data_dir / WARC_DIR
    for path in (directory / file, directory / (file + OPEN_SUFFIX)):
        try:
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read(length)
            break
        except FileNotFoundError:
            continue
    else:
        raise ShardError(f"{directory / file}: no such WARC file")
    record, _ = read_record(data)
    return record.http_payload()


def named_peer(conn: sqlite3.Connection) -> str | None:
    """The id of the peer the shard is, if a peer gave it one: its WARC files are named
    ``ubipy-<id>-...``, ``ubipy-local-...`` until then."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (PEER_ID_META,)).fetchone()
    return None if row is None else str(row[0])


class WarcStore:
    """Writes the records of the pages and visits of one transaction (see the module)."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        data_dir: Path,
        *,
        max_size: int,
        max_age: float = math.inf,
        level: int = GZIP_LEVEL,
        shard_synced: Callable[[], None] = lambda: None,
    ) -> None:
        """``shard_synced``: the shard's sync (:meth:`ubipy.store.Shard.sync`)."""
        self._conn = conn
        self._level = level
        self.data_dir = data_dir
        # FULL (2) or EXTRA (3): the shard syncs each commit, so the WARC file does too.
        fsync = int(conn.execute("PRAGMA synchronous").fetchone()[0]) >= 2
        self.files = WarcFiles(
            data_dir / WARC_DIR,
            max_size=max_size,
            max_age=max_age,
            fsync=fsync,
            prefix=lambda: f"ubipy-{self._peer()}",
            warcinfo=self._warcinfo,
            on_closed=self.index_later,
            shard_synced=shard_synced,
        )
        self._indexing: list[threading.Thread] = []
        self._info_id = ""
        self._captures: list[Capture] = []
        # This transaction's CDXJ lines, and where the committed ones go (None: no
        # file of lines, or one that failed: the file is read back when closed).
        self._lines: list[bytes] = []
        self._lines_of: str | None = None
        self._lines_whole = True
        for stale in self.files.directory.glob(f".*{_LINES_SUFFIX}"):
            stale.unlink()  # a crash's: its file is read back (recovery)
        # Responses written in this transaction, by page: what its revisits refer to.
        self._held: dict[int, Capture] = {}
        self._peer_id: str | None = None

    def _peer(self) -> str:
        # A peer's id, once given, is its own for good: asked of the shard until then.
        if self._peer_id is None:
            if (named := named_peer(self._conn)) is None:
                return "local"
            self._peer_id = named
        return self._peer_id

    def _warcinfo(self, name: str) -> bytes:
        self._info_id = record_id()
        info = (
            f"software: ubipy/{__version__} (+{PROJECT_URL})\r\n"
            "format: WARC File Format 1.1\r\n"
            f"conformsTo: {CONFORMS_TO}\r\n"
            f"ubipy-peer: {self._peer()}\r\n"
            "description: Pages as a ubipy peer fetched them: request and response "
            "headers as sent and received, bodies decoded (the headers of the encoded "
            "message renamed X-Crawler-*).\r\n"
        ).encode()
        fields = fields_text(
            [
                ("WARC-Type", "warcinfo"),
                ("WARC-Record-ID", self._info_id),
                ("WARC-Date", iso_utc(time.time())),
                ("WARC-Filename", name),
            ]
        )
        return member(warc_record(fields, "application/warc-fields", info))

    # -- what a commit writes --------------------------------------------------
    def page(
        self,
        fp: int,
        url: str,
        at: float,
        depth: int,
        head: HttpHead,
        body: bytes,
        *,
        truncated: bool,
        title: str | None,
        encoding: str | None,
        encoding_source: str | None,
    ) -> None:
        """A first fetch: its request, response and metadata records."""
        page = _Page(
            fp, url, at, depth, head, None, truncated, title, encoding, encoding_source,
            iso_utc(at), field_value(url),
        )  # fmt: skip
        self._response(page, body)

    def robots(
        self, fp: int, url: str, at: float, head: HttpHead, body: bytes, *, truncated: bool
    ) -> None:
        """A robots.txt answer: its request, response and metadata records, as a first
        fetch has (no depth, no title), for replay and for what the rules were when."""
        page = _Page(
            fp, url, at, None, head, None, truncated, date=iso_utc(at), uri=field_value(url)
        )
        self._response(page, body, CaptureKind.ROBOTS)

    def visit(self, visit: Visit, url: str, depth: int | None, head: HttpHead) -> bool:
        """A later visit: a response when it changed, or when the answer was not the page
        (a 404, a redirect: one no revisit refers to); a revisit when the server said
        (or showed) the version held is current, unless no response here holds it and
        the visit has its body (then a response); False when there is nothing to
        write (no body kept, or no response here for a revisit to refer to)."""
        page = _Page(
            visit.fp, url, visit.at, depth, head, visit.changed, visit.truncated,
            date=iso_utc(visit.at), uri=field_value(url),
        )  # fmt: skip
        if visit.changed or visit.status not in (200, 304):
            if visit.body is None and visit.length:
                return False  # its body was not kept (--no-bodies)
            kind = CaptureKind.RESPONSE if visit.changed else CaptureKind.OTHER
            self._response(page, visit.body or b"", kind)
            return True
        held = self._held.get(visit.fp) or self._latest(visit.fp)
        if visit.body is not None and (
            held is None or held.payload_digest != sha1_digest(visit.body)
        ):
            # Unchanged, but no response here holds its version (a page handed over by
            # another peer, or handed back after it changed there): this one does.
            self._response(page, visit.body)
            return True
        if held is None:
            return False
        self._revisit(page, held)
        return True

    def _latest(self, fp: int) -> Capture | None:
        row = self._conn.execute(
            "SELECT at, file, offset, length, end, record_id, payload_digest FROM warc "
            "WHERE fp = ? AND kind = ? ORDER BY at DESC LIMIT 1",
            (fp, CaptureKind.RESPONSE),
        ).fetchone()
        if row is None:
            return None
        at, file, offset, length, end, rid, digest = row
        return Capture(fp, at, CaptureKind.RESPONSE, file, offset, length, end, rid, digest)

    def _response(self, page: _Page, body: bytes, kind: CaptureKind = CaptureKind.RESPONSE) -> None:
        rid, *others = record_ids(3)
        digest = sha1_digest(body)
        truncated = "WARC-Truncated: length\r\n" if page.truncated else ""
        info = self._info()
        fields = f"WARC-Type: response\r\n{_common(page, rid)}{info}{truncated}"
        head = response_head(page.head, len(body))
        if len(body) < LARGE_BODY:
            block = head + body
            record = warc_record(fields, _HTTP_RESPONSE, block, payload_digest=digest)
            capture: bytes | list[bytes] = member(record, self._level)
        else:
            # Not copied into a block, a record and a member, each whole at once.
            pieces = record_pieces(fields, _HTTP_RESPONSE, (head, body), payload_digest=digest)
            capture = member_pieces(pieces, self._level)
        done = self._linked(page, rid, others, capture, kind, digest, info)
        if kind is CaptureKind.RESPONSE:  # the version a revisit refers to
            self._held[page.fp] = done

    def _revisit(self, page: _Page, held: Capture) -> None:
        rid, *others = record_ids(3)
        not_modified = page.head.status == 304
        refers = fields_text(
            [
                ("WARC-Profile", NOT_MODIFIED if not_modified else SAME_PAYLOAD),
                ("WARC-Refers-To", held.record_id),
                ("WARC-Refers-To-Target-URI", page.uri),
                ("WARC-Refers-To-Date", iso_utc(held.at)),
            ]
        )
        # A 304 has no payload to digest (the spec advises none for its profile); an
        # identical payload's digest is the referred record's.
        digest = None if not_modified else held.payload_digest
        info = self._info()
        record = warc_record(
            f"WARC-Type: revisit\r\n{_common(page, rid)}{info}{refers}",
            _HTTP_RESPONSE,
            response_head(page.head, None),
            payload_digest=digest,
        )
        capture = member(record, self._level)
        self._linked(page, rid, others, capture, CaptureKind.REVISIT, digest, info)

    def _info(self) -> str:
        """The field naming the warcinfo of the file the next records go in. That file
        is begun first: its warcinfo is the one named (the first capture of a file
        named none, or the last file's; QA: responses and revisits named none)."""
        self.files.ensure_open()
        return f"WARC-Warcinfo-ID: {self._info_id}\r\n"

    def _linked(
        self,
        page: _Page,
        rid: str,
        ids: list[str],
        capture: bytes | list[bytes],
        kind: CaptureKind,
        digest: str | None,
        info: str,
    ) -> Capture:
        """``capture`` (the record ``rid``) written between its request and its metadata
        record (``ids``: theirs); ``info``: the field naming its file's warcinfo, which
        ``capture`` holds too (:meth:`_info`)."""
        request_id, metadata_id = ids
        request = warc_record(
            f"WARC-Type: request\r\n{_common(page, request_id)}{info}WARC-Concurrent-To: {rid}\r\n",
            _HTTP_REQUEST,
            request_block(page.url, page.head),
        )
        meta = metadata_block(
            self._peer(),
            page.url,
            unicode_url(page.url),
            page.at,
            page.depth,
            changed=page.changed,
            truncated=page.truncated,
            title=page.title,
            encoding=page.encoding,
            encoding_source=page.encoding_source,
        )
        metadata = warc_record(
            f"WARC-Type: metadata\r\n{_common(page, metadata_id)}{info}WARC-Refers-To: {rid}\r\n",
            "application/warc-fields",
            meta,
        )
        files = self.files
        files.append(member(request, self._level))
        name, offset = files.append(capture)
        length = files.end - offset
        files.append(member(metadata, self._level))
        done = Capture(page.fp, page.at, kind, name, offset, length, files.end, rid, digest)
        self._captures.append(done)
        self._index(page, kind, name, offset, length, digest)
        return done

    def _index(
        self, page: _Page, kind: CaptureKind, name: str, offset: int, length: int,
        digest: str | None,
    ) -> None:  # fmt: skip
        """The capture's CDXJ line, as reading the record back would make it."""
        key = surt_key(page.url)
        if key is None:
            return
        mime = next(
            (header_text(v).strip() for k, v in page.head.headers
             if k.lower() == b"content-type"),
            None,
        )  # fmt: skip
        indexed = Indexed(
            url=page.url,
            fetch_time=datetime.fromtimestamp(page.at, UTC),
            record_type="revisit" if kind is CaptureKind.REVISIT else "response",
            content_type=bare_media_type(mime),
            mime_detected=None,
            status=page.head.status,
            digest=digest.removeprefix("sha1:") if digest else None,
            json_metadata=None,
            offset=offset,
            length=length,
        )
        # The 14 digits of WARC-Date's ``2025-01-02T03:04:05.678901Z``: no strftime.
        d = page.date
        stamp = f"{d[:4]}{d[5:7]}{d[8:10]}{d[11:13]}{d[14:16]}{d[17:19]}"
        self._lines.append(cdxj_line(indexed, key, name, stamp))

    # -- the shard's transaction ----------------------------------------------
    def before_commit(self) -> None:
        """Within the transaction, before COMMIT: the captures' rows and the file's new
        mark go in, and the records are written (and flushed) to the file."""
        if not self._captures:
            return
        self._conn.executemany(
            "INSERT OR REPLACE INTO warc (fp, at, kind, file, offset, length, end, "
            "record_id, payload_digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (c.fp, c.at, int(c.kind), c.file, c.offset, c.length, c.end, c.record_id,
                 c.payload_digest)
                for c in self._captures
            ],
        )  # fmt: skip
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (END_META, f"{self.files.name} {self.files.end}"),
        )
        self.files.flush()

    def committed(self) -> None:
        had = bool(self._captures)
        self._captures, self._held = [], {}
        lines, self._lines = self._lines, []
        if had:
            self._keep_lines(lines)
            self.files.committed()

    def rolled_back(self) -> None:
        self._captures, self._held, self._lines = [], {}, []
        self.files.rollback()

    def _keep_lines(self, lines: list[bytes]) -> None:
        name = self.files.name
        if name is None:
            return
        if self._lines_of != name:
            self._lines_of, self._lines_whole = name, True
        if not self._lines_whole:
            return
        # Opened for each commit, not held: a peer that dies leaves no descriptor.
        try:
            with open(self._lines_path(name), "ab") as f:
                f.writelines(lines)
        except OSError as exc:
            log.warning("warc: %s will be read back to be indexed: %s", name, exc)
            self._lines_whole = False

    def _end_lines(self, name: str) -> Path | None:
        """The lines of the file ``name`` (closed now), if they are whole."""
        if self._lines_of != name:
            return None
        self._lines_of = None
        path = self._lines_path(name)
        if self._lines_whole:
            return path
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)  # a part only: the file is read back
        return None

    def _lines_path(self, name: str) -> Path:
        return self.files.directory / f".{name}{_LINES_SUFFIX}"

    def index_later(self, *paths: Path) -> None:
        """Write the CDXJ index of files closed for good, each in a thread of its own
        (from the lines kept as it was written; a file closed by recovery is read back,
        tens of seconds for 1 GB), while the crawl goes on."""
        self._indexing = [t for t in self._indexing if t.is_alive()]
        for path in paths:
            lines = self._end_lines(path.name)
            thread = threading.Thread(
                target=index_closed, args=(path, lines), name=f"index {path.name}"
            )
            thread.daemon = True  # a killed peer's file is indexed again by `ubipy index`
            thread.start()
            self._indexing.append(thread)

    def wait_indexed(self) -> None:
        """Wait for the indexes being written (of the files closed so far)."""
        for thread in self._indexing:
            thread.join()

    def sync(self) -> None:
        """Put the open file's committed records on disk (see :meth:`WarcFiles.sync`)."""
        self.files.sync()

    def close(self) -> None:
        """Close the open file and wait for the indexes being written. Every file
        closed, the mark goes: only a crash leaves one, and the next start forgets the
        captures of a file it names that is missing (an OS crash lost it). Kept after a
        clean stop, a warc directory on a disk not mounted, or a file moved away, had
        the shard forget their pages (QA: 136 of 137, to be fetched again)."""
        try:
            if self.files.close():
                self._conn.execute("DELETE FROM meta WHERE key = ?", (END_META,))
        except sqlite3.Error as exc:
            log.warning("warc: cannot clear the mark of the open file: %s", exc)
        except OSError as exc:
            raise StorageError(f"{self.files.directory}: cannot close: {exc}") from exc
        finally:
            self.wait_indexed()


def index_closed(path: Path, lines: Path | None = None) -> None:
    """Write a closed file's CDXJ index beside it (ubipy.store.warcindex), from its
    ``lines`` if given (then removed), else by reading it back; a failure is logged,
    not raised."""
    try:
        if lines is None:
            index_warc(path)
            return
        try:
            with lines.open("rb") as f:
                index_lines(path, f)
        finally:
            lines.unlink(missing_ok=True)
    except (OSError, ExportWriteError) as exc:  # a full disk: a line, not a traceback (QA)
        log.error("warc: indexing %s failed: %s; indexed again at the next start", path, exc)
    except Exception:
        # The file is whole all the same; `ubipy index` makes its index again.
        log.exception("warc: indexing %s failed", path)
