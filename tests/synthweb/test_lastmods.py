"""The changing web's sitemaps with lastmod: what each kind of host's /sitemap.xml says
at a given time, and that the default web and the fixed sitemap hosts are as before."""

from __future__ import annotations

import re

from ubipy.synthweb import LastmodKind, SyntheticWeb, WebSpec, ground_truth
from ubipy.synthweb.changing import EPOCH
from ubipy.synthweb.lastmods import w3c_datetime

SPEC = WebSpec(seed=2, hosts=40, pages_per_host=25, ranked=True, changing=True)
_ENTRY = re.compile(r"<loc>([^<]+)</loc>(?:<lastmod>([^<]+)</lastmod>)?")


def _said(web: SyntheticWeb, host: str, now: float) -> dict[str, str | None]:
    """What the host's /sitemap.xml says at server time `now`, parsed from its XML."""
    response = web.respond(host, "/sitemap.xml", now=now)
    assert response.status == 200
    return {loc: mod or None for loc, mod in _ENTRY.findall(response.body.decode())}


def _hosts(web: SyntheticWeb, kind: LastmodKind | None) -> list[str]:
    assert web.sitemaps.changing is not None
    return [h for h in web.host_names() if web.sitemaps.changing.lastmod_kind(h) is kind]


def test_every_kind_is_drawn_and_each_sitemap_lists_its_hosts_changing_pages() -> None:
    web = SyntheticWeb(SPEC)
    assert web.changes is not None and web.sitemaps.changing is not None
    for kind in (*LastmodKind, None):
        assert _hosts(web, kind), kind
    for host in _hosts(web, None):
        assert web.respond(host, "/sitemap.xml", now=10.0).status == 404
    for host in web.host_names():
        if host in _hosts(web, None):
            continue
        pages = {u for u in web.changes.urls() if web.changes.group(u) == host}
        assert set(_said(web, host, 10.0)) == pages
    # Deterministic from the seed: another web of the same spec draws the same kinds.
    again = SyntheticWeb(SPEC)
    assert again.sitemaps.changing is not None
    assert all(
        again.sitemaps.changing.lastmod_kind(h) is web.sitemaps.changing.lastmod_kind(h)
        for h in web.host_names()
    )


def test_what_each_kind_says_at_a_given_time() -> None:
    web = SyntheticWeb(SPEC)
    assert web.changes is not None
    now = 3 * 86400.0 + 0.7
    for host in _hosts(web, LastmodKind.ACCURATE):
        for url, said in _said(web, host, now).items():
            last = web.changes.last_change(url, now) or 0.0
            assert said == w3c_datetime(last)
    accurate = _hosts(web, LastmodKind.ACCURATE)
    assert any(len(set(_said(web, h, now).values())) > 1 for h in accurate)
    for host in _hosts(web, LastmodKind.NOW):
        assert set(_said(web, host, now).values()) == {w3c_datetime(now)}
        assert set(_said(web, host, now + 60).values()) == {w3c_datetime(now + 60)}
    for host in _hosts(web, LastmodKind.FROZEN):
        assert set(_said(web, host, now).values()) == {"2026-01-01T00:00:00Z"}
    for host in _hosts(web, LastmodKind.ABSENT):
        assert set(_said(web, host, now).values()) == {None}
    assert w3c_datetime(0.0) == "2026-01-01T00:00:00Z" and EPOCH == 1_767_225_600.0


def test_the_default_web_and_the_fixed_sitemap_hosts_are_unchanged() -> None:
    plain = SyntheticWeb(WebSpec(seed=3))
    changing = SyntheticWeb(WebSpec(seed=3, changing=True))
    assert plain.sitemaps.changing is None
    for host in plain.host_names()[2:]:
        assert plain.respond(host, "/sitemap.xml").status == 404
    # h000 and h001 keep their fixed sitemaps on the changing web.
    for host in plain.host_names()[:2]:
        assert changing.sitemaps.changing is not None
        assert changing.sitemaps.changing.lastmod_kind(host) is None
        ours = changing.respond(host, "/sitemap.xml", now=100.0)
        assert ours.body == plain.respond(host, "/sitemap.xml").body
    # The changing sitemaps list linked pages: a correct crawl requests the same URLs.
    seeds = [plain.seed_url()]
    assert ground_truth(changing, seeds) == ground_truth(plain, seeds)
