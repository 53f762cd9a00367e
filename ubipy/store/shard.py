"""The peer's SQLite shard: the frontier (every URL admitted), the outbox, replicas
and hosts' marks; its pages and their bodies are :mod:`ubipy.store.pages`.

One file per data directory, in WAL mode. Writes are grouped into explicit
transactions by the caller (``with shard.transaction():``) so a page row, its
frontier "done" mark and the links it revealed land together or not at all.
Calls block briefly; the peer calls them from its trio thread in batches.
"""

from __future__ import annotations

import logging
import math
import os
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ubipy.errors import ShardError, StorageError
from ubipy.store.givenup import GivenUpMixin
from ubipy.store.outbox import OutboxMixin
from ubipy.store.owed import OwedMixin
from ubipy.store.pages import FrontierState as FrontierState
from ubipy.store.pages import Lastmod as Lastmod
from ubipy.store.pages import PageRecord as PageRecord
from ubipy.store.pages import PagesMixin
from ubipy.store.replicas import ReplicaMixin
from ubipy.store.robotskept import RobotsKeptMixin
from ubipy.store.rows import FrontierRow as FrontierRow
from ubipy.store.rows import HostMark as HostMark
from ubipy.store.rows import NewURL as NewURL
from ubipy.store.schema import RANK_INDEX, create, migrate, unsupported
from ubipy.store.schema import SCHEMA_VERSION as SCHEMA_VERSION
from ubipy.store.schema import SHARD_FILE as SHARD_FILE
from ubipy.store.seedlookups import SeedLookupsMixin
from ubipy.store.walsync import sync_wal
from ubipy.store.warcfiles import WARC_DIR
from ubipy.store.warcindex import has_current_index
from ubipy.store.warcrecords import GZIP_LEVEL
from ubipy.store.warcrecovery import own_files, recover_warc
from ubipy.store.warcstore import WarcStore, index_closed

log = logging.getLogger(__name__)

# SQLite's page cache for the shard, in KiB (its default is 2 MiB).
_CACHE_KIB = 32 * 1024
# The page size of a new shard, in bytes (SQLite's default is 4096).
_PAGE_SIZE = 16384
_CHECKPOINT_PAGES = 4096

# The hosts the frontier holds rows for, without a scan of it: a skip scan of each of
# its partial indexes by host (pending rows, the others), a seek a host, and the hosts
# with a politeness mark. Rows of no host ('') are left out.
_HELD_HOSTS = """
WITH RECURSIVE
    pending(host) AS (
        SELECT (SELECT host FROM frontier WHERE state = 0 AND host > '' ORDER BY host LIMIT 1)
        UNION ALL
        SELECT (
            SELECT host FROM frontier WHERE state = 0 AND host > pending.host
            ORDER BY host LIMIT 1
        ) FROM pending WHERE pending.host IS NOT NULL
    ),
    closed(host) AS (
        SELECT (SELECT host FROM frontier WHERE state != 0 AND host > '' ORDER BY host LIMIT 1)
        UNION ALL
        SELECT (
            SELECT host FROM frontier WHERE state != 0 AND host > closed.host
            ORDER BY host LIMIT 1
        ) FROM closed WHERE closed.host IS NOT NULL
    )
SELECT host FROM pending WHERE host IS NOT NULL
UNION SELECT host FROM closed WHERE host IS NOT NULL
UNION SELECT host FROM hosts
"""


class _Refused(StorageError):
    """SQLite refused a transaction of the shard (disk full, read-only file)."""


@dataclass(frozen=True, slots=True)
class ShardCounts:
    seen: int
    pending: int
    done: int
    skipped: int
    pages: int


