"""Everything on disk: the peer's SQLite shard (pages, frontier, seen URLs, outbox,
marks), admission through the recent-URL cache and the Bloom filter, export
to WARC or JSON Lines, the indexes of the WARC files (CDXJ, Parquet), and the lock
that keeps a data directory to one peer.
"""

from ubipy.errors import DataDirInUse, ExportError, ExportWriteError, ShardError, StorageError
from ubipy.store.admission import Admission
from ubipy.store.export import ExportSummary, export, format_of
from ubipy.store.givenup import GivenUp
from ubipy.store.indexcommand import IndexSummary, describe_index, index_data, index_format
from ubipy.store.lock import LOCK_FILE, DataLock
from ubipy.store.outbox import CHUNK as OUTBOX_CHUNK
from ubipy.store.revisits import RefreshRow, Visit
from ubipy.store.robotskept import RobotsAnswer, RobotsKept
from ubipy.store.schema import PEER_ID_META, SHARD_FILE, SHARD_FILES
from ubipy.store.shard import FrontierRow, HostMark, Lastmod, NewURL, PageRecord, Shard
from ubipy.store.warcfiles import WARC_DIR
from ubipy.store.warcindex import index_warc
from ubipy.store.warcrecords import HttpHead
from ubipy.store.warcrecords import member as gzip_member

__all__ = [
    "LOCK_FILE",
    "OUTBOX_CHUNK",
    "PEER_ID_META",
    "SHARD_FILE",
    "SHARD_FILES",
    "WARC_DIR",
    "Admission",
    "DataDirInUse",
    "DataLock",
    "ExportError",
    "ExportSummary",
    "ExportWriteError",
    "FrontierRow",
    "GivenUp",
    "HostMark",
    "HttpHead",
    "IndexSummary",
    "Lastmod",
    "NewURL",
    "PageRecord",
    "RefreshRow",
    "RobotsAnswer",
    "RobotsKept",
    "Shard",
    "ShardError",
    "StorageError",
    "Visit",
    "describe_index",
    "export",
    "format_of",
    "gzip_member",
    "index_data",
    "index_format",
    "index_warc",
]
