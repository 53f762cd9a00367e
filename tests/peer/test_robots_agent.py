"""The crawler's name in robots.txt and in robots directives: the product token of the
User-Agent it sends (--user-agent), not always ubipy's, and X-Robots-Tag read as a
meta robots is. Judged from the requests a site saw; in process, on the autojump clock."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest
import trio.testing

from tests.peer.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, FetchConfig, PolitenessConfig
from ubipy.store import Shard

ROBOTS = b"User-agent: acmebot\nDisallow: /acme-only\n\nUser-agent: ubipy\nDisallow: /ubipy-only\n"


def _page(*links: str, headers: dict[str, str] | None = None) -> httpx2.Response:
    body = "".join(f'<a href="{link}">x</a>' for link in links).encode()
    headers = {"content-type": "text/html", **(headers or {})}
    return httpx2.Response(200, headers=headers, content=body)


async def _asked(tmp_path: Path, user_agent: str | None, tag: str | None = None) -> set[str]:
    asked: set[str] = set()

    def serve(request: httpx2.Request) -> httpx2.Response:
        path = request.url.path
        asked.add(path)
        if path == "/robots.txt":
            return httpx2.Response(200, content=ROBOTS)
        if path == "/":
            extra = {} if tag is None else {"x-robots-tag": tag}
            return _page("/acme-only", "/ubipy-only", "/open", headers=extra)
        return _page()

    fetch = FetchConfig() if user_agent is None else FetchConfig(user_agent=user_agent)
    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=0.0),
        bounds=BoundsConfig(sitemaps=False),
        fetch=fetch,
    )
    await crawl_until_idle(config, Shard.open(tmp_path), serve, ["http://a.test/"], within=60)
    return asked


@pytest.mark.parametrize(
    ("user_agent", "barred"),
    [
        (None, "/ubipy-only"),
        ("acmebot/1.0 (+https://acme.example/bot)", "/acme-only"),
        ("Mozilla/5.0 (compatible; AcmeBot/2.1; +https://acme.example/bot)", "/acme-only"),
    ],
)
async def test_the_group_obeyed_is_the_one_naming_the_user_agent_sent(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, user_agent: str | None, barred: str
) -> None:
    # With --user-agent acmebot, requests said acmebot and ubipy's group was obeyed:
    # acmebot's Disallow was not (a review found).
    asked = await _asked(tmp_path, user_agent)
    assert barred not in asked
    assert {"/", "/open", "/acme-only", "/ubipy-only"} - {barred} <= asked


@pytest.mark.parametrize(
    ("tag", "followed"),
    [
        ("nofollow", False),
        ("noindex, nofollow", False),
        ("ubipy: nofollow", False),
        ("otherbot: nofollow", True),
        ("unavailable_after: 25 Jun 2030 15:00:00 PST", True),
    ],
)
async def test_x_robots_tag_is_read_as_a_meta_robots(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, tag: str, followed: bool
) -> None:
    # The header form of <meta name=robots content=nofollow> was ignored.
    asked = await _asked(tmp_path, None, tag)
    assert ("/open" in asked) is followed
