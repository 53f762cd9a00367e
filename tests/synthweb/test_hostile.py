"""The hostile web's model and truth: off by default, each case present and deterministic,
and the truth's answer for each (no sockets here: see test_hostile_server.py)."""

from __future__ import annotations

import email.utils
import re
import zlib
from urllib.parse import urljoin

import lxml.html
import pytest

from ubipy.synthweb import RobotsKind, SyntheticWeb, WebSpec, bodies, ground_truth
from ubipy.synthweb.urls import normalize_url, segment_repeats

SMALL = WebSpec(
    hostile=True,
    huge_bytes=2_000_000,
    bomb_bytes=3_000_000,
    bigrobots_bytes=800 * 1024,
    many_links=2_000,
    slow_interval=0.05,
    slow_bytes=5,
)
WEB = SyntheticWeb(SMALL)
TRUTH = ground_truth(WEB, [WEB.seed_url()])


def x(case: str, path: str = "/") -> str:
    return f"http://x-{case}.synth.test{path}"


def status(url: str, n: int = 0) -> int:
    host, path = url[7:].split("/", 1)
    return WEB.respond(host, "/" + path, prior_requests=n).status


def test_off_by_default_and_the_default_truth_is_unchanged() -> None:
    web = SyntheticWeb()
    assert web.hostile is None and web.hostile_hosts() == [] and web.trap_hosts() == set()
    assert b"x-" not in web.respond("h000.synth.test", "/").body
    assert len(ground_truth(web, [web.seed_url()], sitemaps=False)) == 261
    assert len(ground_truth(web, [web.seed_url()])) == 261 + 26  # sitemaps and their pages
    assert web.respond("x-huge.synth.test", "/huge.html").status == 404


def test_every_hostile_host_is_linked_from_the_home_page() -> None:
    home = WEB.respond("h000.synth.test", "/").body.decode()
    assert len(WEB.hostile_hosts()) == 23
    for host in WEB.hostile_hosts():
        assert f'href="http://{host}/"' in home
        kind = WEB.robots_kind(host)
        expected = {"x-bigrobots": RobotsKind.HUGE, "x-robots-hang": RobotsKind.HANG}
        assert kind is expected.get(host.split(".")[0], RobotsKind.ABSENT)
    assert WEB.respond("x-huge.synth.test", "/robots.txt").status == 404
    assert WEB.respond("x-robots-hang.synth.test", "/robots.txt").fault == "hang"
    assert WEB.robots_rules("x-robots-hang.synth.test") is None


def test_calendar_and_deep_traps() -> None:
    links = WEB.links_of(x("calendar", "/cal/2026/12/"))
    assert links == [x("calendar"), x("calendar", "/cal/2026/11/"), x("calendar", "/cal/2027/01/")]
    assert WEB.links_of(x("calendar", "/cal/0001/01/"))[1:] == [x("calendar", "/cal/0001/02/")]
    assert status(x("calendar", "/cal/2026/13/")) == 404
    assert WEB.links_of(x("deep", "/deep/a/b/")) == [
        x("deep", "/deep/a/b/a/"),
        x("deep", "/deep/a/b/b/"),
    ]
    body = WEB.respond("x-deep.synth.test", "/deep/a/").body
    assert b'href="a/"' in body and b'href="b/"' in body
    # The repeat limit alone makes the deep trap finite: /deep/ + a and b at most 3 times each.
    seen, todo = set(), [x("deep", "/deep/a/")]
    while todo:
        url = todo.pop()
        if url not in seen and segment_repeats(url[25:]) <= 3:
            seen.add(url)
            todo.extend(WEB.links_of(url))
    assert x("deep", "/deep/a/b/a/b/a/b/") in seen and len(seen) == 34


