"""Sitemap lastmod as a hint in a continuous crawl (--recrawl) of the changing web, which
lists each host's pages in its /sitemap.xml with an accurate, lying ("now") or frozen
lastmod: the sitemaps are asked again, the accurate host earns trust and its changed
pages are asked soon after its sitemap says so, the frozen one is never trusted, and
politeness holds. In process, on the autojump clock: hours are virtual."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import trio
import trio.testing

from tests.crawling import recrawl_for
from ubipy.config import (
    CrawlConfig,
    PolitenessConfig,
    RecrawlConfig,
    RefreshPolicy,
    StoreConfig,
)
from ubipy.store.shard import Shard
from ubipy.synthweb import LastmodKind, Referee, SyntheticWeb, WebSpec, in_process

DELAY = 0.5
# h003's sitemap is accurate (its pages change every hour or so), h005's frozen (every
# half hour or so), h002's accurate but slow; h000 and h001 keep the fixed sitemaps.
SPEC = WebSpec(seed=293, hosts=6, pages_per_host=6, changing=True)
ACCURATE, FROZEN = "h003.synth.test", "h005.synth.test"
HOURS = 2.5


async def test_an_accurate_host_earns_trust_and_its_changes_are_fetched_soon_after(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    web = SyntheticWeb(SPEC)
    assert web.changes is not None and web.sitemaps.changing is not None
    kinds = web.sitemaps.changing
    assert kinds.lastmod_kind(ACCURATE) is LastmodKind.ACCURATE
    assert kinds.lastmod_kind(FROZEN) is LastmodKind.FROZEN
    server = in_process(web)
    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=DELAY, concurrency=4),
        # The committer wakes once a second (by default 20 times: hours would cost a
        # minute of CPU); at this pace a new plan used to reach a host waiting to be
        # chosen and have it asked twice at once.
        store=StoreConfig(commit_interval=1.0),
        recrawl=RecrawlConfig(
            recrawl=True, policy=RefreshPolicy.HISTORY, rate=0.1, min_interval=60, replan=60
        ),
    )
    shard = Shard.open(tmp_path)
    crawler = await recrawl_for(config, shard, server, [web.seed_url()], HOURS * 3600)
    shard.close()
    refresher = crawler.refresher
    assert refresher is not None
    hints = refresher.hints

    log = list(server.log)
    referee = Referee(log, web)
    assert referee.overlaps() == [] and referee.short_gaps(DELAY) == []
    fetched: dict[str, list[float]] = defaultdict(list)
    for r in log:
        if r.status in (200, 304):
            fetched[referee.url_of(r)].append(r.start)
    # Sitemaps are asked again, every one of them many times.
    for host in (ACCURATE, FROZEN):
        assert len(fetched[f"http://{host}/sitemap.xml"]) >= 8
    # The accurate host is trusted, the frozen one is not, after enough checks each.
    assert hints.trusted(ACCURATE) and hints.hosts[ACCURATE].checks >= 5
    assert hints.hosts[ACCURATE].agreed == hints.hosts[ACCURATE].checks
    assert not hints.trusted(FROZEN) and hints.hosts[FROZEN].checks >= 5
    assert hints.hosts[FROZEN].agreed == 0
    assert hints.used[ACCURATE] > 0 and hints.used[FROZEN] == 0

    # From the log alone: once the accurate host is trusted (the second half), each time
    # its sitemap was read while a page's copy was stale (the page changed since its
    # last fetch), the page was fetched again within a minute.
    changes = web.changes
    late, prompt = 0, 0
    for read in fetched[f"http://{ACCURATE}/sitemap.xml"]:
        if read < HOURS * 3600 / 2 or read > HOURS * 3600 - 120:
            continue
        for url in kinds.sitemaps()[f"http://{ACCURATE}/sitemap.xml"]:
            before = [t for t in fetched[url] if t < read]
            if not before or changes.version(url, before[-1]) == changes.version(url, read):
                continue
            after = [t for t in fetched[url] if t >= read]
            if after and after[0] - read <= 60:
                prompt += 1
            else:
                late += 1
    assert prompt >= 1 and late == 0
