"""What closes a commit while a crawl is busy: ``commit_every_pages`` pages, or the
bodies waiting reaching ``COMMIT_BYTES`` (held in memory until the commit), whichever
comes first."""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from tests.peer.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig
from ubipy.peer import commits as commits_module
from ubipy.peer import pageanswers, reading
from ubipy.store import PageRecord, Shard
from ubipy.store_config import StoreConfig

HOSTS = [f"h{i}.test" for i in range(10)]
# commit_interval 0.5 s, and a commit of one page is one of enough pages.
EVERY_PAGE_COUNTS = StoreConfig(commit_interval=0.5, commit_every_pages=8)


async def _commits(
    tmp: Path,
    serve: Callable[[httpx2.Request], Any],
    store: StoreConfig,
    hosts: Sequence[str],
    *,
    sitemaps: bool = False,
) -> list[tuple[float, int]]:
    """(when, how many pages) of each commit that stored pages, in a crawl of one page
    on each of ``hosts`` answered by ``serve``, one request at a time (so a host is
    always ready: no commit for want of work), the hosts' delays fixed at 0."""
    shard = Shard.open(tmp)
    commits: list[tuple[float, int]] = []
    record = shard.record_pages

    def counted(pages: Sequence[PageRecord]) -> None:
        if pages:
            commits.append((trio.current_time(), len(pages)))
        record(pages)

    shard.record_pages = counted  # type: ignore[method-assign]
    config = CrawlConfig(
        data_dir=tmp,
        politeness=PolitenessConfig(delay=0.0, concurrency=1, delay_factor=0.0),
        bounds=BoundsConfig(sitemaps=sitemaps),
        store=store,
    )
    await crawl_until_idle(config, shard, serve, [f"http://{h}/" for h in hosts], within=120)
    return commits


async def _batches(tmp: Path, body: bytes, every: int) -> list[int]:
    """Pages in each commit of a crawl of one page on each of 10 hosts."""

    def serve(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=body)

    store = StoreConfig(commit_every_pages=every, commit_interval=1000.0)
    return [n for _, n in await _commits(tmp, serve, store, HOSTS)]


async def test_a_commit_comes_at_commit_every_pages(tmp_path: Path) -> None:
    assert await _batches(tmp_path, b"x" * 100, every=4) == [4, 4, 2]


async def test_a_commit_comes_when_the_bodies_waiting_reach_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pageanswers, "COMMIT_BYTES", 2500)
    # 1,000 bytes a page: the third page's body passes 2,500 bytes, long before 100 pages.
    assert await _batches(tmp_path, b"x" * 1000, every=100) == [3, 3, 3, 1]


async def _commit_times(
    tmp: Path, latencies: list[float], store: StoreConfig = EVERY_PAGE_COUNTS
) -> tuple[list[tuple[float, int]], list[float]]:
    """(when each commit went and its pages, when each page was answered) in a crawl
    of one page on each of len(latencies) hosts, the n-th page's answer taking
    ``latencies[n]``."""
    answered: list[float] = []

    async def serve(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        await trio.sleep(latencies[len(answered)])
        answered.append(trio.current_time())
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=b"<p>x")

    hosts = [f"h{n}.test" for n in range(len(latencies))]
    return await _commits(tmp, serve, store, hosts), answered


