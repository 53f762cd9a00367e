"""The captures of WARC files as one Parquet file with Common Crawl's columnar-index
columns, for DuckDB, Spark (cc-pyspark) or pandas (docs/storage.md, "Index").

pyarrow writes it; it is an optional extra (``pip install 'ubipy[parquet]'``): a
crawl needs none of it. Rows are written in row groups of bounded size, so memory
stays flat however many files are read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from ubipy.errors import ExportError
from ubipy.store.warcindex import peer_of, surt_key
from ubipy.store.warcscan import ScanCounts, scan_file

__all__ = ["COLUMNS", "ParquetCounts", "require_pyarrow", "write_parquet"]

# Common Crawl's names; content_digest is theirs too, warc_record_type and peer are
# ubipy's (a continuous crawl's revisits are rows, and each peer writes its own files).
COLUMNS = (
    "url_surtkey",
    "url",
    "url_host_name",
    "fetch_time",
    "fetch_status",
    "content_mime_type",
    "content_digest",
    "warc_filename",
    "warc_record_offset",
    "warc_record_length",
    "warc_record_type",
    "peer",
)
_ROW_GROUP = 65_536
INSTALL_HINT = "pip install 'ubipy[parquet]' (or pip install pyarrow)"


@dataclass(slots=True)
class ParquetCounts:
    """What went into the Parquet file, and what a scan could not read."""

    rows: int = 0
    unkeyed: int = 0
    scans: dict[Path, ScanCounts] = field(default_factory=dict)


def require_pyarrow() -> Any:
    """The pyarrow.parquet module, or ExportError telling how to install it."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError(f"--format parquet needs pyarrow: {INSTALL_HINT}") from None
    return pq


def _schema() -> Any:
    import pyarrow as pa

    return pa.schema(
        [
            ("url_surtkey", pa.string()),
            ("url", pa.string()),
            ("url_host_name", pa.string()),
            ("fetch_time", pa.timestamp("us", tz="UTC")),
            ("fetch_status", pa.int16()),
            ("content_mime_type", pa.string()),
            ("content_digest", pa.string()),
            ("warc_filename", pa.string()),
            # 64-bit (Common Crawl's are 32): --warc-size may pass 2 GiB.
            ("warc_record_offset", pa.int64()),
            ("warc_record_length", pa.int64()),
            ("warc_record_type", pa.string()),
            ("peer", pa.string()),
        ]
    )


def _host(url: str) -> str | None:
    try:
        return urlsplit(url).hostname
    except ValueError:
        return None


def write_parquet(files: Iterable[Path], out: IO[bytes]) -> ParquetCounts:
    """One row per capture of each WARC file in ``files`` (by its name and where it
    lies, as the CDXJ lists them), written to ``out`` as Parquet."""
    pq = require_pyarrow()
    import pyarrow as pa

    schema = _schema()
    counts = ParquetCounts()
    columns: dict[str, list[Any]] = {name: [] for name in COLUMNS}

    def flush(writer: Any) -> None:
        if columns["url"]:
            writer.write_table(pa.Table.from_pydict(columns, schema=schema))
            for values in columns.values():
                values.clear()

    writer = pq.ParquetWriter(out, schema, compression="zstd")
    try:
        for path in files:
            scanned = counts.scans[path] = ScanCounts()
            peer: str | None = None
            for capture in scan_file(path, scanned):
                key = surt_key(capture.url)
                if key is None:
                    counts.unkeyed += 1
                    continue
                if peer is None:  # the warcinfo came first
                    peer = peer_of(path, scanned.warcinfo)
                row = (
                    key,
                    capture.url,
                    _host(capture.url),
                    capture.fetch_time,
                    capture.status,
                    capture.content_type,
                    capture.digest,
                    path.name,
                    capture.offset,
                    capture.length,
                    capture.record_type,
                    peer,
                )
                for name, value in zip(COLUMNS, row, strict=True):
                    columns[name].append(value)
                counts.rows += 1
                if len(columns["url"]) >= _ROW_GROUP:
                    flush(writer)
        flush(writer)
    finally:
        writer.close()
    return counts
