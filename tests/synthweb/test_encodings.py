"""The encodings web's model and truth: off by default, each case's bytes, headers and
declarations as its table says, and the truth's titles and encodings for them."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from ubipy.synthweb import RobotsKind, SyntheticWeb, WebSpec, ground_truth
from ubipy.synthweb.encodings import CASES, IDN_LABEL
from ubipy.synthweb.truth import expected_encodings, expected_titles

WEB = SyntheticWeb(WebSpec(encodings=True))
TRUTH = ground_truth(WEB, [WEB.seed_url()])
IDN_HOST = "xn--p0xp4y9jao6v.synth.test"


def fetch(url: str) -> tuple[int, dict[str, str], bytes]:
    host, path = url[7:].split("/", 1)
    r = WEB.respond(host, "/" + path)
    return r.status, dict(r.headers), r.body


def test_off_by_default_and_otherwise_only_adds_its_own_hosts() -> None:
    web = SyntheticWeb()
    assert web.encodings is None and expected_encodings(web) == {}
    assert b"enc-" not in web.respond("h000.synth.test", "/").body
    assert web.respond("enc-gbk.synth.test", "/").status == 404
    default = ground_truth(web, [web.seed_url()])
    assert default < TRUTH
    added = {url[7:].split("/", 1)[0] for url in TRUTH - default}
    assert added == {f"enc-{case}.synth.test" for case in CASES} | {IDN_HOST}


def test_every_encoding_host_is_linked_from_the_home_page_and_has_no_robots() -> None:
    home = WEB.respond("h000.synth.test", "/").body.decode()
    for case in CASES:
        host = f"enc-{case}.synth.test"
        assert f'href="http://{host}/"' in home
        assert WEB.robots_kind(host) is RobotsKind.ABSENT
        assert WEB.respond(host, "/robots.txt").status == 404
    assert IDN_HOST not in home  # reached only through the GBK page's link
    assert WEB.robots_kind(IDN_HOST) is RobotsKind.ABSENT


@pytest.mark.parametrize("case", list(CASES))
def test_each_case_is_written_and_declared_as_its_table_says(case: str) -> None:
    spec = CASES[case]
    root = f"http://enc-{case}.synth.test"
    urls = [f"{root}/", f"{root}/about.html", root + quote(f"/{spec.script.folder}/1.html")]
    for url in urls:
        status, headers, body = fetch(url)
        assert status == 200
        charset = f"; charset={spec.header}" if spec.header else ""
        assert headers["Content-Type"] == f"text/html{charset}"
        assert body.startswith(b"\xef\xbb\xbf") == spec.bom
        text = body.removeprefix(b"\xef\xbb\xbf").decode(spec.codec)  # strict: really in it
        title = WEB.encodings.titles[url] if WEB.encodings else ""
        assert f"<title>{title}</title>" in text
        assert spec.script.paragraph in text
        assert (spec.meta in text) if spec.meta else "charset" not in text
        assert sum(c.isascii() for c in text) > 1000  # ASCII filler around the script
    _, _, home = fetch(f"{root}/")
    text = home.removeprefix(b"\xef\xbb\xbf").decode(spec.codec)
    # The article's href is written in the script, and only its UTF-8 escape is a page.
    assert f'href="/{spec.script.folder}/1.html">{spec.script.article_link}</a>' in text
    assert spec.script.about_link in text
    assert WEB.respond(f"enc-{case}.synth.test", "/%FF/1.html").status == 404


def test_the_gbk_pages_are_what_the_issue_describes() -> None:
    _, headers, body = fetch("http://enc-gbk.synth.test/")
    assert headers["Content-Type"] == "text/html"
    assert "分布式网络爬虫的设计与实现".encode("gbk") in body
    assert b"charset" not in body
    _, headers, body = fetch("http://enc-gbk-wrong-meta.synth.test/")
    assert b'<meta charset="utf-8">' in body
    with pytest.raises(UnicodeDecodeError):
        body.decode("utf-8")


def test_the_idn_host_is_punycode_on_the_wire_and_linked_by_its_unicode_name() -> None:
    assert IDN_LABEL.encode("idna") == b"xn--p0xp4y9jao6v"
    _, _, body = fetch("http://enc-gbk.synth.test/")
    assert f'href="http://{IDN_LABEL}.synth.test/"'.encode("gbk") in body
    assert f"http://{IDN_HOST}/" in WEB.links_of("http://enc-gbk.synth.test/")
    status, headers, idn = fetch(f"http://{IDN_HOST}/")
    assert status == 200 and headers["Content-Type"] == "text/html; charset=utf-8"
    assert "网络爬虫站点" in idn.decode("utf-8")
    # The Unicode name is no host of this web: a crawler must send punycode.
    assert WEB.respond(f"{IDN_LABEL}.synth.test", "/").status == 404


def test_the_truth_has_every_encoding_page_with_its_title_and_encoding() -> None:
    encodings = expected_encodings(WEB)
    assert len(encodings) == 3 * len(CASES) + 2
    assert set(encodings) <= TRUTH
    titles = expected_titles(WEB, TRUTH)
    for url, (_, source) in encodings.items():
        assert titles[url], url
        assert source in ("bom", "header", "meta", "detected")
    assert encodings["http://enc-gbk.synth.test/"] == ("gbk", "detected")
    assert titles["http://enc-gbk.synth.test/"] == "分布式网络爬虫的设计与实现"
    assert encodings["http://enc-gbk-wrong-meta.synth.test/"] == ("gbk", "detected")
    assert encodings["http://enc-big5.synth.test/about.html"] == ("big5", "meta")
    assert encodings["http://enc-shift-jis.synth.test/"] == ("shift_jis", "header")
    assert encodings["http://enc-euc-kr.synth.test/"] == ("euc-kr", "meta")
    assert encodings["http://enc-windows-1251.synth.test/"] == ("windows-1251", "header")
    assert encodings["http://enc-utf-8-bom.synth.test/"] == ("utf-8", "bom")
    assert encodings[f"http://{IDN_HOST}/"] == ("utf-8", "header")


def test_expected_titles_cover_ordinary_pages_and_skip_what_has_none() -> None:
    titles = expected_titles(WEB, TRUTH)
    assert titles["http://h000.synth.test/"] == "h000.synth.test page 0"
    assert titles["http://h001.synth.test/base/index.html"] == "/base/index.html on host 1"
    for url in (
        "http://h010.synth.test/error.html",  # a 500
        "http://h010.synth.test/missing.html",  # a 404
        "http://h008.synth.test/old/page.html",  # a redirect
        "http://h011.synth.test/img/logo.png",  # not HTML
        "http://h001.synth.test/robots.txt",
    ):
        assert url not in titles, url