async def test_a_due_commit_goes_with_the_next_page_answered(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A page every 0.3 s: each commit goes in the wake-up of the first page answered
    # once 0.5 s have passed (the first from the robots.txt answer at 0), never on a
    # timer of its own between two answers.
    commits, answered = await _commit_times(tmp_path, [0.3] * 10)
    times = [t for t, _ in commits]
    assert all(t in answered for t in times[:-1])  # the last: once nothing is ready
    assert [round(t, 6) for t in times[:3]] == [0.6, 1.2, 1.8]


async def test_a_slow_crawls_commit_waits_for_enough_pages(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A page every 0.3 s, commit_every_pages 24: past its 0.5 s a commit waits for
    # 24 / 8 = 3 pages, and goes with the third, before its patience (1 s) is out.
    store = StoreConfig(commit_interval=0.5, commit_every_pages=24)
    commits, answered = await _commit_times(tmp_path, [0.3] * 12, store)
    assert [n for _, n in commits[:3]] == [3, 3, 3]
    assert [round(t, 6) for t, _ in commits[:3]] == [0.9, 1.8, 2.7]
    assert all(t in answered for t, _ in commits[:3])


async def test_a_commit_of_few_pages_waits_no_longer_than_its_patience(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The defaults (64 pages a commit at 0.25 s) and a page every 0.3 s: each commit
    # goes with the first page answered COMMIT_PATIENCE after its first write waited.
    commits, _ = await _commit_times(tmp_path, [0.3] * 20, StoreConfig())
    assert commits_module.COMMIT_PATIENCE == 1.0
    assert [round(t, 6) for t, _ in commits[:2]] == [1.2, 2.4]
    assert [n for _, n in commits[:2]] == [4, 4]


def _timed_reads(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """When each page is read (parsed, its links made candidates), from now on."""
    reads: list[float] = []
    read_page = reading.read_page

    def timed(*args: Any, **kwargs: Any) -> Any:
        reads.append(trio.current_time())
        return read_page(*args, **kwargs)

    monkeypatch.setattr(pageanswers, "read_page", timed)
    return reads


async def test_pages_are_read_together_just_before_their_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    """A page answered is read with the others answered since, just before the commit
    that writes them, not in its own wake-up: at 2 requests in flight that read cost
    2.5-4 times as much (bench/stage_costs.py)."""
    reads = _timed_reads(monkeypatch)
    commits, answered = await _commit_times(tmp_path, [0.3] * 12, StoreConfig())
    by_time = Counter(round(t, 6) for t in reads)
    assert [(round(t, 6), n) for t, n in commits] == sorted(by_time.items())
    assert len(commits) < len(answered) / 2  # not one read a page


async def test_pages_are_read_early_once_their_bodies_reach_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    # 4 bytes a page: three pages' bodies pass 10 bytes, and are read in the third's
    # wake-up, before their commit (4 pages every 1.2 s).
    monkeypatch.setattr(pageanswers, "READ_BYTES", 10)
    reads = _timed_reads(monkeypatch)
    commits, answered = await _commit_times(tmp_path, [0.3] * 12, StoreConfig())
    by_time = Counter(round(t, 6) for t in reads)
    assert max(by_time.values()) <= 3
    assert by_time[round(answered[2], 6)] == 3
    assert round(answered[2], 6) not in {round(t, 6) for t, _ in commits}
    assert sum(n for _, n in commits) == len(reads) == 12


async def test_a_page_read_at_its_commit_keeps_when_it_was_fetched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    # The wall clock moves with the autojump clock, so a time taken at the commit
    # would show (commits every 1.2 s, a page every 0.3 s).
    monkeypatch.setattr(time, "time", lambda: 1_000_000.0 + trio.current_time())
    _, answered = await _commit_times(tmp_path, [0.3] * 6, StoreConfig())
    shard = Shard.open(tmp_path)
    try:
        fetched = sorted(page["fetched_at"] for page in shard.iter_pages())
    finally:
        shard.close()
    assert fetched == pytest.approx([1_000_000.0 + t for t in answered], rel=0, abs=1e-6)


async def test_a_due_commit_goes_with_any_answer_not_only_a_page_s(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A robots.txt naming eight sitemaps, each answered in 0.3 s: each commit due goes
    with the next sitemap answered. Only a page's answer brought it before, so these
    waited for the committer's timer (1.5 s)."""
    answered: list[float] = []
    maps = [f"http://s.test/m{i}.xml" for i in range(8)]
    urlset = b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"></urlset>'

    async def serve(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(200, text="".join(f"Sitemap: {m}\n" for m in maps))
        await trio.sleep(0.3)
        answered.append(trio.current_time())
        if request.url.path.startswith("/m"):
            return httpx2.Response(200, headers={"content-type": "text/xml"}, content=urlset)
        return httpx2.Response(200, headers={"content-type": "text/html"}, content=b"<p>x")

    store = EVERY_PAGE_COUNTS
    commits = [t for t, _ in await _commits(tmp_path, serve, store, ["s.test"], sitemaps=True)]
    assert len(answered) == 10  # the page, its eight sitemaps and /sitemap.xml
    assert all(t in answered for t in commits[:-1])
    assert all(b - a <= 0.5 + 0.3 + 1e-9 for a, b in itertools.pairwise(commits[:-1]))


async def test_a_commit_with_no_page_to_go_with_waits_no_longer_than_a_grace(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # The first page answered at once, the next after 30 s: the first goes by the
    # committer's timer, COMMIT_PATIENCE (a commit of few pages) + COMMIT_GRACE after
    # the robots.txt answer, not at 30 s.
    store = StoreConfig(commit_interval=0.5)
    commits, answered = await _commit_times(tmp_path, [0.0, 30.0], store)
    patience = commits_module.COMMIT_PATIENCE
    assert commits[0][0] == pytest.approx(patience + commits_module.COMMIT_GRACE)
    assert answered[0] < commits[0][0] < answered[1]
