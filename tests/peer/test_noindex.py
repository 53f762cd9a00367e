"""A page that says noindex (meta robots, or X-Robots-Tag for any type) is crawled and
its links followed, and its row says so: a search index built from the export leaves it
out (before, the crawler read it and kept nothing of it)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import httpx2
import trio
import trio.testing

from tests.peer.crawling import crawl_until_idle, recrawl_until
from ubipy.config import (
    BoundsConfig,
    CrawlConfig,
    FetchConfig,
    PolitenessConfig,
)
from ubipy.store import Shard, export

LINKS = ["/hidden", "/theirs", "/header", "/doc.pdf", "/plain.pdf", "/moved", "/gone"]


async def handler(request: httpx2.Request) -> httpx2.Response:
    path = request.url.path
    html = {"Content-Type": "text/html"}
    if path == "/robots.txt":
        return httpx2.Response(404)
    if path == "/":
        links = "".join(f'<a href="{link}">{link}</a>' for link in LINKS)
        return httpx2.Response(200, headers=html, text=links)
    if path == "/hidden":  # for every crawler; its link is followed all the same
        meta = '<meta name="robots" content="noindex"><a href="/behind">on</a>'
        return httpx2.Response(200, headers=html, text=meta)
    if path == "/theirs":  # for another crawler only
        return httpx2.Response(200, headers=html, text='<meta name="otherbot" content="noindex">')
    if path == "/header":
        return httpx2.Response(200, headers={**html, "X-Robots-Tag": "none"}, text="<p>x</p>")
    if path == "/doc.pdf":
        headers = {"Content-Type": "application/pdf", "X-Robots-Tag": "noindex, nofollow"}
        return httpx2.Response(200, headers=headers, content=b"%PDF-1.4")
    if path == "/plain.pdf":
        return httpx2.Response(200, headers={"Content-Type": "application/pdf"}, content=b"%PDF")
    if path == "/moved":
        return httpx2.Response(301, headers={"Location": "/behind", "X-Robots-Tag": "noindex"})
    if path == "/gone":
        return httpx2.Response(404, headers=html, text='<meta name="robots" content="noindex">')
    return httpx2.Response(200, headers=html, text="<p>end</p>")


async def test_a_pages_noindex_is_kept_and_exported(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    data = tmp_path / "peer"
    config = CrawlConfig(
        data_dir=data,
        politeness=PolitenessConfig(delay=0.0),
        bounds=BoundsConfig(sitemaps=False),
        fetch=FetchConfig(accept=("application/pdf",)),
    )
    await crawl_until_idle(config, Shard.open(data), handler, ["http://a.test/"], within=300)
    out = tmp_path / "pages.jsonl"
    export([data], "jsonl", out)
    rows = {row["url"]: row["noindex"] for row in map(json.loads, out.read_text().splitlines())}
    assert rows == {
        "http://a.test/": False,
        "http://a.test/hidden": True,
        "http://a.test/behind": False,  # reached through the noindex page's link
        "http://a.test/theirs": False,
        "http://a.test/header": True,
        "http://a.test/doc.pdf": True,
        "http://a.test/plain.pdf": False,
        "http://a.test/moved": None,  # a redirect: not a page to index or not
        "http://a.test/gone": None,  # an error page, whatever it says
    }
    with sqlite3.connect(data / "shard.sqlite3") as conn:
        stored = dict(conn.execute("SELECT url, noindex FROM pages").fetchall())
    assert stored == {url: None if said is None else int(said) for url, said in rows.items()}


async def test_a_page_that_turns_noindex_says_so_on_its_visit(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A continuous crawl: the page's first version is to index, its next one is not;
    the visit that saw the change says so (the page row keeps its first fetch's)."""
    hidden = False
    served_hidden = 0
    again = trio.Event()  # the hidden version asked again: its first answer was read

    async def changing(request: httpx2.Request) -> httpx2.Response:
        nonlocal served_hidden
        if request.url.path == "/robots.txt":
            return httpx2.Response(404)
        text = '<meta name="robots" content="noindex"><p>v2</p>' if hidden else "<p>v1</p>"
        if hidden:
            served_hidden += 1
            if served_hidden == 2:
                again.set()
        return httpx2.Response(200, headers={"Content-Type": "text/html"}, text=text)

    def hide() -> None:
        nonlocal hidden
        hidden = True

    await recrawl_until(tmp_path, changing, "http://a.test/p", hide, again, within=1200)
    out = tmp_path / "pages.jsonl"
    export([tmp_path], "jsonl", out)
    (row,) = map(json.loads, out.read_text().splitlines())
    assert row["noindex"] is False
    # The change, then the same version again (no new version: nothing said anew).
    assert [(v["changed"], v["noindex"]) for v in row["visits"]][:2] == [
        (True, True),
        (False, None),
    ]
