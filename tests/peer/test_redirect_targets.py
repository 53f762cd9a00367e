"""A redirect's row says where it went: its Location resolved against the URL asked,
normalised as a link is, for a first fetch and for a later visit, in JSON Lines and in
a WARC made from the shard (before, the status alone: a link graph lost its moves)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.peer.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig
from ubipy.store import Shard, export

MOVES = {
    "/a": (302, "b?x=1#part"),  # relative, with a fragment
    "/b": (301, "HTTP://A.TEST:80/c"),  # absolute, not normalised
    "/c": (307, "mailto:someone@a.test"),  # no URL a crawl takes
}


async def handler(request: httpx2.Request) -> httpx2.Response:
    path = request.url.path
    if path == "/robots.txt":
        return httpx2.Response(404)
    if path in MOVES:
        status, location = MOVES[path]
        return httpx2.Response(status, headers={"Location": location})
    html = '<a href="/a">a</a>' if path == "/" else "<p>end</p>"
    return httpx2.Response(200, headers={"Content-Type": "text/html"}, text=html)


async def test_each_redirect_says_where_it_went(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    data = tmp_path / "peer"
    config = CrawlConfig(
        data_dir=data,
        politeness=PolitenessConfig(delay=0.0),
        bounds=BoundsConfig(sitemaps=False),
    )
    await crawl_until_idle(config, Shard.open(data), handler, ["http://a.test/"], within=300)
    out = tmp_path / "pages.jsonl"
    export([data], "jsonl", out)
    rows = {row["url"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert {url: (row["status"], row["location"]) for url, row in rows.items()} == {
        "http://a.test/": (200, None),
        "http://a.test/a": (302, "http://a.test/b?x=1"),
        "http://a.test/b?x=1": (301, "http://a.test/c"),
        "http://a.test/c": (307, "mailto:someone@a.test"),
    }
