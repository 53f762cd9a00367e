"""URLs with credentials (``user:pass@``): a seed or a link with them is the same URL
as without, so the web server sees each page asked once, and no credential is kept."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path

import trio
import trio.testing

from tests.churn import stored_urls
from tests.cluster.harness import cluster
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth
from ubipy.synthweb.render import Link
from ubipy.synthweb.spec import Page

SECRET_WORD = "hunter2"


class WebWithCredentials(SyntheticWeb):
    """The synthetic web whose home page also links to itself, to one of its pages and
    to another host's home, each with credentials."""

    def _page(self, url: str) -> Page | None:
        page = super()._page(url)
        if page is None or page.url != self.seed_url():
            return page
        home, name = self.seed_url(), self.host_names()[0]
        extra = (
            Link("a", f"http://user:{SECRET_WORD}@{name}/", home),
            Link("a", f"//user@{name}/s1/p1.html", self.url(0, "/s1/p1.html")),
            Link("a", f"http://admin:{SECRET_WORD}@{self.host_names()[1].upper()}/", self.url(1)),
        )
        return dataclasses.replace(page, links=page.links + extra)


def url_columns(data: Path) -> list[str]:
    """Every URL the shard holds anywhere (pages, frontier, outbox, replica, scope)."""
    conn = sqlite3.connect(data / "shard.sqlite3")
    try:
        urls = [u for table in ("pages", "frontier", "outbox", "replica") for (u,) in
                conn.execute(f"SELECT url FROM {table}")]  # fmt: skip
        urls += [v for (v,) in conn.execute("SELECT value FROM meta")]
        return urls
    finally:
        conn.close()


async def test_a_link_with_credentials_is_the_same_page_fetched_once_and_kept_without_them(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    web = WebWithCredentials(WebSpec(seed=3, hosts=4, pages_per_host=6, latency=0.05))
    truth = ground_truth(web, [web.seed_url()])
    assert web.url(0, "/s1/p1.html") in truth
    async with cluster(tmp_path, web, seed=1) as c:
        sim = await c.start(0)
        # The seed itself comes with credentials, as a user might paste it.
        seeded = sim.peer.seed_urls([f"http://user:{SECRET_WORD}@{web.host_names()[0]}/"])
        assert (seeded.offered, seeded.admitted, seeded.refused) == (1, 1, ())
        with trio.fail_after(120):
            await c.server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
            await sim.peer.crawler.wait_idle()
        status = await c.status(sim)
        assert await c.stop(sim)

    referee = Referee(c.server.log, web)
    assert referee.duplicates() == []
    assert referee.unexpected(truth) == set()
    # The seed and the three links with credentials, each counted once, and reported.
    assert sim.peer.crawler.stats.credentials_stripped == 4
    assert status["peers"][0]["credentials_stripped"] == 4
    stored = url_columns(sim.data)
    assert web.seed_url() in stored_urls(sim.data)
    assert not [u for u in stored if "@" in u or SECRET_WORD in u]
