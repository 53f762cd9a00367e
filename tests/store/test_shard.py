"""The shard keeps what it is given, in one transaction, across reopenings."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.store.old_shards import downgrade
from ubipy.errors import ShardError, StorageError
from ubipy.store.admission import Admission
from ubipy.store.bloom import GrowingBloom
from ubipy.store.revisits import Visit
from ubipy.store.shard import SCHEMA_VERSION, SHARD_FILE, NewURL, PageRecord, Shard


def _url(i: int, host: str = "a.test") -> NewURL:
    return NewURL(fp=1000 + i, url=f"http://{host}/{i}", host=host, depth=1)


def _page(fp: int, url: str, body: bytes | None = b"<html>hi</html>") -> PageRecord:
    return PageRecord(
        fp=fp,
        url=url,
        host="a.test",
        status=200,
        content_type="text/html",
        length=len(body or b""),
        truncated=False,
        title="hi",
        fetched_at=1.0,
        last_modified=None,
        etag='"x"',
        digest="d",
        depth=1,
        error=None,
        body=body,
    )


def test_frontier_rows_survive_reopen_in_admission_order(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    shard.add_to_frontier([_url(i) for i in range(5)])
    shard.close()
    shard = Shard.open(tmp_path)
    rows = shard.pending_for_host("a.test", 0, 3)
    assert [r.url for r in rows] == [f"http://a.test/{i}" for i in range(3)]
    rest = shard.pending_for_host("a.test", rows[-1].seq, 10)
    assert [r.url for r in rest] == ["http://a.test/3", "http://a.test/4"]
    # New rows continue the sequence rather than reusing numbers.
    more = shard.add_to_frontier([_url(9)])
    assert more[0].seq > rest[-1].seq
    assert shard.pending_hosts() == [("a.test", 6)]


def test_recording_a_page_marks_its_frontier_entry_done(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    [row] = shard.add_to_frontier([_url(1)])
    shard.record_pages([_page(row.fp, row.url)])
    assert shard.pending_for_host("a.test", 0, 10) == []
    counts = shard.counts()
    assert (counts.seen, counts.done, counts.pages, counts.pending) == (1, 1, 1, 0)
    assert shard.page_body(row.fp) == b"<html>hi</html>"
    [stored] = list(shard.iter_pages())
    assert stored["etag"] == '"x"' and stored["title"] == "hi"


def test_a_failed_transaction_leaves_nothing_behind(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    [row] = shard.add_to_frontier([_url(1)])
    with pytest.raises(RuntimeError), shard.transaction():
        shard.add_to_frontier([_url(2)])
        shard.record_pages([_page(row.fp, row.url)])
        raise RuntimeError("disk on fire")
    counts = shard.counts()
    assert (counts.seen, counts.pending, counts.pages) == (1, 1, 0)


def test_a_refused_write_is_a_storage_error_and_the_next_one_lands(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    [first] = shard.add_to_frontier([_url(1)])
    # The shard's own connection refusing writes, as a read-only file would.
    shard._conn.execute("PRAGMA query_only = ON")
    with pytest.raises(StorageError, match="readonly") as caught, shard.transaction():
        shard.add_to_frontier([_url(2)])
        shard.record_pages([_page(first.fp, first.url)])
    assert str(tmp_path) in str(caught.value)
    shard._conn.execute("PRAGMA query_only = OFF")
    [second] = shard.add_to_frontier([_url(2)])
    counts = shard.counts()
    assert (counts.seen, counts.pending, counts.pages) == (2, 2, 0)
    # The refused rows gave their sequence numbers back: the frontier order has no hole.
    assert second.seq == first.seq + 1


def test_skipping_a_host_closes_its_pending_entries(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    shard.add_to_frontier([_url(1), _url(2), _url(3, "b.test")])
    assert shard.skip_host("a.test", "robots.txt unreachable") == 2
    assert shard.pending_hosts() == [("b.test", 1)]


def test_a_shard_from_another_schema_version_is_refused(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / SHARD_FILE)
    conn.execute("PRAGMA user_version=99")
    conn.close()
    # One a later ubipy wrote says so, and what to do (QA: "not supported", no more).
    with pytest.raises(ShardError, match="version 99 was written by a later ubipy") as got:
        Shard.open(tmp_path)
    assert "use that ubipy, or a later one; a shard is never migrated back" in str(got.value)


def test_a_version_1_shard_is_migrated_and_keeps_its_pages(tmp_path: Path) -> None:
    # Version 1 had no encoding columns: build one as it was, with a page in it.
    shard = Shard.open(tmp_path)
    shard.record_pages([_page(1, "http://a.test/old")])
    shard.close()
    downgrade(tmp_path, 1)

    shard = Shard.open(tmp_path)
    new = dataclasses.replace(
        _page(2, "http://a.test/new"), encoding="gbk", encoding_source="detected"
    )
    shard.record_pages([new])
    rows = {r["url"]: (r["title"], r["encoding"], r["encoding_source"]) for r in shard.iter_pages()}
    shard.close()
    assert rows == {
        "http://a.test/old": ("hi", None, None),
        "http://a.test/new": ("hi", "gbk", "detected"),
    }
    conn = sqlite3.connect(tmp_path / SHARD_FILE)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()
    # Opened again, it is simply current.
    Shard.open(tmp_path).close()


def test_a_version_16_shard_keeps_its_pages_and_captures_now_kept_in_the_order_written(
    tmp_path: Path,
) -> None:
    """Version 17 keeps pages, their captures' and their visits' rows in the order
    written, their fingerprints (hashes) in an index: keyed by them, each commit wrote
    all over these tables. A version 16 shard keeps every page, body, capture and
    visit, and a page stored again still replaces its row (one a URL)."""
    fps = [9, 3, 7]
    shard = Shard.open(tmp_path, warc_size=10**9)
    for fp in fps:  # one commit each: the captures' rows in that order too
        shard.record_pages([dataclasses.replace(_page(fp, f"http://a.test/{fp}"), fetched_at=fp)])
    shard.save_refresh([], [Visit(fp, 30 - fp, 200, False, "d", truncated=True) for fp in fps])
    shard.close()
    downgrade(tmp_path, 16)

    shard = Shard.open(tmp_path, warc_size=10**9)
    assert [shard.page_body(fp) for fp in fps] == [b"<html>hi</html>"] * 3
    shard.record_pages([dataclasses.replace(_page(3, "http://a.test/3", b"again"), fetched_at=20)])
    fetched = {r["url"]: r["fetched_at"] for r in shard.iter_pages()}
    assert fetched == {"http://a.test/9": 9, "http://a.test/3": 20, "http://a.test/7": 7}
    shard.close()
    conn = sqlite3.connect(tmp_path / SHARD_FILE)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    # Copied in the order fetched; the page stored again went last.
    assert conn.execute("SELECT fp FROM pages ORDER BY rowid").fetchall() == [(7,), (9,), (3,)]
    # The captures in the order of their files' offsets, the new one last.
    captures = conn.execute("SELECT fp, at FROM warc ORDER BY rowid").fetchall()
    revisits = [(9, 21.0), (3, 27.0), (7, 23.0)]  # in the order written
    assert captures == [(9, 9.0), (3, 3.0), (7, 7.0), *revisits, (3, 20.0)]
    # The visits in the order made, each whole.
    visits = conn.execute("SELECT fp, at, truncated FROM visits ORDER BY rowid").fetchall()
    assert visits == [(9, 21.0, 1), (7, 23.0, 1), (3, 27.0, 1)]
    conn.close()


def test_a_version_7_frontier_is_migrated_in_order_and_forgets_nothing(tmp_path: Path) -> None:
    # Version 7 kept the fingerprints in a table of their own (seen), and an early
    # hand-off wrote some there with no frontier row.
    shard = Shard.open(tmp_path)
    shard.add_to_frontier(
        [
            _url(i, host)._replace(fp=fp + i)
            for i in range(4)
            for host, fp in (("a.test", 1000), ("b.test", 2000))
        ]
    )
    [done] = shard.pending_for_host("b.test", 0, 1)
    shard.record_pages([_page(done.fp, done.url)])
    shard.close()
    downgrade(tmp_path, 7)
    conn = sqlite3.connect(tmp_path / SHARD_FILE)
    conn.executemany("INSERT INTO seen (fp) VALUES (?)", [(7001,), (7002,)])
    conn.commit()
    conn.close()

    shard = Shard.open(tmp_path)
    assert [r.url for r in shard.pending_for_host("a.test", 0, 10)] == [
        f"http://a.test/{i}" for i in range(4)
    ]
    assert [r.url for r in shard.pending_for_host("b.test", 0, 10)] == [
        f"http://b.test/{i}" for i in range(1, 4)
    ]
    assert shard.seen_many([7001, 7002, done.fp, 9999]) == {7001, 7002, done.fp}
    assert sorted(shard.held_hosts()) == ["a.test", "b.test"]
    counts = shard.counts()
    assert (counts.seen, counts.pending, counts.done) == (10, 7, 3)
    # A restart's filter holds them all, and new rows follow the old ones.
    assert len(list(shard.iter_seen())) == 10
    [new] = shard.add_to_frontier([_url(9)])
    assert new.seq > max(r.seq for r in shard.pending_for_host("a.test", 0, 10)[:-1])
    assert shard.pending_for_host("a.test", 0, 10)[-1].url == "http://a.test/9"
    shard.close()


def test_the_outbox_keeps_the_redirects_that_led_to_each_url_across_a_restart(
    tmp_path: Path,
) -> None:
    """A URL waiting for its host's owner is sent with the redirects in a row that led
    to it, for the owner to count a chain on from: read back as 0 after a restart,
    a chain of redirects between two peers' hosts began again at each."""
    waiting = [_url(1, "b.test")._replace(redirects=7), _url(2, "b.test")._replace(score=0.5)]
    shard = Shard.open(tmp_path)
    shard.outbox_add(waiting)
    shard.close()
    shard = Shard.open(tmp_path)
    assert shard.outbox() == waiting
    shard.close()


