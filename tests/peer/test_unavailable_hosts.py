"""A host that says it is unavailable (503, 429 without Retry-After) for a while keeps
its URLs: its back-off paces the tries, and they spend none of a URL's retries for
its first strikes in a row (ubipy.fetch.retry.FREE_STRIKES). A seed answered 503 for
6 s at a deploy was given up after its 2 retries, and the whole site with it, and
status said nothing of it (QA). Judged by what the server saw, on the autojump clock."""

from __future__ import annotations

import itertools
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig
from ubipy.fetch.retry import FREE_STRIKES
from ubipy.statustable import format_cluster
from ubipy.store import Shard

HTML = {"content-type": "text/html"}
PAGES = ("/", "/a", "/b")


class _Deploying:
    """A site whose pages answer ``status`` until ``up_at`` (its robots.txt is fine)."""

    def __init__(self, up_at: float, status: int = 503) -> None:
        self.up_at, self.status = up_at, status
        self.asked: list[tuple[float, str, int]] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        now, path = trio.current_time(), request.url.path
        if path == "/robots.txt":
            return httpx2.Response(404)
        if now < self.up_at:
            response = httpx2.Response(self.status)
        elif path == "/":
            links = "".join(f'<a href="{p}">{p}</a>' for p in PAGES[1:])
            response = httpx2.Response(200, headers=HTML, text=f"<html><body>{links}</body></html>")
        else:
            response = httpx2.Response(200, headers=HTML, text="<html><body>x</body></html>")
        self.asked.append((now, path, response.status_code))
        return response


async def _crawl(site: _Deploying, tmp_path: Path) -> tuple[dict[str, int], dict[str, object]]:
    config = CrawlConfig(  # the default retries (2) and back-off (2 s doubling to 30 s)
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.0),
        bounds=BoundsConfig(sitemaps=False),
    )
    shard = Shard.open(tmp_path)
    try:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(site)) as client:
            crawler = await crawl_until_idle(
                config, shard, client, ["http://busy.test/"], patience=3600.0
            )
        stored = {row["url"]: row["status"] for row in shard.iter_pages()}
    finally:
        shard.close()
    stats = crawler.stats
    figures = {"given_up": stats.given_up.total(), "given_up_why": "; ".join(
        f"{why}: {n}" for why, n in stats.given_up.items()
    )}  # fmt: skip
    return stored, figures


@pytest.mark.parametrize("status", [503, 429])
async def test_a_site_down_for_a_minute_loses_no_page(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, status: int
) -> None:
    site = _Deploying(up_at=60.0, status=status)
    stored, figures = await _crawl(site, tmp_path)
    assert stored == {f"http://busy.test{p}": 200 for p in PAGES}
    assert figures["given_up"] == 0
    # Each page fetched once, the seed after its tries at the back-off's gaps.
    fine = [path for _, path, code in site.asked if code == 200]
    assert sorted(fine) == sorted(PAGES)
    tries = [at for at, _, code in site.asked if code == status]
    # 0, 2, 6, 14 and 30 s: five tries in the minute, then the fetch at 60 s.
    assert [round(b - a) for a, b in itertools.pairwise(tries)] == [2, 4, 8, 16]


async def test_a_site_down_for_good_is_asked_a_bounded_number_of_times_and_said(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    site = _Deploying(up_at=float("inf"))
    stored, figures = await _crawl(site, tmp_path)
    # Its free strikes, then the URL's own 2 retries: the first try and 12 more.
    assert len(site.asked) == 1 + FREE_STRIKES + 2
    assert site.asked[-1][0] < 400  # 2 + 4 + 8 + 16 + 30 x 8 s
    assert stored == {"http://busy.test/": 503}
    assert figures == {"given_up": 1, "given_up_why": "503: 1"}
    report = {
        "members": [{"id": "p0", "address": "127.0.0.1:7000", "state": "alive"}],
        "peers": [{"peer_id": "p0", "uptime": 10.0, "pages": 1, **figures}],
    }
    assert format_cluster(report).splitlines()[-1] == (
        "p0: 1 page given up after --retries (status 503: 1)"
    )


class _OneStrikeThenRetryAfter(_Deploying):
    """One 503 without Retry-After (a strike), then 503s asking a minute (no strike,
    and no end of the run either: strikes stay at 1)."""

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        headers = {"retry-after": "60"} if self.asked else {}
        self.asked.append((trio.current_time(), request.url.path, 503))
        return httpx2.Response(503, headers=headers)


async def test_a_url_s_free_tries_are_bounded_however_its_host_s_run_goes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    # Each try was free while the run stood at one strike: asked 361 times in six
    # hours, for ever, and never given up (a review).
    site = _OneStrikeThenRetryAfter(up_at=float("inf"))
    _, figures = await _crawl(site, tmp_path)
    assert len(site.asked) <= 1 + FREE_STRIKES + 2
    assert figures == {"given_up": 1, "given_up_why": "503: 1"}
