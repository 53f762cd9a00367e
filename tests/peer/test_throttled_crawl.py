"""A crawl of the paced web (a fast, a slow and a busy host), judged from the server's
request log: the slow host gets requests at a lower rate than the fast one, the busy
host (503 for a minute) is asked again after growing gaps, and everything is fetched
once. In process, on the autojump clock: the minute is virtual."""

from __future__ import annotations

from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.crawling import crawl_until_idle
from tests.peer.crawling import running_crawler
from ubipy.config import BoundsConfig, CrawlConfig, FetchConfig, PolitenessConfig
from ubipy.store.shard import Shard
from ubipy.synthweb import Referee, SyntheticWeb, SynthTransport, WebSpec, ground_truth, in_process
from ubipy.synthweb.pace import pace_of

DELAY = 0.05
SPEC = WebSpec(seed=4, hosts=1, pages_per_host=2, paced=True, paced_pages=8, unavailable_for=60.0)


async def test_the_delay_follows_each_hosts_pace(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    web = SyntheticWeb(SPEC)
    server = in_process(web)
    config = CrawlConfig(
        data_dir=tmp_path,
        # The host's back-off, not the page's quick retries, sets the pace while it
        # answers 503: five retries ride out a minute (2 + 4 + 8 + 16 + 32 s).
        politeness=PolitenessConfig(delay=DELAY, backoff_base=2.0, max_delay=40.0),
        fetch=FetchConfig(max_retries=5, retry_base=0.1),
    )
    shard = Shard.open(tmp_path)
    transport = SynthTransport(server, client="10.0.0.1")
    try:
        async with httpx2.AsyncClient(transport=transport) as client:
            crawler = await crawl_until_idle(config, shard, client, [web.seed_url()], patience=600)
        slowest = crawler.scheduler.slowest(3)
        stored = {row["url"]: row["status"] for row in shard.iter_pages()}
    finally:
        shard.close()

    log = list(server.log)
    referee = Referee(log, web)
    truth = ground_truth(web, [web.seed_url()])
    referee.assert_clean(truth, DELAY)
    busy_pages = {u for u in truth if u.startswith("http://pace-busy.") and u.endswith("html")}
    assert not referee.unfinished(truth - {u for u in truth if u.endswith(".txt")})
    assert all(stored[u] == 200 for u in busy_pages | {"http://pace-busy.synth.test/"})

    fast = pace_of(log, "pace-fast.synth.test")
    slow = pace_of(log, "pace-slow.synth.test")
    # The fast host waits --delay; the slow one its response time (0.2-0.4 s) at least.
    assert fast.mean_gap < 2 * DELAY
    assert slow.response_time >= 0.2
    assert slow.mean_gap >= max(0.2, 4 * DELAY)
    assert slow.rate < fast.rate / 4

    busy = pace_of(log, "pace-busy.synth.test")
    failures = [i for i, status in enumerate(busy.statuses) if status == 503]
    assert len(failures) == 5  # a minute of 503s, asked 5 times
    gaps = [busy.gaps[i] for i in failures]
    assert gaps == sorted(gaps) and gaps[-1] >= 30.0  # 2, 4, 8, 16, 32 s
    assert [round(g) for g in gaps] == [2, 4, 8, 16, 32]
    # Recovered: the pages after the outage came at the pace of --delay again.
    after = busy.gaps[failures[-1] + 1 :]
    assert after and max(after) < 2 * DELAY

    # The crawler's own view: the slow host first among its slowest.
    assert slowest[0].host == "pace-slow.synth.test"
    assert 0.2 <= slowest[0].latency <= 0.4 and slowest[0].delay >= slowest[0].latency


async def test_a_host_that_times_out_is_asked_no_more_than_a_slow_one(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    started = {"slow.test": 0, "dead.test": 0}

    async def answer(request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        started[request.url.host] += 1
        # 9 s, or past the 10 s fetch deadline.
        await trio.sleep(9.0 if request.url.host == "slow.test" else 11.0)
        return httpx2.Response(200, headers={"Content-Type": "text/html"}, text="<p>x</p>")

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=1.0),
        fetch=FetchConfig(max_retries=0, fetch_deadline=10.0),
        bounds=BoundsConfig(sitemaps=False),
    )
    seeds = [f"http://{host}/p{i}" for host in started for i in range(200)]
    async with running_crawler(config, answer) as crawler:
        crawler.seed(seeds)
        await trio.sleep(600.0)
        slowest = crawler.scheduler.slowest(2)
    # Before: 56 requests to the host that timed out, 35 to the one answering in 9 s.
    assert started["dead.test"] <= started["slow.test"], started
    # The status and the control centre show it, slowest first.
    assert [s.host for s in slowest] == ["dead.test", "slow.test"]
    assert slowest[0].latency >= 10.0
