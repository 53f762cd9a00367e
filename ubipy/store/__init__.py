"""Everything on disk: the peer's SQLite shard (pages, frontier, seen URLs, outbox,
marks), admission through the recent-URL cache and the Bloom filter, and export
to WARC or JSON Lines.
"""

from ubipy.errors import ExportError, ExportWriteError, ShardError, StorageError
from ubipy.store.admission import Admission
from ubipy.store.export import export
from ubipy.store.shard import FrontierRow, HostMark, NewURL, PageRecord, Shard

__all__ = [
    "Admission",
    "ExportError",
    "ExportWriteError",
    "FrontierRow",
    "HostMark",
    "NewURL",
    "PageRecord",
    "Shard",
    "ShardError",
    "StorageError",
    "export",
]
