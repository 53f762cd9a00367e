"""Two paths a URL with a single source (a page listed in one sitemap) must not be lost
or fetched twice on: a forward left in the outbox when the peer stopped, and a host
taken over while a page of it is fetched but not yet committed."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.peer.test_handoff import crawler_at
from tests.peer.test_replica import page
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig, Scope
from ubipy.fetch import JobKind, fingerprint
from ubipy.peer.crawler import Crawler
from ubipy.peer.reading import MAX_REDIRECTS
from ubipy.peer.router import Router
from ubipy.ring import Ring
from ubipy.store import HostMark, NewURL, Shard


async def test_a_forward_left_in_the_outbox_is_admitted_if_the_restarted_peer_owns_it(
    tmp_path: Path,
) -> None:
    url = "http://a.test/only-in-a-sitemap"
    shard = Shard.open(tmp_path)
    shard.outbox_add([NewURL(fingerprint(url), url, "a.test", 1)])  # unacknowledged at a stop
    shard.close()
    shard = Shard.open(tmp_path)
    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=0.0))
    router = Router("me", Ring(["me"]))  # back alone: every host is this peer's for now
    async with httpx2.AsyncClient() as client:
        crawler = Crawler(config, shard, client, router)
        crawler.stop()  # run restores, then stops at once
        await crawler.run()
    assert shard.outbox() == []
    assert shard.pending_count("a.test") == 1 and crawler.pending == 1
    shard.close()


async def test_a_forward_left_in_the_outbox_goes_on_counting_its_chain_of_redirects(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A redirect's target left in the outbox, made this peer's own by the ring it
    starts under, came by a chain of redirects: the chain is counted on from there,
    and the next redirect, past MAX_REDIRECTS in a row, is refused (not followed as
    the first of a new chain)."""
    url = "http://a.test/go?n=20"
    shard = Shard.open(tmp_path)
    shard.outbox_add([NewURL(fingerprint(url), url, "a.test", 0, redirects=MAX_REDIRECTS)])
    shard.close()
    asked: list[str] = []

    async def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        asked.append(str(request.url))
        return httpx2.Response(302, headers={"Location": "/go?n=21"})

    bounds = BoundsConfig(scope=Scope.ANY, sitemaps=False)
    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=0.0), bounds=bounds)
    shard = Shard.open(tmp_path)
    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handler)) as client:
        crawler = Crawler(config, shard, client, Router("me", Ring(["me"])))
        async with trio.open_nursery() as nursery:
            await nursery.start(crawler.run)
            with trio.fail_after(300):
                await crawler.wait_idle()
            crawler.stop()
    shard.close()
    assert asked == [url]
    assert crawler.stats.refused["redirect chain"] == 1


async def test_a_host_taken_over_keeps_a_page_fetched_but_not_committed(tmp_path: Path) -> None:
    url = "http://a.test/p"
    async with crawler_at(tmp_path) as c:
        c.seed([url])
        s = c.scheduler
        robots = s.next_job(0.0)
        assert robots is not None and robots.kind is JobKind.ROBOTS
        s.robots_answer("a.test", 0.0, status=404, location=None, body=b"")
        # On the scheduler's times, not trio's clock (which starts anywhere: a day
        # on, robots.txt would be asked again first).
        job = s.next_job(1.0)
        assert job is not None and job.kind is JobKind.PAGE and job.url == url
        # Fetched: its outcome waits for the next commit...
        s.finished("a.test", 1.0)
        c._commits.answered(page(url))
        # ...when the host's previous holder hands it over (nothing more in it).
        c.take_over("a.test", [], [], None)
        assert s.next_job(1e9) is None  # not asked again: the page was written first
        assert c._shard.pending_count("a.test") == 0 and c.pending == 0


