"""The synthetic web's sitemaps: served as the protocol says (robots.txt's Sitemap lines,
/sitemap.xml, an index, a .gz file, Content-Encoding), listing pages no page links,
which the truth expects only when sitemaps are read."""

from __future__ import annotations

import gzip

from ubipy.fetch.sitemaps import SitemapKind, read_sitemap
from ubipy.synthweb import SyntheticWeb, WebSpec, ground_truth
from ubipy.synthweb.urls import split_url

WEB = SyntheticWeb()
SEED = WEB.seed_url()
TRUTH = ground_truth(WEB, [SEED])
WITHOUT = ground_truth(WEB, [SEED], sitemaps=False)


def served(url: str) -> tuple[int, dict[str, str], bytes]:
    host, path = split_url(url)
    r = WEB.respond(host, path)
    return r.status, dict(r.headers), r.body


def test_robots_txt_names_sitemaps_here_and_on_another_host() -> None:
    _, _, body = served("http://h000.synth.test/robots.txt")
    assert b"Sitemap: http://h000.synth.test/maps/robots-listed.xml\n" in body
    assert b"Sitemap: http://h001.synth.test/maps/cross.xml\n" in body
    assert served("http://h001.synth.test/robots.txt")[0] == 404


def test_every_sitemap_says_what_the_model_says_it_lists() -> None:
    for url, document in WEB.sitemaps.documents.items():
        status, headers, body = served(url)
        assert status == 200
        if document.encoding == "content-encoding":
            assert headers["Content-Encoding"] == "gzip"
            body = gzip.decompress(body)
        elif document.encoding == "gzip-file":
            assert body[:2] == b"\x1f\x8b" and "Content-Encoding" not in headers
        sitemap = read_sitemap(body)
        assert sitemap.kind is (SitemapKind.INDEX if document.index else SitemapKind.URLSET)
        assert tuple(e.loc for e in sitemap.entries) == document.locs
    assert served("http://h005.synth.test/sitemap.xml")[0] == 404


def test_sitemap_only_pages_are_linked_from_no_page_and_expected_only_with_sitemaps() -> None:
    names = WEB.sitemaps.names
    pages = {url for name, url in names.items() if "/from-sitemap/" in url}
    linked = {link for url in TRUTH for link in WEB.links_of(url)}
    assert not pages & linked
    expected = pages - {names["sitemap_never"]}
    assert expected <= TRUTH and not expected & WITHOUT
    for name in ("sitemap_never", "sitemap_disallowed", "sitemap_nested_index"):
        assert names[name] not in WITHOUT
    assert names["sitemap_never"] not in TRUTH  # listed only under an index in an index
    assert names["sitemap_disallowed"] not in TRUTH  # h002's robots.txt disallows it
    assert names["sitemap_nested_index"] in TRUTH  # asked for, not read
    assert "http://www.outside.example/from-sitemap.html" not in TRUTH  # out of scope
    # Every host reached asks for its /sitemap.xml (h006's robots.txt never answers).
    assert {split_url(u)[0] for u in TRUTH - WITHOUT if u.endswith("/sitemap.xml")} == {
        f"h{i:03d}.synth.test" for i in range(12) if i != 6
    }
    assert ground_truth(WEB, [SEED], sitemaps=False, max_depth=None) == WITHOUT
    assert ground_truth(WEB, [SEED], max_depth=0) == {SEED, "http://h000.synth.test/robots.txt"}


def test_a_web_of_one_host_keeps_its_own_sitemaps() -> None:
    web = SyntheticWeb(WebSpec(hosts=1))
    truth = ground_truth(web, [web.seed_url()])
    assert "http://h000.synth.test/from-sitemap/zipped-2.html" in truth
    assert not any(split_url(u)[0] != "h000.synth.test" for u in truth)