def test_a_version_10_outbox_is_migrated_and_keeps_its_rows(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    shard.outbox_add([_url(1, "b.test")._replace(score=0.25, redirects=5), _url(2, "c.test")])
    shard.close()
    downgrade(tmp_path, 10)
    conn = sqlite3.connect(tmp_path / SHARD_FILE)
    assert "redirects" not in {row[1] for row in conn.execute("PRAGMA table_info(outbox)")}
    conn.close()

    shard = Shard.open(tmp_path)
    # Its rows kept, none of them said to come by a redirect (version 10 did not say).
    assert shard.outbox() == [_url(1, "b.test")._replace(score=0.25), _url(2, "c.test")]
    shard.outbox_add([_url(3, "b.test")._replace(redirects=3)])
    assert [u.redirects for u in shard.outbox()] == [0, 0, 3]
    shard.close()
    conn = sqlite3.connect(tmp_path / SHARD_FILE)
    assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    conn.close()


class _FullAtVersion(sqlite3.Connection):
    """A connection whose disk fills just before the new shard's version is written."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.startswith("PRAGMA user_version="):
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *args)


def test_a_first_open_cut_short_leaves_a_shard_the_next_open_creates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = sqlite3.connect

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        return real(*args, factory=_FullAtVersion, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    with pytest.raises(ShardError, match="disk is full"):
        Shard.open(tmp_path)
    monkeypatch.undo()
    # The schema's tables were not left behind without their version: the next open
    # creates them again rather than failing on a duplicate column for ever.
    shard = Shard.open(tmp_path)
    shard.add_to_frontier([_url(1)])
    shard.close()
    conn = sqlite3.connect(tmp_path / SHARD_FILE)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_garbage_instead_of_a_shard_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / SHARD_FILE).write_bytes(b"this is not a database" * 100)
    with pytest.raises(ShardError, match="cannot open shard"):
        Shard.open(tmp_path)


@pytest.mark.parametrize("version", [0, 3])
def test_another_programs_database_under_the_shards_name_is_left_as_it_is(
    tmp_path: Path, version: int
) -> None:
    """A database of another program's had ubipy's tables added to it, and its version
    set, without a word (QA); one whose own version number is below ours would have
    been "migrated"."""
    path = tmp_path / SHARD_FILE
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE users (name TEXT)")
        conn.execute("INSERT INTO users VALUES ('ada')")
        conn.execute(f"PRAGMA user_version={version}")
    conn.close()
    before = path.read_bytes()
    with pytest.raises(ShardError, match="not a ubipy shard"):
        Shard.open(tmp_path)
    assert path.read_bytes() == before


def test_a_warc_directory_that_is_a_file_is_a_clear_error_at_open(tmp_path: Path) -> None:
    """Found at the first write, it was retried every 5 s for ever (QA)."""
    (tmp_path / "warc").write_text("the user's\n")
    with pytest.raises(ShardError, match="warc: not a directory"):
        Shard.open(tmp_path, warc_size=1 << 20)
    assert (tmp_path / "warc").read_text() == "the user's\n"
    Shard.open(tmp_path).close()  # bodies in the shard: no WARC directory needed


def test_a_shard_with_damaged_pages_is_a_clear_error(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    shard.add_to_frontier([_url(i) for i in range(2_000)])
    shard.close()
    path = tmp_path / SHARD_FILE
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
    conn.close()
    raw = bytearray(path.read_bytes())
    raw[2 * page :] = b"\xa5" * (len(raw) - 2 * page)  # the header and schema intact
    path.write_bytes(raw)
    with pytest.raises(ShardError, match="cannot open shard: database disk image is malformed"):
        Shard.open(tmp_path)


def test_admission_drops_known_urls_and_keeps_new_ones(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    adm = Admission(shard, recent_size=4, bloom_capacity=1000)
    first = adm.admit([_url(1), _url(2), _url(1)])
    assert [r.fp for r in first] == [1001, 1002]
    assert adm.admit([_url(1), _url(3)])[0].fp == 1003
    assert adm.stats.admitted == 3


def test_a_bloom_false_positive_never_drops_a_url(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    adm = Admission(shard, recent_size=1, bloom_capacity=1000)
    # Make the filter claim everything is present: every lookup is a "maybe".
    adm._bloom = _Liar(1000, 0.01)
    rows = adm.admit([_url(i) for i in range(50)])
    assert len(rows) == 50
    assert adm.stats.false_positives == 50
    # Truly seen URLs are still refused after the exact check.
    assert adm.admit([_url(i) for i in range(50)]) == []


def test_restart_reloads_the_filter_so_nothing_is_admitted_twice(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    Admission(shard).admit([_url(i) for i in range(100)])
    shard.close()
    shard = Shard.open(tmp_path)
    adm = Admission(shard)
    assert adm.load() == 100
    assert adm.admit([_url(i) for i in range(100)]) == []
    assert adm.stats.bloom_new == 0


def test_rollback_forgets_the_exact_cache(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    adm = Admission(shard)
    with pytest.raises(RuntimeError), shard.transaction():
        adm.admit([_url(1)])
        raise RuntimeError("commit failed")
    adm.rollback()
    assert [r.fp for r in adm.admit([_url(1)])] == [1001]


def test_a_batch_retried_through_an_outage_does_not_grow_the_filter(tmp_path: Path) -> None:
    """Each try's URLs went into the filter before the commit that failed; at the next
    try they were false positives, and went in again: an hour of a full disk grew the
    chain to 81 MiB (found by a review)."""
    shard = Shard.open(tmp_path)
    adm = Admission(shard, recent_size=4, bloom_capacity=100)
    batch = [_url(i) for i in range(80)]
    for _ in range(20):
        with pytest.raises(RuntimeError), shard.transaction():
            adm.admit(batch)
            raise RuntimeError("disk full at the commit")
        adm.rollback()
    assert len(adm.admit(batch)) == 80  # and nothing was lost
    assert adm._bloom.filters == 1


class _Liar(GrowingBloom):
    """A filter that says "maybe" to everything."""

    def __contains__(self, fp: int) -> bool:
        return True


def test_history_received_for_a_host_goes_with_it_when_handed_on(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    [row] = shard.add_to_frontier([_url(1)])
    # Another peer fetched URL 1 and two URLs this shard never saw.
    assert shard.take_done("a.test", [row.fp, 5001, 5002]) == 1
    pending, done, _ = shard.host_state("a.test")
    assert pending == []
    assert sorted(done) == sorted([row.fp, 5001, 5002])
    assert shard.seen_many([5001, 5002]) == {5001, 5002}
    # Handing the host on forgets all of it.
    assert sorted(shard.drop_host("a.test")) == sorted([row.fp, 5001, 5002])
    assert shard.seen_many([row.fp, 5001, 5002]) == set()


def test_a_write_to_a_damaged_shard_says_it_will_not_pass(tmp_path: Path) -> None:
    """Refused as a full disk is, and retried every 5 s for ever without a word of
    the difference (QA). The error is SQLite's own, of a file that is no database."""
    junk = tmp_path / "junk"
    junk.write_bytes(b"\xa5" * 65536)
    with pytest.raises(sqlite3.DatabaseError) as damaged:
        sqlite3.connect(junk).execute("SELECT * FROM sqlite_master")
    shard = Shard.open(tmp_path / "data")
    damage = "the shard is damaged: no write succeeds again"
    with pytest.raises(StorageError, match=damage), shard.transaction():
        shard.add_to_frontier([_url(1)])
        raise damaged.value
    with pytest.raises(StorageError) as full, shard.transaction():
        raise sqlite3.OperationalError("database or disk is full")
    assert "shard is damaged" not in str(full.value)
    assert shard.counts().pending == 0
    shard.close()


@pytest.mark.parametrize("taken", ["admitted", "waiting to be handed on"])
def test_a_shard_that_took_a_url_in_holds_something(tmp_path: Path, taken: str) -> None:
    # What a new peer whose start failed may take away with its directory: nothing
    # admitted is lost.
    shard = Shard.open(tmp_path)
    assert shard.holds_nothing()
    url = NewURL(fp=7, url="http://a.test/", host="a.test", depth=0)
    if taken == "admitted":
        shard.add_to_frontier([url])
    else:
        shard.outbox_add([url])
    assert not shard.holds_nothing()
    shard.close()
