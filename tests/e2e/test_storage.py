"""A full disk or a read-only shard pauses the peer; it neither dies nor loses anything."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.e2e.test_single_peer import DELAY, assert_perfect, finish, world
from ubipy.config import StoreConfig
from ubipy.errors import StorageError
from ubipy.peerexit import said_at_exit
from ubipy.synthweb import Referee
from ubipy.synthweb.truth import ground_truth
from ubipy.wording import counted


@pytest.mark.parametrize(
    ("break_it", "mend_it", "message"),
    [
        # SQLite's own page limit gives the same SQLITE_FULL a full disk does.
        (
            "PRAGMA max_page_count = {pages}",
            "PRAGMA max_page_count = 1000000",
            "full",
        ),
        ("PRAGMA query_only = ON", "PRAGMA query_only = OFF", "readonly"),
    ],
)
async def test_the_peer_pauses_while_the_shard_refuses_writes(
    tmp_path: Path, break_it: str, mend_it: str, message: str
) -> None:
    async with world() as w:
        peer = await w.start_peer(w.config(tmp_path, store=StoreConfig(storage_retry=0.05)))
        seed = w.web.seed_url()
        peer.crawler.seed([seed])
        with trio.fail_after(30):
            await w.server.log.wait_for_count(40)
        conn = peer.shard._conn
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(break_it.format(pages=pages))
        with trio.fail_after(30):
            await peer.crawler.storage_failing.wait()
        assert peer.crawler.storage_error is not None
        assert message in peer.crawler.storage_error
        assert "storage_error" in peer.status().as_json()
        with pytest.raises(StorageError):
            peer.crawler.seed(["http://h001.synth.test/new-seed"])
        # Nothing new starts while nothing can be saved.
        await w.server.wait_idle()
        served = len(w.server.log)
        conn.execute(mend_it)
        await finish(peer)
        assert len(w.server.log) > served
        assert peer.crawler.storage_error is None
        assert peer.crawler.stats.storage_failures >= 1
        log = w.server.log
    assert_perfect(log, w.web, ground_truth(w.web, [seed]), DELAY)


async def test_a_peer_stopped_while_its_shard_refuses_writes_says_what_it_did_not_save(
    tmp_path: Path,
) -> None:
    """Stopped while the disk was full, a peer dropped the pages it held in memory
    without a word and exited 0 (QA): it says how many, and exits 1. Their URLs stay
    pending in the shard: the next start asks them again, and finds the whole web."""
    async with world() as w:
        config = w.config(tmp_path, store=StoreConfig(storage_retry=0.05))
        peer = await w.start_peer(config)
        seed = w.web.seed_url()
        peer.crawler.seed([seed])
        with trio.fail_after(30):
            await w.server.log.wait_for_count(40)
        conn = peer.shard._conn
        conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")
        with trio.fail_after(30):
            await peer.crawler.storage_failing.wait()
        peer.stop()
        with trio.fail_after(30):
            await peer.finished.wait()
        lines, status = said_at_exit(peer)
        assert peer.crawler.unsaved > 0
        assert status == 1
        assert lines[-1].startswith(f"ubipy peer: {counted(peer.crawler.unsaved, 'fetched page')}")
        assert "database or disk is full" in lines[-1]
        again = await w.start_peer(config)
        await finish(again)
        log = w.server.log
    referee = Referee(log, w.web)
    assert referee.missing(ground_truth(w.web, [seed])) == set()