def test_session_ids_are_fresh_per_request_and_reproducible() -> None:
    def sids(n: int) -> list[str]:
        body = WEB.respond("x-session.synth.test", "/", prior_requests=n).body.decode()
        return re.findall(r'href="[^"]*\?sid=([0-9a-f]{12})"', body)

    assert sids(0) == sids(0) and len(sids(0)) == 4
    assert set(sids(0)).isdisjoint(sids(1))
    [item] = [u for u in WEB.links_of(x("session")) if "/item/1.html" in u]
    assert status(item) == 200 and WEB.is_trap(item)
    assert WEB.links_of(x("session"))[0] == x("session", "/about.html")


def test_the_truth_keeps_only_the_fixed_pages_of_traps() -> None:
    for case, fixed in (
        ("calendar", {"/", "/about.html", "/cal/2026/11/"}),
        ("deep", {"/", "/about.html", "/deep/a/"}),
        ("session", {"/", "/about.html"}),
    ):
        assert {u for u in TRUTH if u.startswith(x(case, ""))} == {
            *(x(case, p) for p in fixed),
            x(case, "/robots.txt"),
        }
    assert WEB.trap_hosts() == {f"x-{c}.synth.test" for c in ("calendar", "session", "deep")}
    with pytest.raises(ValueError, match="budget"):
        ground_truth(WEB, [WEB.seed_url()], max_pages_per_host=3)  # x-manylinks has 52


def test_faults_fail_then_recover_and_the_always_variants_never_do() -> None:
    for case in ("hang", "reset"):
        url = x(case, f"/{case}.html")
        assert [status(url, n) for n in range(3)] == [0, 0, 200]
        assert [status(x(f"{case}-always", f"/{case}.html"), n) for n in range(4)] == [0] * 4
    slow = WEB.respond("x-slow.synth.test", "/slow.html")
    assert slow.fault == "cut" and slow.stream is not None
    assert WEB.respond("x-slow.synth.test", "/slow.html", prior_requests=2).fault == ""
    assert WEB.respond("x-slow-always.synth.test", "/slow.html", prior_requests=9).fault == "cut"
    assert [status(x("flaky", "/flaky.html"), n) for n in range(3)] == [500, 500, 200]
    limited = WEB.respond("x-ratelimit.synth.test", "/limited.html")
    assert (limited.status, dict(limited.headers)["Retry-After"]) == (429, "2")
    assert status(x("ratelimit", "/limited.html"), 1) == 200
    busy = WEB.respond("x-unavailable.synth.test", "/unavailable.html", wall_time=1000.5)
    when = email.utils.parsedate_to_datetime(dict(busy.headers)["Retry-After"])
    assert busy.status == 503 and when.timestamp() == 1003  # rounded up, then + 2 s
    assert status(x("unavailable", "/unavailable.html"), 1) == 200
    assert WEB.hostile is not None
    assert x("slow", "/slow.html") in WEB.hostile.recovering_urls()
    assert WEB.hostile.failing_urls() <= TRUTH and WEB.hostile.recovering_urls() <= TRUTH


def test_bombs_are_small_on_the_wire_and_exact_when_inflated() -> None:
    for coding, wbits in (("gzip", 31), ("deflate", 15)):
        r = WEB.respond(f"x-{coding}-bomb.synth.test", "/bomb.html")
        assert ("Content-Encoding", coding) in r.headers
        assert len(r.body) < SMALL.bomb_bytes // 500
        inflated = zlib.decompress(r.body, wbits)  # checks the CRC-32 / Adler-32 too
        assert len(inflated) == SMALL.bomb_bytes and inflated.startswith(b"<!DOCTYPE html>")
        assert inflated.rstrip(b" ").endswith(b"<body>")
    big = bodies.bomb(100 * 1024 * 1024, "gzip")  # the default: built in well under a second
    assert len(big) < 200_000