class Shard(
    PagesMixin,
    GivenUpMixin,
    SeedLookupsMixin,
    OutboxMixin,
    ReplicaMixin,
    RobotsKeptMixin,
    OwedMixin,
):
    """One SQLite file holding everything a peer has admitted and fetched."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._in_txn = False
        self._synced_dir = False
        row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM frontier").fetchone()
        self._next_seq = int(row[0]) + 1

    @classmethod
    def open(
        cls,
        data_dir: Path,
        *,
        warc_size: int | None = None,
        warc_level: int = GZIP_LEVEL,
        warc_max_age: float = math.inf,
    ) -> Shard:
        """Open (or create, or migrate) the shard of ``data_dir``. With ``warc_size``,
        bodies go to WARC files in ``data_dir/warc`` rotated at that many bytes or that
        many seconds open, their records compressed at ``warc_level``; else into the
        shard. Either way WARC files a crash left open are recovered first."""
        data_dir.mkdir(parents=True, exist_ok=True)
        path = data_dir / SHARD_FILE
        conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            if _foreign(conn):
                # Another program's database under our file's name: its tables were
                # added to ours and it was made a WAL file without a word (QA); one
                # with a version number of its own would have been "migrated".
                conn.close()
                raise ShardError(f"{path}: not a ubipy shard (tables of another program's)")
            # For a new file only (an existing one keeps its own): new URLs land all
            # over the frontier's fingerprint index, and with larger pages a commit
            # writes fewer of them and checkpoints come less often (bench/admission.py).
            conn.execute(f"PRAGMA page_size={_PAGE_SIZE}")
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a committed transaction survives a process kill;
            # only an OS crash can lose the last commits.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA foreign_keys=OFF")
            # The frontier's fingerprint index takes new URLs at pages all over it:
            # SQLite's default 2 MiB of cache made each insert read its page again
            # (bench/admission.py: a quarter more new links a CPU-second).
            conn.execute(f"PRAGMA cache_size=-{_CACHE_KIB}")
            # A checkpoint every 4,096 pages of WAL (64 MiB), not SQLite's 1,000: the
            # pages that every commit writes again (the indexes' busy ones) are copied
            # into the file a quarter as often. A crawl of 80,000 pages (bench/speed.py
            # --hosts 400 --pages 200) spent 3.9 s of its 34.5 in COMMIT against 5.7,
            # its longest 102 ms against 69 (a commit that checkpoints holds the loop).
            conn.execute(f"PRAGMA wal_autocheckpoint={_CHECKPOINT_PAGES}")
            version = _user_version(conn)
            if version == 0:
                create(conn)
            elif version != SCHEMA_VERSION:
                if not 0 < version < SCHEMA_VERSION:
                    conn.close()
                    raise ShardError(unsupported(path, version))
                migrate(conn, version)
            recovered = recover_warc(conn, data_dir, lambda: sync_wal(path, directory=True))
            # Its first read of the frontier: a damaged page (schema intact) shows here.
            shard = cls(conn, path)
        except sqlite3.DatabaseError as exc:
            if conn is not None:
                conn.close()
            raise ShardError(f"{path}: cannot open shard: {exc}") from exc
        except ShardError:
            if conn is not None:
                conn.close()
            raise
        except OSError as exc:
            if conn is not None:
                conn.close()
            raise ShardError(f"{data_dir / WARC_DIR}: cannot recover: {exc}") from exc
        if warc_size is not None and not _directory_or_none(data_dir / WARC_DIR):
            shard.close()
            # Found at the first write, it was retried every 5 s for ever (QA).
            raise ShardError(f"{data_dir / WARC_DIR}: not a directory (WARC files go there)")
        if warc_size is not None:
            shard._warc = WarcStore(
                conn,
                data_dir,
                max_size=warc_size,
                max_age=warc_max_age,
                level=warc_level,
                shard_synced=shard.sync,
            )
        # The files a crash left open, now closed, and any closed file of its own
        # without its index (a kill -9 before its thread wrote it): indexed as any
        # closed file. Not another's (QA: a file put there got a .cdxj beside it).
        closed = list(recovered.closed) if recovered is not None else []
        if (directory := data_dir / WARC_DIR).is_dir():
            own = own_files(conn)
            closed += [
                p
                for p in sorted(directory.glob(f"{own}*.warc.gz"))
                if p not in closed and p.is_file() and not has_current_index(p)
            ]
        if closed and shard._warc is not None:
            shard._warc.index_later(*closed)
        else:
            for path in closed:
                index_closed(path)
        return shard

    def close(self) -> None:
        """Close the shard (and the open WARC file, which gets its final name)."""
        try:
            if self._warc is not None:
                self._warc.close()
        finally:
            self._conn.close()

    # -- meta ---------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @property
    def changes(self) -> int:
        """Rows written since the shard was opened, committed or not: what a sync
        that began when this read the same has put on disk (no transaction spans an
        await, so none is open when a sync begins)."""
        return self._conn.total_changes

    def set_meta(self, key: str, value: str) -> None:
        self._conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def sync(self) -> None:
        """Put what the shard has committed on disk, through a machine's crash or power
        loss: its WAL file synced (and, the first time, the directory holding it).

        A commit alone survives the process's kill, not the machine's: the shard runs
        with ``synchronous=NORMAL``, so the WAL is synced only at checkpoints. That is
        enough for this peer's own work (lost, it is done again), not for what it tells
        another peer it holds: that peer then lets its own copy go. A checkpoint syncs
        what it moves into the database file, so the WAL is all there is to sync. Safe
        in another thread: it does not use the SQLite connection. Raises StorageError
        when the disk refuses.

        The open WARC file is synced first: a host handed off takes its pages done to
        its new owner, and a machine's crash here must not lose their records from the
        archive after that owner holds them done (the WAL's rows point into it too)."""
        if self._warc is not None:
            self._warc.sync()
        # The WAL's directory entry, once it is there.
        if sync_wal(self.path, directory=not self._synced_dir):
            self._synced_dir = True

    # -- transactions -------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Writes inside land together or not at all; nested ones join the outer one.

        Raises StorageError when SQLite refuses them (disk full, read-only file),
        everything rolled back: SQLite's own errors do not leave the store.
        """
        if self._in_txn:
            yield
            return
        seq_before = self._next_seq
        try:
            self._conn.execute("BEGIN IMMEDIATE")
            self._in_txn = True
            try:
                yield
                # The WARC records go to their file first: a commit never points past it.
                self._before_commit()
                self._conn.execute("COMMIT")
            except BaseException:
                # Some errors (SQLITE_FULL among them) have already rolled back.
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                self._next_seq = seq_before
                self._rolled_back()
                raise
            self._after_commit()
        except sqlite3.Error as exc:
            raise _Refused(f"{self.path}: {exc}{_damage(exc)}") from exc
        finally:
            self._in_txn = False

    # -- the frontier ---------------------------------------------------------
    def seen_many(self, fps: Sequence[int]) -> set[int]:
        """Which of these fingerprints are already admitted (exact answer)."""
        found: set[int] = set()
        # Chunks stay under SQLite's host-parameter limit.
        for i in range(0, len(fps), 500):
            chunk = fps[i : i + 500]
            marks = ",".join("?" * len(chunk))
            for (fp,) in self._conn.execute(
                f"SELECT fp FROM frontier WHERE fp IN ({marks})", tuple(chunk)
            ):
                found.add(int(fp))
        return found

    def add_to_frontier(self, urls: Sequence[NewURL]) -> list[FrontierRow]:
        """Insert new URLs into the frontier; returns their rows."""
        rows: list[FrontierRow] = []
        for u in urls:
            rows.append(FrontierRow(u.fp, self._next_seq, u.url, u.host, u.depth, u.score))
            self._next_seq += 1
        with self.transaction():
            self._conn.executemany(
                "INSERT OR IGNORE INTO frontier (fp, seq, url, host, depth, score) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(r.fp, r.seq, r.url, r.host, r.depth, r.score) for r in rows],
            )
        return rows

    def credit(self, items: Iterable[tuple[int, float]]) -> None:
        """Add to the score of URLs still pending (a link found again brings its cash)."""
        with self.transaction():
            self._conn.executemany(
                "UPDATE frontier SET score = score + ? WHERE fp = ? AND state = 0",
                [(amount, fp) for fp, amount in items],
            )

    def rescore(self, scores: Mapping[int, float]) -> None:
        """Set the score of URLs still pending (PageRank recomputed)."""
        with self.transaction():
            self._conn.executemany(
                "UPDATE frontier SET score = ? WHERE fp = ? AND state = 0",
                [(score, fp) for fp, score in scores.items()],
            )

    def rank_pending(self) -> None:
        """Keep an index of pending URLs by score, for :meth:`best_for_host`."""
        with self.transaction():
            self._conn.execute(RANK_INDEX)

    def best_for_host(
        self, host: str, limit: int, after: tuple[float, int] | None = None
    ) -> list[FrontierRow]:
        """A host's pending URLs, highest score first (oldest first among equals);
        ``after``: those that come after this (score, seq) in that order."""
        columns = "SELECT fp, seq, url, host, depth, score FROM frontier WHERE host = ? "
        if after is None:
            rows = self._conn.execute(
                columns + "AND state = 0 ORDER BY score DESC, seq LIMIT ?", (host, limit)
            ).fetchall()
        else:
            # Two ranges of the index, not one OR (which SQLite read from the host's
            # best on: a page past n rows cost n).
            score, seq = after
            rows = self._conn.execute(
                columns + "AND state = 0 AND score = ? AND seq > ? ORDER BY seq LIMIT ?",
                (host, score, seq, limit),
            ).fetchall()
            if len(rows) < limit:
                rows += self._conn.execute(
                    columns + "AND state = 0 AND score < ? ORDER BY score DESC, seq LIMIT ?",
                    (host, score, limit - len(rows)),
                ).fetchall()
        return [
            FrontierRow(int(a), int(b), str(c), str(d), int(e), float(f))
            for a, b, c, d, e, f in rows
        ]

    def pending_hosts(self) -> list[tuple[str, int]]:
        """Every host with pending frontier entries and how many it has."""
        cur = self._conn.execute(
            "SELECT host, COUNT(*) FROM frontier WHERE state = 0 GROUP BY host"
        )
        return [(str(h), int(n)) for h, n in cur]

    def pending_for_host(self, host: str, after_seq: int, limit: int) -> list[FrontierRow]:
        cur = self._conn.execute(
            "SELECT fp, seq, url, host, depth FROM frontier "
            "WHERE host = ? AND state = 0 AND seq > ? ORDER BY seq LIMIT ?",
            (host, after_seq, limit),
        )
        return [FrontierRow(int(a), int(b), str(c), str(d), int(e)) for a, b, c, d, e in cur]

    def iter_seen(self, chunk: int = 65_536) -> Iterator[int]:
        cur = self._conn.execute("SELECT fp FROM frontier ORDER BY fp LIMIT ?", (chunk,))
        while fps := [int(r[0]) for r in cur]:
            yield from fps
            cur = self._conn.execute(
                "SELECT fp FROM frontier WHERE fp > ? ORDER BY fp LIMIT ?", (fps[-1], chunk)
            )

    def mark_skipped(self, items: Iterable[tuple[int, str]]) -> None:
        """Close frontier entries that will never be fetched, saying why."""
        with self.transaction():
            self._conn.executemany(
                "UPDATE frontier SET state = ?, reason = ? WHERE fp = ?",
                [(FrontierState.SKIPPED, reason, fp) for fp, reason in items],
            )

    def depth_zero_hosts(self) -> list[str]:
        """The hosts of URLs admitted at depth 0: seeds, but also the URLs their pages
        redirected to. Only for a shard kept before the seeds' hosts were (its one
        scan of the frontier, at the first start after)."""
        cur = self._conn.execute("SELECT DISTINCT host FROM frontier WHERE depth = 0")
        return [str(r[0]) for r in cur if r[0]]

    def skip_host(self, host: str, reason: str) -> int:
        with self.transaction():
            cur = self._conn.execute(
                "UPDATE frontier SET state = ?, reason = ? WHERE host = ? AND state = 0",
                (FrontierState.SKIPPED, reason, host),
            )
        return cur.rowcount

    def reopen_host(self, host: str, reasons: Collection[str]) -> int:
        """The host's rows closed for one of ``reasons`` are pending again (a host given
        up, tried again); returns how many."""
        marks = ",".join("?" * len(reasons))
        # "state != 0": through the index of the host's closed rows, not a scan.
        with self.transaction():
            cur = self._conn.execute(
                "UPDATE frontier SET state = 0, reason = NULL "
                f"WHERE host = ? AND state != 0 AND state = ? AND reason IN ({marks})",
                (host, FrontierState.SKIPPED, *reasons),
            )
            self._forget_given_up(host)
        return cur.rowcount

    def closed_for(
        self, reasons: Collection[str], chunk: int = 10_000
    ) -> Iterator[list[tuple[int, str, int]]]:
        """The rows closed unfetched for one of ``reasons``, (fp, url, depth), a chunk
        at a time (a scan of the closed rows: for a rare question)."""
        marks = ",".join("?" * len(reasons))
        query = (
            "SELECT fp, url, depth FROM frontier WHERE state != 0 AND state = ? "
            f"AND reason IN ({marks}) AND fp > ? ORDER BY fp LIMIT ?"
        )
        after = -(2**63)
        while rows := self._conn.execute(
            query, (FrontierState.SKIPPED, *reasons, after, chunk)
        ).fetchall():
            yield [(int(fp), str(url), int(depth)) for fp, url, depth in rows]
            after = rows[-1][0]

    def reopen(self, fps: Iterable[int]) -> None:
        """Rows closed unfetched are pending again."""
        with self.transaction():
            self._conn.executemany(
                "UPDATE frontier SET state = 0, reason = NULL WHERE fp = ? AND state = ?",
                [(fp, FrontierState.SKIPPED) for fp in fps],
            )

    # -- hand-off -----------------------------------------------------------
    def held_hosts(self) -> list[str]:
        """Every host this shard holds anything for: frontier rows or a politeness mark.
        (Rows of no host are fingerprints an early version's hand-off left: no host's.)"""
        cur = self._conn.execute(_HELD_HOSTS)
        return [str(h) for (h,) in cur]

    def host_state(
        self, host: str, pending_if: Collection[str] = ()
    ) -> tuple[list[NewURL], list[int], HostMark | None]:
        """What a host's new owner needs: pending URLs (and those closed for one of the
        reasons ``pending_if``), fetched fingerprints, its mark."""
        pending: list[NewURL] = []
        done: list[int] = []
        # Its pending rows through frontier_pending, the others through frontier_done;
        # one statement, so one read of the shard (in admission order, as they were).
        cur = self._conn.execute(
            "SELECT fp, url, depth, state, score, seq, NULL FROM frontier "
            "WHERE host = ? AND state = 0 UNION ALL "
            "SELECT fp, url, depth, state, score, seq, reason FROM frontier "
            "WHERE host = ? AND state != 0 ORDER BY seq",
            (host, host),
        )
        for fp, url, depth, state, score, _, reason in cur:
            if state == FrontierState.PENDING or (
                state == FrontierState.SKIPPED and reason in pending_if and url
            ):
                pending.append(NewURL(int(fp), str(url), host, int(depth), float(score)))
            else:
                done.append(int(fp))
        return pending, done, self.host_mark(host)

    def drop_host(self, host: str) -> list[int]:
        """Forget a host handed to its new owner; returns the fingerprints dropped.

        Its fingerprints are forgotten: if the host ever comes back, what its owner
        sends then must not be mistaken for something already known here.
        """
        with self.transaction():
            # Each half through its partial index (a plain "host = ?" scans the frontier).
            fps = [
                int(fp)
                for fp, _ in self._conn.execute(
                    "SELECT fp, seq FROM frontier WHERE host = ? AND state = 0 UNION ALL "
                    "SELECT fp, seq FROM frontier WHERE host = ? AND state != 0 ORDER BY seq",
                    (host, host),
                )
            ]
            self._conn.execute("DELETE FROM frontier WHERE host = ? AND state = 0", (host,))
            self._conn.execute("DELETE FROM frontier WHERE host = ? AND state != 0", (host,))
            self._conn.execute("DELETE FROM hosts WHERE host = ?", (host,))
            self._forget_given_up(host)
            self._forget_robots(host)
            # By its pages' fingerprints (the key): "host = ?" scanned the table, a row
            # a page fetched under --recrawl.
            self._conn.executemany(
                "DELETE FROM refresh WHERE fp = ? AND host = ?", [(fp, host) for fp in fps]
            )
        return fps

    def take_done(self, host: str, fps: Sequence[int]) -> int:
        """Fingerprints another peer fetched for ``host``: seen here, and done if pending.

        Each also gets a done frontier row (with no URL) for the host, so that the
        host's history goes with it when it is handed on again.
        """
        with self.transaction():
            cur = self._conn.executemany(
                "UPDATE frontier SET state = ?, reason = 'fetched elsewhere' "
                "WHERE fp = ? AND state = 0",
                [(FrontierState.DONE, fp) for fp in fps],
            )
            marked = cur.rowcount
            rows = []
            for fp in fps:
                rows.append((fp, self._next_seq, host, FrontierState.DONE))
                self._next_seq += 1
            self._conn.executemany(
                "INSERT OR IGNORE INTO frontier (fp, seq, url, host, depth, state, reason) "
                "VALUES (?, ?, '', ?, 0, ?, 'fetched elsewhere')",
                rows,
            )
        return marked

    def pending_count(self, host: str) -> int:
        row = self._conn.execute(
            "SELECT COUNT(*) FROM frontier WHERE host = ? AND state = 0", (host,)
        ).fetchone()
        return int(row[0])

    def holds_nothing(self) -> bool:
        """Whether no URL was ever admitted, waits to be handed on, was given up or is
        kept for another peer. False where it cannot be read: kept, as if it held some."""
        try:
            return not any(
                self._conn.execute(f"SELECT EXISTS (SELECT 1 FROM {table})").fetchone()[0]
                for table in ("frontier", "outbox", "given_up", "replica")
            )
        except sqlite3.Error:
            return False

    def counts(self) -> ShardCounts:
        by_state = dict(
            self._conn.execute("SELECT state, COUNT(*) FROM frontier GROUP BY state").fetchall()
        )
        seen = sum(by_state.values())
        pages = self._conn.execute("SELECT COUNT(*) FROM pages").fetchone()[0]
        return ShardCounts(
            seen=int(seen),
            pending=int(by_state.get(FrontierState.PENDING, 0)),
            done=int(by_state.get(FrontierState.DONE, 0)),
            skipped=int(by_state.get(FrontierState.SKIPPED, 0)),
            pages=int(pages),
        )


def _damage(exc: sqlite3.Error) -> str:
    """What a damaged file's refusal adds to the message: retried every few seconds as
    a full disk is, it never succeeds, and said nothing of it (QA)."""
    if getattr(exc, "sqlite_errorname", "") in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
        return " (the shard is damaged: no write succeeds again; see docs/storage.md)"
    return ""


def _directory_or_none(path: Path) -> bool:
    return path.is_dir() or not os.path.lexists(path)


def _foreign(conn: sqlite3.Connection) -> bool:
    """Whether the database has tables but not ours (every version has ``meta``)."""
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    return bool(names) and "meta" not in names


def _user_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])
