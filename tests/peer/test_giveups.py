"""A host given up for a reason that may pass (its robots.txt unreachable, its name
not resolving) is tried again a --robots-ttl later: a weeks-long crawl lost a site for
the rest of the run to 2 minutes of 503 (a review). The judge is what the server was
asked, and the shard's rows."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.cluster.harness import wall_clock_on_trio_time
from tests.peer.crawling import running_crawler
from tests.peer.test_crawler import give_up
from tests.peer.test_handoff import asked, crawler_at
from ubipy.config import CrawlConfig, PolitenessConfig, RecrawlConfig, RefreshPolicy
from ubipy.errors import StorageError
from ubipy.fetch import DnsFailure, Resolver
from ubipy.peer.giveups import ROBOTS_UNREACHABLE, GiveUps, to_restore
from ubipy.store import GivenUp
from ubipy.store.shard import SHARD_FILE, NewURL

HOUR = 3600.0


class _Deploying:
    """Sites whose robots.txt is there, but b.test's server is down for its first two
    minutes (a deploy: 503); ``page(now)`` answers the others. Asked: (time, URL)."""

    def __init__(self, page: Callable[[float], httpx2.Response]) -> None:
        self.asked: list[tuple[float, str]] = []
        self._page = page

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        now = trio.current_time()
        self.asked.append((now, str(request.url)))
        if request.url.path == "/robots.txt":
            return httpx2.Response(503 if request.url.host == "b.test" and now < 120 else 404)
        return self._page(now)


async def test_a_site_whose_robots_txt_failed_for_two_minutes_is_crawled_later(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    def page(now: float) -> httpx2.Response:
        # a.test links to b.test, and to a new page of it every hour (a continuous
        # crawl reads it again as it changes).
        n = int(now // HOUR)
        links = f'<a href="http://b.test/p">b</a><a href="http://b.test/new{n}">b</a>'
        return httpx2.Response(
            200, html=f"<html><body>{links}</body></html>", headers={"ETag": f'"v{n}"'}
        )

    handler = _Deploying(page)
    asked = handler.asked
    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=1.0, concurrency=2, robots_ttl=6 * HOUR),
        recrawl=RecrawlConfig(recrawl=True, rate=0.01, min_interval=600, replan=60),
    )
    with wall_clock_on_trio_time():
        async with running_crawler(config, handler) as crawler:
            crawler.seed(["http://a.test/", "http://b.test/"])
            await trio.sleep(HOUR)
            # Given up: its URLs closed, none of its pages asked.
            assert crawler.stats.robots_given_up == 1
            assert not [u for _, u in asked if "b.test" in u and "robots" not in u]
            await trio.sleep(6 * HOUR)
            tried_again = [t for t, u in asked if u == "http://b.test/robots.txt" and t > HOUR]
    pages = {u for t, u in asked if "b.test" in u and "robots" not in u}
    assert tried_again and 6 * HOUR <= tried_again[0] < 6 * HOUR + 120
    # Its seed, its page, and the new pages found before and after it came back.
    assert {f"http://b.test/{p}" for p in ("", "p", "new0", "new6")} <= pages
    with sqlite3.connect(tmp_path / SHARD_FILE) as conn:
        closed = conn.execute(
            "SELECT count(*) FROM frontier WHERE host = 'b.test' AND state != 1"
        ).fetchone()[0]
    assert closed == 0


async def test_a_site_given_up_before_a_restart_is_crawled_when_it_would_have_been(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """The times hosts were given up were kept in memory only: a peer restarted (a
    deploy, a reboot) forgot them, and their URLs stayed closed for the rest of the
    crawl. The shard keeps them now, and the restarted peer tries the host again when
    the run before would have. A URL of it admitted after it was given up (once its
    slot was forgotten, or by another peer's forward) stayed pending: the restarted
    peer asked its robots.txt again at once, three times (QA); it is closed as the
    host's others were, and reopened with them; so is one admitted after the restart."""
    links = '<html><body><a href="http://b.test/p">b</a></body>'
    handler = _Deploying(lambda now: httpx2.Response(200, html=links))
    asked = handler.asked

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=1.0, concurrency=2, robots_ttl=6 * HOUR),
    )
    with wall_clock_on_trio_time():
        async with running_crawler(config, handler) as crawler:
            crawler.seed(["http://a.test/", "http://b.test/"])
            await trio.sleep(HOUR)
            assert crawler.stats.robots_given_up == 1
            given_up = max(t for t, u in asked if u == "http://b.test/robots.txt")
        with sqlite3.connect(tmp_path / SHARD_FILE) as conn:
            conn.execute(
                "INSERT INTO frontier (fp, url, host, depth, state) "
                "VALUES (12345, 'http://b.test/later', 'b.test', 1, 0)"
            )
        async with running_crawler(config, handler) as crawler:  # restarted
            # A new link to it, found after the restart: closed as the others are, not
            # its robots.txt asked again at once (QA, at every restart).
            crawler.seed(["http://b.test/new"])
            await trio.sleep(6 * HOUR)
    again = [t for t, u in asked if u == "http://b.test/robots.txt" and t > HOUR]
    assert again and given_up + 6 * HOUR <= again[0] < given_up + 6 * HOUR + 60
    later = {"http://b.test/", "http://b.test/p", "http://b.test/later", "http://b.test/new"}
    assert later <= {u for t, u in asked if t > HOUR}
    with sqlite3.connect(tmp_path / SHARD_FILE) as conn:
        assert conn.execute("SELECT count(*) FROM given_up").fetchone()[0] == 0