def test_big_robots_hides_a_rule_past_500_kib() -> None:
    r = WEB.respond("x-bigrobots.synth.test", "/robots.txt")
    assert r.status == 200 and len(r.body) == SMALL.bigrobots_bytes
    assert r.body.index(b"Disallow: /early/") < 100
    assert r.body.index(b"Disallow: /late/") == bodies.LATE_OFFSET > 500 * 1024
    assert b"\n\n" not in r.body
    host = "x-bigrobots.synth.test"
    assert not WEB.robots_allows(host, "/early/page.html")
    assert WEB.robots_allows(host, "/late/page.html")
    assert x("bigrobots", "/late/page.html") in TRUTH
    assert x("bigrobots", "/early/page.html") not in TRUTH
    assert [u for u in TRUTH if "x-robots-hang" in u] == [x("robots-hang", "/robots.txt")]


def lxml_links(body: bytes, base: str) -> list[str]:
    """The <a href> targets lxml (libxml2, what the crawler parses with) finds, resolved."""
    doc = lxml.html.document_fromstring(body)
    return [normalize_url(urljoin(base, a.get("href", ""))) for a in doc.iter("a")]


def test_content_cases_and_their_truth() -> None:
    malformed = WEB.respond("x-malformed.synth.test", "/malformed.html").body
    assert b"\x00" in malformed
    expected = [x("malformed", p) for p in bodies.MALFORMED_LINKS]
    assert lxml_links(malformed, x("malformed", "/malformed.html")) == expected
    assert set(expected) <= TRUTH
    binary = WEB.respond("x-binary.synth.test", "/binary.html")
    assert b"<" not in binary.body and binary.headers[0][1].startswith("text/html")
    assert binary.body == WEB.respond("x-binary.synth.test", "/binary.html").body
    charset = WEB.respond("x-charset.synth.test", "/charset.html")
    assert "utf-8" in dict(charset.headers)["Content-Type"] and b"caf\xe9.html" in charset.body
    assert x("charset", "/caf%EF%BF%BD.html") in TRUTH
    assert status(x("charset", "/caf%E9.html")) == 200
    assert x("charset", "/caf%E9.html") not in TRUTH
    many = WEB.respond("x-manylinks.synth.test", "/many.html").body
    assert many.count(b"<a ") == SMALL.many_links
    first = lxml_links(many, x("manylinks", "/many.html"))[:50]
    assert sorted(first) == sorted(x("manylinks", f"/t/{n}.html") for n in range(50))
    assert len({u for u in TRUTH if "/t/" in u}) == 50


def test_weird_links() -> None:
    body = WEB.respond("x-weirdlinks.synth.test", "/weird.html").body
    assert "/ünïcode/页.html".encode() in body and b"/ctl\x01.html" in body
    assert b"/long/" + b"x" * 9989 + b".html" in body
    weird = {u for u in TRUTH if u.startswith(x("weirdlinks", ""))}
    assert weird == {
        x("weirdlinks", p)
        for p in (
            "/", "/robots.txt", "/sitemap.xml", "/weird.html", "/with%20space/a%20b.html",
            "/padded.html",
            "/search.html?q=a%20b", "/%C3%BCn%C3%AFcode/%E9%A1%B5.html",
        )
    }  # fmt: skip
    for path in ("/with%20space/a%20b.html", "/%c3%bcn%c3%afcode/%e9%a1%b5.html"):
        assert status(x("weirdlinks", path)) == 200
    anywhere = ground_truth(WEB, [WEB.seed_url()], scope="any")
    assert {"http://xn--bcher-kva.example/", "http://xn--r8jz45g.xn--zckzah/"} <= anywhere
    assert "http://xn--bcher-kva.example/" not in TRUTH
    roomy = ground_truth(WEB, [WEB.seed_url()], max_url_length=20_000)
    [long_url] = roomy - TRUTH
    assert len(long_url) > 10_000


def test_normalisation_and_segment_repeats() -> None:
    assert normalize_url("http://a.test/%c3%a9%7e") == "http://a.test/%C3%A9~"
    assert segment_repeats("/x/y/x/y/x/y/") == 3 and segment_repeats("/") == 0
    assert segment_repeats("/a/b/?q=/a/a/a/a") == 1
    with pytest.raises(ValueError):
        WebSpec(hostile=True, bigrobots_bytes=1000)
