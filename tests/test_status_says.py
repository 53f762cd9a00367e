"""What `ubipy status` says beyond its table (QA). Peers of one cluster started with
other settings each crawl their own hosts their own way: it says which settings
differ, and each peer's (--scope host on one peer and any on another, --no-sitemaps
on the owner of a host whose pages only its sitemap lists, and nothing said
anywhere). Under --recrawl a peer's pages count every visit: it says how many were
refreshes, and how many found the page unchanged."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import trio

from ubipy.config import BoundsConfig, CrawlConfig, PolitenessConfig, RecrawlConfig, Scope
from ubipy.net import request
from ubipy.peer.peer import Peer
from ubipy.peer.status import shared_settings
from ubipy.statustable import format_cluster
from ubipy.wire import Status, StatusRequest, secret_from


def _report(*settings: str) -> dict[str, Any]:
    ids = [f"p{i}" for i in range(len(settings))]
    return {
        "members": [
            {"id": i, "address": f"127.0.0.1:70{n}", "state": "alive"} for n, i in enumerate(ids)
        ],
        "peers": [
            {"peer_id": i, "uptime": 10.0, "pages": 1, "settings": s}
            for i, s in zip(ids, settings, strict=True)
        ],
    }


def test_the_settings_that_differ_are_named_with_each_peer_s(tmp_path: Path) -> None:
    base = CrawlConfig(data_dir=tmp_path)
    other = dataclasses.replace(
        base,
        bounds=BoundsConfig(scope=Scope.HOST, sitemaps=False, exclude=("/p1",)),
        politeness=PolitenessConfig(per_ip=False),
    )
    table = format_cluster(_report(shared_settings(base), shared_settings(other))).splitlines()
    at = table.index("SETTINGS DIFFER between peers (each crawls its own hosts its own way):")
    assert table[at + 1 :] == [
        "  p0: --exclude=(none) --per-ip=on --scope=domain --sitemaps=on",
        "  p1: --exclude=/p1 --per-ip=off --scope=host --sitemaps=off",
    ]


def test_a_regex_with_semicolons_and_equals_signs_is_one_setting(tmp_path: Path) -> None:
    base = CrawlConfig(data_dir=tmp_path)
    odd = dataclasses.replace(base, bounds=BoundsConfig(exclude=("x; --scope=any",)))
    table = format_cluster(_report(shared_settings(base), shared_settings(odd))).splitlines()
    at = table.index("SETTINGS DIFFER between peers (each crawls its own hosts its own way):")
    assert table[at + 1 :] == ["  p0: --exclude=(none)", "  p1: --exclude='x; --scope=any'"]
    # As a shell takes it: a regex's backslashes were shown doubled (QA).
    odd = dataclasses.replace(base, bounds=BoundsConfig(exclude=(r"p1[0-4]\.html",)))
    table = format_cluster(_report(shared_settings(base), shared_settings(odd))).splitlines()
    assert table[-1] == r"  p1: --exclude='p1[0-4]\.html'"


def test_peers_that_agree_or_do_not_say_show_nothing(tmp_path: Path) -> None:
    same = shared_settings(CrawlConfig(data_dir=tmp_path))
    # "": an older peer's; not JSON: nothing to go by.
    for report in (_report(same, same), _report(same, ""), _report(same, "{oops")):
        assert "SETTINGS DIFFER" not in format_cluster(report)


async def test_a_peer_says_its_settings_in_its_status(tmp_path: Path) -> None:
    config = CrawlConfig(data_dir=tmp_path, listen="127.0.0.1:0", bounds=BoundsConfig(max_depth=3))
    peer = Peer(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(peer.run)
        said = peer.status().as_json()["settings"]
        peer.stop()
    assert said == shared_settings(config) and '"--max-depth":"3"' in said


async def test_a_continuous_crawl_s_peer_says_its_refreshes(tmp_path: Path) -> None:
    config = CrawlConfig(
        data_dir=tmp_path, listen="127.0.0.1:0", recrawl=RecrawlConfig(recrawl=True)
    )
    peer = Peer(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(peer.run)
        said = peer.status().as_json()
        peer.stop()
    assert (said["refreshes"], said["refreshes_unchanged"], said["pages_retired"]) == (0, 0, 0)
    # A 304 found the page unchanged too: the count holds it, as status says it does
    # ("15 unchanged, 45 of them 304s" said a QA run).
    assert peer.crawler.refresher is not None
    stats = peer.crawler.refresher.stats
    stats.refreshes, stats.unchanged, stats.not_modified = 60, 15, 45
    said = peer.status().as_json()
    assert (said["refreshes_unchanged"], said["refreshes_not_modified"]) == (60, 45)
    once = Peer(CrawlConfig(data_dir=tmp_path / "once", listen="127.0.0.1:0"))
    async with trio.open_nursery() as nursery:
        await nursery.start(once.run)
        assert once.status().as_json()["refreshes"] == 0  # no refresher: nothing to say
        once.stop()


async def test_answering_status_requests_is_not_counted_as_bytes_out(tmp_path: Path) -> None:
    # bytes out is what the crawl and the cluster send: a lone peer's grew with each
    # `ubipy status` asked (QA).
    config = CrawlConfig(data_dir=tmp_path, listen="127.0.0.1:0")
    peer = Peer(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(peer.run)
        for _ in range(3):
            with trio.fail_after(10):
                reply = await request(peer.address, secret_from(None), StatusRequest(cluster=True))
            assert isinstance(reply, Status)
        said = peer.status().as_json()
        peer.stop()
    assert said["frames_out"] >= 3 and said["bytes_out_wire"] == 0


def test_requests_put_back_for_a_proxy_down_are_said() -> None:
    # A proxy down or a wrong --proxy: the crawl waited, said only in the log (a review).
    report = _report("")
    report["peers"][0]["proxy_down"] = 12
    assert format_cluster(report).splitlines()[-1] == (
        "p0: 12 requests put back: the proxy could not be reached"
    )


def test_the_sitemaps_fetched_are_said_beside_the_pages() -> None:
    # Status counted 173 pages where the export wrote 184: 11 sitemaps, unsaid (QA).
    report = _report("")
    report["peers"][0] |= {"sitemaps": 11, "sitemap_urls": 40}
    assert format_cluster(report).splitlines()[-1] == (
        "p0: 11 sitemaps fetched beside the pages (40 URLs listed)"
    )
