"""A server's Retry-After against the crawler's own back-off, judged from the requests
a host gets: the server's word may lengthen the wait, never shorten it. In process, on
the autojump clock."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig
from ubipy.fetch import fingerprint
from ubipy.fetch.politeness import Scheduler
from ubipy.fetch.slots import HostSlot
from ubipy.fetch.throttle import Pace, ThrottleRules
from ubipy.peer.router import mark_to_wire
from ubipy.store import HostMark, NewURL, Shard
from ubipy.wire import Mark

PAGES = 2000
URL = "http://a.test/p"
# 503 to every page, with these headers.
BUSY = {
    "plain.test": [],
    "zero.test": [("Retry-After", "0")],
    "past.test": [("Retry-After", "Wed, 21 Oct 2015 07:28:00 GMT")],  # a clock behind
}


def _config(tmp_path: Path) -> CrawlConfig:
    return CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=1.0),
        bounds=BoundsConfig(sitemaps=False),
    )


async def _requests_in(
    tmp_path: Path, headers: dict[str, list[tuple[str, str]]], seconds: float
) -> dict[str, int]:
    """Page requests per host in ``seconds`` of a crawl where every page answers 503
    with the host's ``headers``."""
    asked = dict.fromkeys(headers, 0)

    async def answer(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        asked[request.url.host] += 1
        return httpx2.Response(503, headers=headers[request.url.host], text="busy")

    seeds = [f"http://{host}/p{i}" for host in headers for i in range(PAGES)]
    async with running_crawler(_config(tmp_path), answer) as crawler:
        crawler.seed(seeds)
        await trio.sleep(seconds)
    return asked


async def test_a_retry_after_of_zero_or_past_does_not_end_the_back_off(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    asked = await _requests_in(tmp_path, BUSY, 600.0)
    # Before: 599 requests each for "0" and the past date, against 23 without the header.
    assert 10 < asked["plain.test"] < 40, asked
    assert asked["zero.test"] <= asked["plain.test"], asked
    assert asked["past.test"] <= asked["plain.test"], asked


async def test_a_retry_after_sent_twice_is_obeyed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    asked = await _requests_in(tmp_path, {"dup.test": [("Retry-After", "120")] * 2}, 600.0)
    # Before: 23 requests (the joined "120, 120" unread: the plain back-off).
    assert asked["dup.test"] <= 600 / 120 + 1, asked


@pytest.mark.parametrize("status", [429, 503])
async def test_a_robots_txt_retry_after_is_obeyed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, status: int
) -> None:
    asked: list[tuple[float, str]] = []

    async def answer(request: httpx2.Request) -> httpx2.Response:
        asked.append((trio.current_time(), request.url.path))
        if request.url.path == "/robots.txt":
            return httpx2.Response(status, headers={"Retry-After": "600"}, text="go away")
        return httpx2.Response(200, headers={"Content-Type": "text/html"}, text="<p>x</p>")

    async with running_crawler(_config(tmp_path), answer) as crawler:
        crawler.seed([f"http://a.test/p{i}" for i in range(3)])
        await trio.sleep(700.0)
    # Before: a 429 read as "no robots.txt", every page asked at once; a 503 asked
    # again after 30 s and 90 s, and the host given up.
    assert asked == [(0.0, "/robots.txt"), (600.0, "/robots.txt")]


async def test_a_retry_after_is_waited_out_across_a_restart(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    asked: list[float] = []

    async def answer(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        asked.append(trio.current_time())
        return httpx2.Response(429, headers={"Retry-After": "300"}, text="slow down")

    async with running_crawler(_config(tmp_path), answer) as crawler:
        crawler.seed(["http://a.test/p"])
        await trio.sleep(20.0)
    assert len(asked) == 1
    shard = Shard.open(tmp_path)
    mark = shard.host_marks()["a.test"]
    shard.close()
    assert mark.delay == pytest.approx(300.0)  # the asked wait, not the 1 s delay
    async with running_crawler(_config(tmp_path), answer):
        await trio.sleep(400.0)
    # Before: asked again 1 s after the restart, 21 s after the 429.
    assert len(asked) == 2 and asked[1] - asked[0] >= 299.0, asked


async def test_a_mark_handed_over_waits_no_longer_than_this_peer_would(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    asked: list[float] = []

    async def answer(request: httpx2.Request) -> httpx2.Response:
        if request.url.path != "/robots.txt":
            asked.append(trio.current_time())
        return httpx2.Response(404)

    async with running_crawler(_config(tmp_path), answer) as crawler:
        start = trio.current_time()
        # A bogus mark (or a peer with longer limits): a year's wait.
        mark = HostMark(time.time(), 365 * 86400.0, 0)
        crawler.take_over("a.test", [NewURL(fingerprint(URL), URL, "a.test", 0)], [], mark)
        await trio.sleep(700.0)
    # max_retry_after (600 s) is the longest wait this peer's own settings give.
    assert len(asked) == 1 and 600.0 <= asked[0] - start < 602.0, asked


async def test_a_restart_that_lowers_the_delay_waits_the_new_one_and_a_servers_ask_still(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A mistyped --delay 600, fixed by a restart with --delay 1: each host's mark
    said 600 s, and the restart waited them out, fetching nothing for 10 minutes with
    no word why (QA). A mark that is a run's --delay now waits this run's; one a server
    asked for (a Retry-After) is waited out as before."""
    asked: dict[str, list[float]] = {"a.test": [], "b.test": []}

    async def answer(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        asked[request.url.host].append(trio.current_time())
        if request.url.host == "b.test":
            return httpx2.Response(429, headers={"Retry-After": "300"}, text="slow down")
        return httpx2.Response(200, headers={"Content-Type": "text/html"}, text="<p>a</p>")

    def config(delay: float) -> CrawlConfig:
        return CrawlConfig(
            data_dir=tmp_path,
            politeness=PolitenessConfig(delay=delay),
            bounds=BoundsConfig(sitemaps=False),
        )

    async with running_crawler(config(600.0), answer) as crawler:
        crawler.seed(["http://a.test/1", "http://a.test/2", "http://b.test/1"])
        await trio.sleep(700.0)  # each robots.txt at 0, then its first page at 600
    assert [len(times) for times in asked.values()] == [1, 1]
    for delay, second_a in ((2.0, True), (600.0, False)):
        # Restarted at once with 2 s: a.test's second page within seconds, b.test not
        # before its 300 s; the same restart with the old delay waits it out.
        data = tmp_path / f"copy-{delay:g}"
        shutil.copytree(tmp_path, data, ignore=shutil.ignore_patterns("copy-*"))
        asked = {"a.test": [], "b.test": []}
        start = trio.current_time()
        async with running_crawler(replace(config(delay), data_dir=data), answer):
            await trio.sleep(60.0)
        assert bool(asked["a.test"]) is second_a, (delay, asked)
        assert asked["a.test"] == [] or asked["a.test"][0] - start < 5.0, asked
        assert asked["b.test"] == [], asked


def test_a_mark_keeps_a_503_back_off_whole_and_travels_with_the_senders_delay() -> None:
    """Three 503s in a row under --delay 10: the back-off in force is 30 s, which the
    mark cut to 8 s (grown from the Crawl-delay, not --delay: a review). Sent to another
    peer, a mark holds the sender's --delay too, as a peer of an earlier version reads
    a mark, adding none of its own (a review)."""
    scheduler = Scheduler(delay=10.0, window=4, loader=lambda *_: [], throttle=ThrottleRules())
    slot = HostSlot("h.test", 10.0)
    slot.pace = Pace(latency=0.05, strikes=3)
    assert scheduler.asked_of(slot, 100.0) == scheduler.delay_of(slot) == 30.0
    slot.pace = Pace(latency=0.05)  # answering again: what the server asks is its pace
    assert scheduler.asked_of(slot, 100.0) < 1.0
    assert mark_to_wire(HostMark(5.0, 0.2, 3), 10.0) == Mark(5.0, 10.0, 3)
    assert mark_to_wire(HostMark(5.0, 30.0, 3), 10.0) == Mark(5.0, 30.0, 3)
