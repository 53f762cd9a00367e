"""The model: determinism, special cases, and links_of agreeing with the rendered HTML."""

from __future__ import annotations

import time
from html.parser import HTMLParser

from ubipy.synthweb import RobotsKind, SyntheticWeb, WebSpec, ground_truth
from ubipy.synthweb.urls import normalize_url, resolve


class _Links(HTMLParser):
    """An independent, stdlib-only link extractor with the crawler's rules."""

    def __init__(self) -> None:
        super().__init__()
        self.base: str | None = None
        self.nofollow_page = False
        self.hrefs: list[tuple[str, bool]] = []  # (href, rel-nofollow)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "base" and self.base is None and "href" in a:
            self.base = a["href"]
        elif tag == "meta" and a.get("name", "").lower() == "robots":
            self.nofollow_page |= "nofollow" in a.get("content", "").lower()
        elif tag in ("a", "area") and "href" in a:
            self.hrefs.append((a["href"], "nofollow" in a.get("rel", "").lower().split()))
        elif tag in ("frame", "iframe") and "src" in a:
            self.hrefs.append((a["src"], False))


def parsed_links(web: SyntheticWeb, url: str) -> list[str]:
    host, _, target = url[len("http://") :].partition("/")
    response = web.respond(host, "/" + target)
    parser = _Links()
    parser.feed(response.body.decode())
    if parser.nofollow_page:
        return []
    base = url if parser.base is None else resolve(url, parser.base) or url
    out = []
    for href, nofollow in parser.hrefs:
        target_url = resolve(base, href)
        if target_url is not None and not nofollow:
            out.append(target_url)
    return out


def test_same_seed_same_web_other_seed_differs() -> None:
    a, b, c = SyntheticWeb(), SyntheticWeb(WebSpec(seed=0)), SyntheticWeb(WebSpec(seed=1))
    urls = [a.url(i, p) for i in range(12) for p in ("/", "/s1/p4.html", "/s2/p8.html")]
    for url in urls:
        assert a.links_of(url) == b.links_of(url)
        host, target = url[7:].split("/", 1)
        assert a.respond(host, "/" + target).body == b.respond(host, "/" + target).body
    assert ground_truth(a, [a.seed_url()]) == ground_truth(b, [b.seed_url()])
    assert any(a.links_of(u) != c.links_of(u) for u in urls)
    assert a.respond("h001.synth.test", "/").body != c.respond("h001.synth.test", "/").body


def test_links_of_matches_what_a_parser_finds() -> None:
    web = SyntheticWeb()
    truth = ground_truth(web, [web.seed_url()])
    pages = [u for u in truth if not u.endswith(".txt")]
    pages += [web.specials[k] for k in ("meta_nofollow", "base_page", "frameset")]
    for url in pages:
        page = web.page(url)
        if page is not None and page.kind == "html":
            assert parsed_links(web, url) == web.links_of(url), url


def test_every_special_case_exists_at_the_default_size() -> None:
    web = SyntheticWeb()
    expected = {
        "out_of_scope", "base_page", "base_only", "tilde", "tilde_only", "disallowed_subtree",
        "nofollow_a", "nofollow_b", "disallowed_pdf", "allowed_pdf_query", "meta_nofollow",
        "meta_only_a", "area_target", "iframe_target", "frame_left", "disallowed_h5",
        "disallowed_h7", "redirect_301", "redirect_302", "chain_start", "chain_end", "loop_a",
        "loop_b", "not_found", "server_error", "image", "pdf",
    }  # fmt: skip
    assert expected <= set(web.specials)
    home = web.respond("h000.synth.test", "/").body.decode()
    for raw in ("H002.SYNTH.TEST", ":80/", "mailto:", "javascript:", "#top", "../", "./"):
        assert raw in home
    assert "/%7Edocs/" in web.respond("h001.synth.test", "/").body.decode()
    kinds = {web.robots_kind(h) for h in web.host_names()}
    assert kinds == set(RobotsKind) - {RobotsKind.HUGE, RobotsKind.HANG}  # hostile-only kinds
    assert web.respond("h010.synth.test", "/error.html").status == 500
    assert web.respond("h010.synth.test", "/missing.html").status == 404
    png = web.respond("h011.synth.test", "/img/logo.png")
    assert png.body.startswith(b"\x89PNG") and ("Content-Type", "image/png") in png.headers
    pdf = web.respond("h011.synth.test", "/files/manual.pdf")
    assert ("Content-Type", "application/pdf") in pdf.headers
    assert web.respond("outside.example", "/").status == 404


