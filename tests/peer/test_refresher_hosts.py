"""The refresher hands the scheduler each host's pages due again: all of them after a
load or a plan, and none of a host handed away to another peer."""

from __future__ import annotations

import time
from pathlib import Path

from ubipy.config import CrawlConfig, RecrawlConfig
from ubipy.fetch import Entry, UrlFilter
from ubipy.peer.refreshing import Refresher
from ubipy.store import RefreshRow, Shard


class _Scheduler:
    """Records the refreshes each host was handed last."""

    def __init__(self) -> None:
        self.due: dict[str, list[str]] = {}

    def refreshes(self, host: str, due: list[tuple[float, Entry]]) -> None:
        self.due[host] = sorted(e.url for _, e in due)

    def slot(self, host: str) -> None:
        return None  # no host met yet: the refresh budget takes the configured delay


def _row(fp: int, host: str, now: float) -> RefreshRow:
    return RefreshRow(
        fp, f"http://{host}/p{fp}", host, 1, 2, 1, 3600.0, now - 60, now + 600, 0.0,
        None, None, "sha1:x",
    )  # fmt: skip


async def test_a_host_handed_away_leaves_the_plans(tmp_path: Path) -> None:
    now = time.time()
    shard = Shard.open(tmp_path)
    shard.save_refresh([_row(1, "a.test", now), _row(2, "a.test", now), _row(3, "b.test", now)], [])
    config = CrawlConfig(data_dir=tmp_path, recrawl=RecrawlConfig(recrawl=True))
    scheduler = _Scheduler()
    refresher = Refresher(config, shard, lambda: scheduler, UrlFilter())  # type: ignore[arg-type,return-value]
    refresher.load()
    assert scheduler.due == {
        "a.test": ["http://a.test/p1", "http://a.test/p2"],
        "b.test": ["http://b.test/p3"],
    }
    refresher.forget_host("a.test")
    scheduler.due.clear()
    refresher.plan()
    assert scheduler.due == {"b.test": ["http://b.test/p3"]}
    shard.close()