async def test_a_site_crawled_for_hours_is_refreshed_again_after_its_name_failed(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    asked: list[float] = []

    def handler(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        asked.append(trio.current_time())
        links = "".join(f'<a href="/p{i}">x</a>' for i in range(5))
        return httpx2.Response(200, html=f"<html><body>{links}</body></html>")

    async def lookup(name: str) -> list[str]:
        if 2 * HOUR <= trio.current_time() < 2 * HOUR + 300:  # 5 minutes of NXDOMAIN
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return ["93.184.216.34"]

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=1.0, concurrency=2, robots_ttl=12 * HOUR),
        recrawl=RecrawlConfig(
            recrawl=True, policy=RefreshPolicy.UNIFORM, rate=0.05, min_interval=60, replan=60
        ),
    )
    with wall_clock_on_trio_time():
        resolver = Resolver(ttl=HOUR, lookup=lookup)
        async with running_crawler(config, handler, resolver=resolver) as crawler:
            crawler.seed(["http://a.test/"])
            await trio.sleep(24 * HOUR)
    assert crawler.dns is not None and crawler.dns.stats.hosts_given_up == 1
    hours = {int(t // HOUR) for t in asked}
    # Refreshed every hour before, none while given up, every hour again after.
    assert {0, 1} <= hours and not hours & set(range(3, 14))
    assert set(range(15, 24)) <= hours


async def test_hosts_are_tried_again_in_turn_and_a_refusal_is_tried_later(
    autojump_clock: trio.testing.MockClock,
) -> None:
    giveups = GiveUps(after=100.0)
    revived: list[tuple[str, float]] = []
    refusals = 1

    def revive(host: str) -> int:
        nonlocal refusals
        if host == "b.test" and refusals:
            refusals -= 1
            raise StorageError("database or disk is full")
        revived.append((host, trio.current_time()))
        return 1

    giveups.closed([("a.test", ROBOTS_UNREACHABLE)], 0.0)
    # Refused for good: stays given up.
    giveups.closed([("private.test", DnsFailure.REFUSED.value), ("cert.test", "bad cert")], 5.0)
    giveups.closed([("b.test", DnsFailure.NO_SUCH_NAME.value)], 10.0)
    assert len(giveups) == 2
    async with trio.open_nursery() as nursery:
        nursery.start_soon(giveups.run, revive)
        await trio.sleep(50)
        giveups.closed([("c.test", DnsFailure.TIMEOUT.value)], trio.current_time())
        await trio.sleep(500)
        nursery.cancel_scope.cancel()
    assert revived == [("a.test", 100.0), ("c.test", 150.0), ("b.test", 170.0)]


def test_the_latest_hosts_given_up_are_kept() -> None:
    """Bounded, as the reasons are: a crawl meeting millions of dead hosts."""
    giveups = GiveUps(after=1.0, kept=2)
    giveups.closed([(f"h{i}.test", ROBOTS_UNREACHABLE) for i in range(5)], 0.0)
    assert len(giveups) == 2


async def test_a_host_given_up_goes_to_its_new_owner_with_its_urls_to_try(
    tmp_path: Path,
) -> None:
    """Its rows closed as given up went over as fetched: the new owner never asked
    them, nor was told to try the host again (a review). They go as pending now, to be
    tried afresh there; rows closed for good (a bad certificate) stay as they were."""
    async with crawler_at(tmp_path) as c:
        for host, why in (("gone.test", ROBOTS_UNREACHABLE), ("bad.test", "bad certificate")):
            c.seed([f"http://{host}/", f"http://{host}/p"])
            give_up(c, host)
            c._commits.close_host(host, why)
        assert c._flush()
        state = c.host_for_handoff("gone.test")
        assert state is not None
        assert sorted(u.url for u in state[0]) == ["http://gone.test/", "http://gone.test/p"]
        assert state[1] == []
        bad = c.host_for_handoff("bad.test")
        assert bad is not None and bad[0] == [] and len(bad[1]) == 2


async def test_hosts_an_earlier_run_gave_up_are_tried_again_from_when_they_were(
    autojump_clock: trio.testing.MockClock,
) -> None:
    giveups = GiveUps(after=100.0)
    revived: list[tuple[str, float]] = []

    def revive(host: str) -> int:
        revived.append((host, trio.current_time()))
        return 1

    wall = 5_000.0  # the wall clock when the restarted peer reads them
    giveups.restore(
        [
            GivenUp("late.test", ROBOTS_UNREACHABLE, wall - 30),  # 70 s left
            GivenUp("past.test", DnsFailure.NO_SUCH_NAME.value, wall - 500),  # overdue
            GivenUp("future.test", ROBOTS_UNREACHABLE, wall + 10_000),  # a clock ahead then
            GivenUp("refused.test", DnsFailure.REFUSED.value, wall - 500),  # for good
        ],
        wall,
        trio.current_time(),
    )
    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(giveups.run, revive)
        await trio.sleep(500)
        nursery.cancel_scope.cancel()
    assert [(h, round(t - start)) for h, t in revived] == [
        ("past.test", 0),
        ("late.test", 70),
        ("future.test", 100),
    ]


def test_a_full_disk_at_a_start_restores_a_given_up_hosts_urls_as_before() -> None:
    """Closing a given-up host's pending rows is a write: refused (a full disk), the
    host is restored as before the change (its robots.txt asked), the peer starts."""

    class FullDisk:
        def pending_hosts(self) -> list[tuple[str, int]]:
            return [("a.test", 2), ("b.test", 1)]

        def skip_host(self, host: str, reason: str) -> int:
            raise StorageError("database or disk is full")

    given_up = [GivenUp("b.test", ROBOTS_UNREACHABLE, 0.0)]
    assert list(to_restore(FullDisk(), given_up)) == [("a.test", 2), ("b.test", 1)]  # type: ignore[arg-type]


async def test_a_host_given_up_here_then_handed_on_and_back_is_asked_again(
    tmp_path: Path,
) -> None:
    """Given up here, handed to another peer (which does not give it up), then back
    with its URLs: they are asked (its robots.txt first), not closed as the host was
    here, until it would have been tried again."""
    async with crawler_at(tmp_path) as crawler:
        crawler.seed(["http://a.test/"])
        crawler._commits.close_host("a.test", ROBOTS_UNREACHABLE)
        assert crawler._flush()
        crawler.handed_off("a.test")
        crawler.take_over("a.test", [NewURL(7, "http://a.test/back", "a.test", 1)], [], None)
        assert asked(crawler) == {"a.test"}