def test_redirects() -> None:
    web = SyntheticWeb()
    s = web.specials
    assert web.redirect_of(s["redirect_301"]) == s["redirect_301_target"]
    assert web.redirect_of(s["redirect_302"]) == s["redirect_302_target"]
    assert web.respond("h008.synth.test", "/old/page.html").status == 301
    assert web.respond("h008.synth.test", "/temp/go.html").status == 302
    hops, url = 0, s["chain_start"]
    while (nxt := web.redirect_of(url)) is not None:
        hops, url = hops + 1, nxt
    assert (hops, url) == (3, s["chain_end"])
    assert web.redirect_of(web.redirect_of(s["loop_a"]) or "") == s["loop_a"]


def test_robots_rules_from_the_model() -> None:
    web = SyntheticWeb()
    assert web.robots_allows("h001.synth.test", "/anything")
    assert not web.robots_allows("h002.synth.test", "/private/secret.html")
    assert web.robots_allows("h002.synth.test", "/privateer.html")
    h3 = "h003.synth.test"
    assert not web.robots_allows(h3, "/files/report.pdf")
    assert web.robots_allows(h3, "/files/report.pdf?download=1")
    assert not web.robots_allows(h3, "/private/hidden.html")
    assert web.robots_allows(h3, "/private/public-info.html")
    assert web.crawl_delay("h004.synth.test") == 0.3
    assert web.crawl_delay("h000.synth.test") is None
    assert b"Crawl-delay: 0.3" in web.respond("h004.synth.test", "/robots.txt").body
    assert not web.robots_allows("h006.synth.test", "/")
    assert web.robots_allows("www.outside.example", "/x")
    robots = web.respond("h007.synth.test", "/robots.txt")
    assert robots.status == 301
    assert dict(robots.headers)["Location"] == "http://h007.synth.test/robots-real.txt"
    assert web.respond("h007.synth.test", "/robots-real.txt").status == 200
    statuses = [
        web.respond("h005.synth.test", "/robots.txt", prior_requests=n).status for n in range(4)
    ]
    assert statuses == [503, 503, 200, 200]


def test_normalisation() -> None:
    assert normalize_url("HTTP://H002.SYNTH.TEST:80/a/./b/../c?x=1#frag") == (
        "http://h002.synth.test/a/c?x=1"
    )
    assert normalize_url("http://h.test/%7Euser/%41%2F") == "http://h.test/~user/A%2F"
    assert resolve("http://h.test/a/b.html", "mailto:x@y") is None
    assert resolve("http://h.test/a/b.html", "../../c") == "http://h.test/c"


def test_generation_is_fast_and_lazy() -> None:
    t0 = time.perf_counter()
    web = SyntheticWeb(WebSpec(hosts=200, pages_per_host=100))
    links = [web.links_of(web.url(h, "/s1/p10.html")) for h in range(200)]
    assert time.perf_counter() - t0 < 1.0
    assert all(links)
    assert len(web.host_names()) == 200


def test_the_odd_spellings_name_the_hosts_a_web_of_any_size_has() -> None:
    # Past 1,000 hosts names have four digits (h0002): the home page's odd spellings
    # once named h002, which the truth took for h0002 (QA: 3 to 6 "unexpected" URLs).
    web = SyntheticWeb(WebSpec(hosts=1_200, pages_per_host=6))
    home = web.page(web.url(0))
    assert home is not None
    odd = [
        (link.href, link.target)
        for link in home.links
        if link.target and link.href != link.target and link.href.lower().startswith("http")
    ]
    assert len(odd) >= 3
    for href, target in odd:
        host = href.split("/")[2].lower().removesuffix(":80")
        assert web.host_index(host) is not None and target.split("/")[2] == host