def _waiting_for_other(tmp_path: Path) -> tuple[Ring, str, list[NewURL], Shard, Router]:
    """Two URLs of a host "other" owns, in the outbox of "me": the ring, the host, the
    URLs, the shard and the router."""
    ring = Ring(["me", "other"])
    theirs = next(h for h in (f"h{i}.test" for i in range(100)) if ring.owner(h) == "other")
    urls = [
        NewURL(fingerprint(u), u, theirs, 1) for u in (f"http://{theirs}/a", f"http://{theirs}/b")
    ]
    shard = Shard.open(tmp_path)
    shard.outbox_add(urls)
    return ring, theirs, urls, shard, Router("me", ring)


async def test_urls_a_ring_change_makes_ours_wait_for_a_shard_that_refuses_writes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """URLs waiting for another peer become this one's when the ring drops it; admitting
    them on a full disk raised out of the gossip loop and ended the peer (found by a
    review). They wait, said once (it was at every try), and are admitted at the next
    flush that works."""
    _, theirs, urls, shard, router = _waiting_for_other(tmp_path)
    async with httpx2.AsyncClient() as client:
        crawler = Crawler(CrawlConfig(data_dir=tmp_path), shard, client, router)
        assert router.enqueue(urls, 0.0) == []  # waiting to be sent to "other"
        shard._conn.execute("PRAGMA query_only = ON")
        with caplog.at_level(logging.WARNING, logger="ubipy"):
            crawler.ring_changed(Ring(["me"]))
            for _ in range(3):  # the committer's tries
                crawler._admit_come_home()
        assert shard.pending_count(theirs) == 0 and len(shard.outbox()) == 2
        assert sum("wait for the shard" in r.getMessage() for r in caplog.records) == 1
        shard._conn.execute("PRAGMA query_only = OFF")
        assert crawler._flush()
    assert shard.pending_count(theirs) == 2 and shard.outbox() == []
    shard.close()


async def test_urls_come_home_that_the_ring_gives_back_before_they_are_admitted_go_on(
    tmp_path: Path,
) -> None:
    """URLs a ring change made ours waited for a full disk, and the ring gave their
    host back to its owner meanwhile: admitted at last, they were foreign again, taken
    for links just forwarded there (the router's recent cache), and dropped with their
    outbox rows: lost (a review)."""
    ring, theirs, urls, shard, router = _waiting_for_other(tmp_path)
    async with httpx2.AsyncClient() as client:
        crawler = Crawler(CrawlConfig(data_dir=tmp_path), shard, client, router)
        assert router.enqueue(urls, 0.0) == []  # waiting to be sent to "other"
        shard._conn.execute("PRAGMA query_only = ON")
        crawler.ring_changed(Ring(["me"]))  # ours, waiting for the shard
        crawler.ring_changed(ring)  # "other" is back
        shard._conn.execute("PRAGMA query_only = OFF")
        assert crawler._flush()
    assert shard.pending_count(theirs) == 0 and sorted(shard.outbox()) == sorted(urls)
    assert router.backlog() == 2  # on their way to "other" again
    shard.close()


