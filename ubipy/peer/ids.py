"""A peer's own id, kept in its shard; and the ids it numbers its requests with (URL
batches, hand-offs, replica rounds, address leases): each run starts at a random point
of a 62-bit space.

Numbered from 1 at every start, a run's request could be answered by an answer to
the previous run's request of the same number: an owner holds its acknowledgements
up to a linger (5 s at most) before sending them, so a peer restarted within that
time (a crash loop, a service manager's quick restart) had a new batch acknowledged
by an old answer, and its outbox rows dropped unsent.
"""

from __future__ import annotations

import itertools
import logging
import random
import re
from collections.abc import Iterator
from pathlib import Path

from ubipy.errors import ShardError
from ubipy.store import LOCK_FILE, PEER_ID_META, SHARD_FILE, SHARD_FILES, WARC_DIR, DataLock, Shard
from ubipy.store_config import BodyStore, StoreConfig

__all__ = ["load_peer_id", "open_data", "run_ids"]

log = logging.getLogger(__name__)

# What a data directory holds of a peer's own (its shard's files begin with its name).
_OURS = (SHARD_FILE, LOCK_FILE, WARC_DIR)
_PEER_ID = re.compile("[0-9a-f]{16}")


def open_data(
    data_dir: Path, store: StoreConfig, address: str, rng: random.Random
) -> tuple[DataLock, Shard, str, bool]:
    """What a peer starts from: its data directory held (made if need be; ``address``
    is what the next to try is told), its shard open, its id, and whether the shard is
    new. One that fails leaves no directory it made."""
    # An empty file is one SQLite makes a new database of (QA: greeted as "its data").
    path = data_dir / SHARD_FILE
    new = not path.exists() or (path.is_file() and path.stat().st_size == 0)
    if new:
        _refuse_a_peers_warc(data_dir)
    lock = DataLock.take(data_dir, address)
    shard: Shard | None = None
    try:
        warc = store.bodies is BodyStore.WARC
        shard = Shard.open(
            data_dir,
            warc_size=store.warc_size if warc else None,
            warc_level=store.warc_level,
            warc_max_age=store.warc_max_age,
        )
        return lock, shard, load_peer_id(shard, rng), new
    except BaseException:
        if shard is not None:
            shard.close()  # the id could not be kept: its files go, closed first
        lock.release(unmake=SHARD_FILES)
        raise


def _refuse_a_peers_warc(data_dir: Path) -> None:
    """A new peer's directory may not be, or lie in, another peer's WARC directory,
    which that peer keeps (its files closed, renamed, indexed and removed there): only
    warned of as a directory holding others' files, the new peer wrote its shard
    among them (QA)."""
    where = data_dir.resolve()
    for directory in (where, *where.parents):
        if directory.name == WARC_DIR and (directory.parent / SHARD_FILE).is_file():
            raise ShardError(
                f"{data_dir}: in the WARC directory of the peer in {directory.parent}: "
                "give --data a directory of its own"
            )


def load_peer_id(shard: Shard, rng: random.Random) -> str:
    """The peer's id: made once, kept in its shard, so a restart keeps its place. A new
    one is said with its directory's whole path, and a directory that holds files of
    another's (a --data mistyped, or run from another working directory: a new peer,
    said nowhere, QA) is warned of."""
    peer_id = shard.get_meta(PEER_ID_META)
    if peer_id is not None and _PEER_ID.fullmatch(peer_id) is None:
        # Edited by hand: an empty one died in a traceback, a newline or a terminal's
        # escape was printed as it was (QA).
        raise ShardError(
            f"{shard.path}: its peer id {peer_id[:40]!r} is not one ubipy made (16 hex digits)"
        )
    if peer_id is None:
        peer_id = f"{rng.getrandbits(64):016x}"
        with shard.transaction():
            shard.set_meta(PEER_ID_META, peer_id)
        where = shard.path.parent.resolve()
        log.info("a new peer, %s: its data in %s", peer_id, where)
        others = sorted(p.name for p in where.iterdir() if not p.name.startswith(_OURS))
        if others:
            log.warning(
                "%s holds files that are not this peer's (%s): its own are written among "
                "them; give --data a directory of its own",
                where,
                ", ".join(others[:3]) + (", ..." if len(others) > 3 else ""),
            )
    return peer_id


def run_ids(rng: random.Random | None = None) -> Iterator[int]:
    """Ids from a random start in [1, 2**62): a wire id is below 2**63."""
    return itertools.count((rng or random.SystemRandom()).randrange(1, 2**62))
