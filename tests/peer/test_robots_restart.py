"""A restart within --robots-ttl asks no host's robots.txt again: the rules a run
took are kept in the shard (store/robotskept.py); every restart asked every host's
robots.txt again before its next page (QA)."""

from __future__ import annotations

from pathlib import Path

import trio
import trio.testing

from tests.cluster.harness import wall_clock_on_trio_time
from tests.peer.test_recrawl import _crawl_for
from ubipy.config import CrawlConfig, PolitenessConfig
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth, in_process


async def test_a_restart_within_the_ttl_asks_no_robots_txt_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    web = SyntheticWeb(WebSpec(seed=5, hosts=6, pages_per_host=10))
    server = in_process(web)
    config = CrawlConfig(data_dir=tmp_path, politeness=PolitenessConfig(delay=2.0))
    with wall_clock_on_trio_time():
        await _crawl_for(config, server, 12, seeds=[web.seed_url()], crash=False)
        first = len(server.log)
        referee = Referee(server.log, web)
        # Those that answered with rules (a 503 is asked again, as it would be anyway).
        asked = {r.host for r in server.log if referee.is_robots(r) and r.status < 500}
        await _crawl_for(config, server, 600, seeds=[], crash=False)
    log = list(server.log)
    referee = Referee(log, web)
    again = [r for r in log[first:] if referee.is_robots(r) and r.host in asked]
    assert len(asked) >= 4 and first < len(log)
    assert [(r.host, r.target_path, r.status) for r in again] == []
    # The crawl is whole all the same, each page once, robots.txt obeyed.
    truth = ground_truth(web, [web.seed_url()])
    assert referee.requested() >= truth
    assert referee.duplicates() == [] and referee.robots_violations() == []