async def test_a_host_taken_over_waits_its_whole_delay_whatever_the_clocks(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The previous holder's clock is 30 s behind this peer's (frames are allowed a
    minute): its last request, ended just now, looked 30 s old here, and a Crawl-delay
    of 10 s was not waited at all."""
    async with crawler_at(tmp_path) as c:
        c.seed(["http://a.test/p"])
        skewed = HostMark(last_end=time.time() - 30.0, delay=10.0, pages=1)
        c.take_over("a.test", [], [], skewed)
        slot = c.scheduler.slot("a.test")
        assert slot is not None
        assert slot.next_allowed == pytest.approx(trio.current_time() + 10.0)


async def test_a_host_taken_over_does_not_wait_its_whole_back_off_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # A 600 s back-off with 100 s left: 100 s and the clocks' allowance, not 600 s
    # more at every move.
    async with crawler_at(tmp_path) as c:
        c.seed(["http://a.test/p"])
        c.take_over("a.test", [], [], HostMark(time.time() - 500.0, 600.0, 1))
        slot = c.scheduler.slot("a.test")
        assert slot is not None
        assert slot.next_allowed == pytest.approx(trio.current_time() + 100.0 + 60.0, abs=1.0)


async def test_a_host_handed_over_in_chunks_is_not_counted_again_at_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hand-off comes in chunks of 2,000 URLs; each made the receiver count the host's
    rows on disk three times, a host of a million URLs minutes of counting (quadratic).
    A chunk that closes nothing pending here is taken as it comes; one that does (pages
    done elsewhere) rebuilds the queue from disk, without them."""
    host = "big.test"
    urls = [f"http://{host}/p{i}" for i in range(1000)]
    counted: list[str] = []
    async with crawler_at(tmp_path) as c:
        count = c._shard.pending_count

        def counting(h: str) -> int:
            counted.append(h)
            return count(h)

        monkeypatch.setattr(c._shard, "pending_count", counting)
        for i in range(0, 1000, 100):
            chunk = [NewURL(fingerprint(u), u, host, 1) for u in urls[i : i + 100]]
            c.take_over(host, chunk, [fingerprint(f"http://{host}/done{i}")], None)
        assert counted == [] and c.pending == 1000
        s = c.scheduler
        slot = s.slot(host)
        assert slot is not None and len(slot.queue) + slot.on_disk == 1000
        # Two of its URLs were fetched by the sender after all: done here too.
        c.take_over(host, [], [fingerprint(urls[3]), fingerprint(urls[997])], None)
        assert counted == [host] and c.pending == 998 == count(host)
        slot = s.slot(host)
        assert slot is not None and len(slot.queue) + slot.on_disk == 998


async def test_a_host_asked_just_before_a_kill_waits_its_delay_from_the_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A request in flight at a kill -9 ends after the host's last mark, which it never
    writes: restarted within the second, the peer asked the host again 10 ms short of
    its delay after that request's end (QA with processes). A host its last run asked
    shortly before the end, its wait over by then, waits its delay from the new run's
    start."""
    async with crawler_at(tmp_path) as c:
        # Not at once, as the mark alone owes: it may have been asked again since.
        owed = _owed_at_start(c, "a.test", HostMark(time.time() - 1.5, 1.0, 1))
        assert owed == pytest.approx(1.0)
        # A host last asked long before the run began owes what its mark says.
        assert _owed_at_start(c, "b.test", HostMark(time.time() - 3600, 1.0, 1)) <= 0


async def test_a_host_backing_off_at_a_restart_waits_out_its_back_off_not_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A failing page's 30 s back-off, 5 s of it gone when the peer stopped and came
    back: nothing was asked after it, so the host waits the 25 s left, not 30 s from
    the restart (QA: restarts every few seconds pushed a 6 s retry to 38 s, the
    host's other pages held all along)."""
    async with crawler_at(tmp_path) as c:
        owed = _owed_at_start(c, "a.test", HostMark(time.time() - 5.0, 30.0, 1))
        assert owed == pytest.approx(25.0, abs=0.01)


async def test_a_delay_raised_at_the_restart_still_covers_a_request_in_flight_at_the_kill(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The last run waited 1 s (its --delay) after the mark and may have asked again;
    this run's --delay is 5 s: the host waits 5 s from the start (a review: the new
    --delay taken for the old run's made its wait look still running)."""
    async with crawler_at(tmp_path, delay=5.0) as c:
        owed = _owed_at_start(c, "a.test", HostMark(time.time() - 1.5, 1.0, 1))
        assert owed == pytest.approx(5.0)


def _owed_at_start(c: Crawler, host: str, mark: HostMark) -> float:
    """Seconds from now before ``host``, whose mark the last run left, may be asked by
    a run that began now."""
    c._shard.save_host_marks({host: mark})
    c.stats.started_at = trio.current_time()
    c.seed([f"http://{host}/p"])
    slot = c.scheduler.slot(host)
    assert slot is not None
    return slot.next_allowed - trio.current_time()
