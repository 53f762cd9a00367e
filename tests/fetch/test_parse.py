from __future__ import annotations

import resource
import subprocess
import sys
import tracemalloc
from urllib.parse import quote

import pytest

import ubipy.fetch.parse as parse_module
from ubipy.fetch.encoding import EncodingSource
from ubipy.fetch.parse import MAX_TITLE_LENGTH, ParsedPage, content_digest, parse_html
from ubipy.fetch.urls import host_key
from ubipy.steps import finished

URL = "http://example.com/dir/page.html"


def _page(html: str, url: str = URL) -> ParsedPage:
    return parse_html(html.encode(), url)


def test_title_is_whitespace_collapsed() -> None:
    page = _page("<html><head><title>\n  Hello \t  World\n</title></head></html>")
    assert page.title == "Hello World"


def test_first_title_wins_and_is_capped() -> None:
    page = _page(f"<title>{'x' * 5000}</title><title>second</title>")
    assert page.title == "x" * MAX_TITLE_LENGTH
    assert _page("<title>one</title><body><title>two</title>").title == "one"


@pytest.mark.parametrize(
    ("html", "title"),
    [
        # An icon's tooltip before the page's title, or in a page with none.
        ("<head><svg><title>Icon</title><path d='M0'/></svg><meta name=x><title>Page", "Page"),
        ("<body><svg viewBox='0 0 1 1'><g><title>Icon</title></g></svg><p>text</p>", None),
        # The drawing ends at the first element SVG does not have.
        ("<body><svg><path/></svg><div>x</div><title>After</title>", "After"),
    ],
)
def test_a_title_inside_an_inline_svg_is_not_the_pages(html: str, title: str | None) -> None:
    assert _page(html).title == title


def test_links_inside_an_inline_svg_are_links() -> None:
    page = _page("<svg><a href='/in-svg'><text>t</text></a></svg><a href='/after'>a</a>")
    assert page.links == ("http://example.com/in-svg", "http://example.com/after")
    # SVG 1.1's xlink:href, still common: dropped before (a review found).
    old_style = _page("<svg><a xlink:href='/x'><text>t</text></a></svg>")
    assert old_style.links == ("http://example.com/x",)


@pytest.mark.parametrize("html", ["<p>no title</p>", "<title>   </title>", "<title></title>"])
def test_missing_or_blank_title(html: str) -> None:
    assert _page(html).title is None


@pytest.mark.parametrize(
    ("link", "followed"),
    [
        ('<link rel="next" href="/list?page=3">', "http://example.com/list?page=3"),
        ('<link rel="prev" href="p1.html">', "http://example.com/dir/p1.html"),
        ('<LINK REL="Previous" HREF="p0.html">', "http://example.com/dir/p0.html"),
        ('<link rel="alternate" hreflang="fr" href="/fr/">', "http://example.com/fr/"),
        (
            '<link rel="alternate" media="handheld" href="//m.example.com/">',
            "http://m.example.com/",
        ),
        ('<link rel="alternate stylesheet" href="/dark.css">', None),
        ('<link rel="stylesheet" href="/style.css">', None),
        ('<link rel="icon alternate" href="/favicon.ico">', None),
        ('<link rel="canonical" href="/same">', None),  # the page itself, elsewhere
        ('<link rel="next nofollow" href="/no">', None),
        ('<link rel="next">', None),
        ('<link href="/no-rel">', None),
    ],
)
def test_a_link_element_to_another_page_is_followed(link: str, followed: str | None) -> None:
    # A series' next page and a page's other languages are often named only by <link>.
    page = _page(f"<html><head>{link}</head><body><p>text</p></body></html>")
    assert page.links == ((followed,) if followed else ())
    assert page.links_nofollow == ("nofollow" in link)


def test_each_link_kind_in_document_order() -> None:
    page = _page(
        """<html><body>
        <a href="/a">a</a>
        <map><area href="/area" alt=""></map>
        <iframe src="/iframe"></iframe>
        <a>no href</a><a name="anchor"></a>
        <img src="/img.png"><link href="/style.css" rel="stylesheet">
        </body></html>"""
    )
    assert page.links == (
        "http://example.com/a",
        "http://example.com/area",
        "http://example.com/iframe",
    )
    frames = _page('<frameset><frame src="f1.html"><frame src="/f2.html"></frameset>')
    assert frames.links == ("http://example.com/dir/f1.html", "http://example.com/f2.html")


@pytest.mark.parametrize(
    ("content", "link"),
    [
        ("0; url=/en/", "http://example.com/en/"),
        ("0;URL='moved.html'", "http://example.com/dir/moved.html"),
        ("3, 'http://other.example/x'", "http://other.example/x"),
        (".5 ; url = /q", "http://example.com/q"),
        ("10 /plain", "http://example.com/plain"),
        ("5", None),  # the page itself again
        ("0; url=", None),
        ("url=/x", None),  # no time: not a refresh (WHATWG)
        # The time followed by anything but ";", "," or white space: no refresh.
        ("5abc", None),
        ("0url=/x", None),
        ("0x; url=/y", None),
        ("0\u00a0url=/nb", None),
    ],
)
def test_a_meta_refresh_is_a_link(content: str, link: str | None) -> None:
    # A site whose root page only refreshes to /en/ used to end the crawl at its seed.
    page = _page(f'<html><head><meta http-equiv="Refresh" content="{content}"></head></html>')
    assert page.links == ((link,) if link else ())


def test_a_meta_refresh_follows_the_pages_base_and_nofollow() -> None:
    based = _page('<base href="http://b.example/s/"><meta http-equiv=refresh content="0;url=x">')
    assert based.links == ("http://b.example/s/x",)
    barred = _page(
        '<meta name="robots" content="nofollow"><meta http-equiv=refresh content="0;url=/x">'
    )
    assert barred.links == () and barred.nofollow


def test_relative_resolution_dedup_and_fragments() -> None:
    page = _page(
        """<a href="other.html#top">1</a>
        <a href="../up">2</a>
        <a href="other.html">3</a>
        <a href="http://EXAMPLE.com:80/dir/other.html#x">4</a>
        <a href="#local">5</a>
        <a href="?q=1">6</a>
        <a href="  https://other.org  ">7</a>"""
    )
    assert page.links == (
        "http://example.com/dir/other.html",
        "http://example.com/up",
        "http://example.com/dir/page.html",
        "http://example.com/dir/page.html?q=1",
        "https://other.org/",
    )
    assert page.links_refused == 0


def test_each_link_comes_with_its_host_key() -> None:
    # Found as each link is resolved (a plain path takes the page's host, a plain
    # absolute link its own), so the crawl does not scan each URL again for it.
    page = _page(
        """<a href="/a">plain path</a>
        <a href="b.html">relative</a>
        <a href="https://other.org/x">plain absolute</a>
        <a href="http://u:p@third.test:8080/">userinfo and port</a>
        <a href="/a">a repeat</a>
        <a href="http://网络爬虫.example/">IDN</a>"""
    )
    assert page.links == (
        "http://example.com/a",
        "http://example.com/dir/b.html",
        "https://other.org/x",
        "http://third.test:8080/",
        "http://xn--p0xp4y9jao6v.example/",
    )
    assert page.hosts == tuple(host_key(link) for link in page.links)
    assert page.hosts[2:] == ("other.org", "third.test:8080", "xn--p0xp4y9jao6v.example")


def test_base_href() -> None:
    page = _page('<head><base href="http://cdn.example.org/x/"></head><a href="y">y</a>')
    assert page.links == ("http://cdn.example.org/x/y",)


def test_relative_base_href_and_first_base_wins() -> None:
    page = _page(
        '<head><base href="../other/"><base href="http://ignored.org/"></head><a href="y">y</a>'
    )
    assert page.links == ("http://example.com/other/y",)


def test_base_applies_to_links_before_it() -> None:
    page = _page('<a href="y">y</a><base href="/b/">')
    assert page.links == ("http://example.com/b/y",)


def test_unusable_base_is_ignored() -> None:
    page = _page('<base href="javascript:alert(1)"><a href="y">y</a>')
    assert page.links == ("http://example.com/dir/y",)


@pytest.mark.parametrize(
    "rel", ["nofollow", "external NoFollow", "NOFOLLOW noopener", " nofollow "]
)
def test_rel_nofollow_skipped_and_counted(rel: str) -> None:
    page = _page(
        f'<a href="/keep">k</a><a rel="{rel}" href="/skip">s</a><area rel="{rel}" href="/s2">'
    )
    assert page.links == ("http://example.com/keep",)
    assert page.links_nofollow == 2
    assert not page.nofollow


def test_rel_that_merely_contains_nofollow_is_followed() -> None:
    page = _page('<a rel="nofollowers" href="/keep">k</a>')
    assert page.links == ("http://example.com/keep",)
    assert page.links_nofollow == 0


@pytest.mark.parametrize(
    ("content", "nofollow", "noindex"),
    [
        ("nofollow", True, False),
        ("NoIndex, NoFollow", True, True),
        ("noindex", False, True),
        ("none", True, True),
        ("index,follow", False, False),
        ("noindex nofollow", True, True),
        ("", False, False),
    ],
)
def test_meta_robots(content: str, nofollow: bool, noindex: bool) -> None:
    page = _page(
        f'<head><meta name="Robots" content="{content}"></head><a href="/a">a</a><a href="/b">b</a>'
    )
    assert page.nofollow is nofollow
    assert page.noindex is noindex
    if nofollow:
        assert page.links == ()
        assert page.links_nofollow == 2
    else:
        assert page.links == ("http://example.com/a", "http://example.com/b")


def test_meta_for_our_product_token_and_not_others() -> None:
    assert _page('<meta name="ubipy" content="nofollow"><a href="/a">a</a>').nofollow
    other = _page('<meta name="googlebot" content="nofollow"><a href="/a">a</a>')
    assert not other.nofollow
    assert other.links == ("http://example.com/a",)


def test_refused_links_are_counted() -> None:
    page = _page(
        """<a href="mailto:me@example.com">m</a>
        <a href="javascript:void(0)">j</a>
        <a href="ftp://example.com/f">f</a>
        <a href="http://exa mple.com/">bad host</a>
        <a href="javascript:void(0)">j again</a>
        <a href="/fine">ok</a>"""
    )
    assert page.links == ("http://example.com/fine",)
    assert page.links_refused == 5


def test_links_with_credentials_lose_them_and_are_counted() -> None:
    page = _page(
        """<a href="http://user:pass@example.com/fine">a</a>
        <a href="/fine">b</a>
        <a href="//u@other.test/x">c</a>
        <a href="http://@example.com/empty">d</a>"""
    )
    assert page.links == (
        "http://example.com/fine",
        "http://other.test/x",
        "http://example.com/empty",
    )
    assert page.links_stripped == 2


def test_huge_hrefs_are_refused_not_fatal() -> None:
    page = _page(f'<a href="/{"a" * 10_000}">x</a><a href="/{"b" * 3000}">y</a><a href="/ok">z</a>')
    assert page.links == ("http://example.com/ok",)
    assert page.links_refused == 2


def test_max_links_cap() -> None:
    html = "".join(f'<a href="/p{i}">{i}</a>' for i in range(50))
    page = parse_html(html.encode(), URL, max_links=10)
    assert page.links == tuple(f"http://example.com/p{i}" for i in range(10))
    # Not refused (nothing is wrong with them): cut, and counted as such.
    assert (page.links_refused, page.links_cut) == (0, 40)


def test_max_links_cap_does_not_count_duplicates() -> None:
    html = "".join(f'<a href="/p{i % 3}">{i}</a>' for i in range(20)) + '<a href="/new">n</a>'
    page = parse_html(html.encode(), URL, max_links=3)
    assert len(page.links) == 3
    assert (page.links_refused, page.links_cut) == (0, 1)


def test_refused_hrefs_are_tried_no_more_than_twice_the_cap(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cap counted the links kept: a page of 300,000 distinct hrefs, each refused,
    had them all resolved, seconds of the peer's loop (found by a review)."""
    tried: list[str] = []
    resolve = parse_module.resolve_link  # type: ignore[attr-defined]

    def counted(href: str, base: str | None = None) -> tuple[str, str, bool]:
        tried.append(href)
        return resolve(href, base)

    monkeypatch.setattr(parse_module, "resolve_link", counted)
    bad = "".join(f'<a href="mailto:u{i}@a.test">m</a>' for i in range(100))
    good = "".join(f'<a href="/p{i}">{i}</a>' for i in range(5))
    page = parse_html((bad + good).encode(), URL, max_links=10)
    assert len(tried) == 20 and page.links == ()
    assert (page.links_refused, page.links_cut) == (20, 85)


def test_many_links() -> None:
    html = "<body>" + "".join(f'<a href="/p{i}">{i}</a>' for i in range(20_000)) + "</body>"
    page = parse_html(html.encode(), URL)
    assert len(page.links) == 10_000
    assert (page.links_refused, page.links_cut) == (0, 10_000)


def test_encoding_from_argument() -> None:
    body = "<title>Caf\u00e9 \u20ac</title><a href='/caf\u00e9'>x</a>".encode("cp1252")
    assert parse_html(body, URL, encoding="windows-1252").title == "Café €"
    assert parse_html(body, URL, encoding="ISO-8859-1").title == "Café €"
    assert parse_html(body, URL, encoding="windows-1252").links == ("http://example.com/caf%C3%A9",)


def test_encoding_argument_overrides_meta() -> None:
    body = '<meta charset="utf-8"><title>Caf\u00e9</title>'.encode("latin-1")
    assert parse_html(body, URL, encoding="latin-1").title == "Café"


def test_encoding_from_meta_charset() -> None:
    body = '<html><head><meta charset="iso-8859-1"><title>Caf\u00e9</title></head></html>'
    assert parse_html(body.encode("latin-1"), URL).title == "Café"
    http_equiv = (
        '<meta http-equiv="Content-Type" content="text/html; charset=ISO-8859-1">'
        "<title>Caf\u00e9</title>"
    )
    assert parse_html(http_equiv.encode("latin-1"), URL).title == "Café"


def test_unlabelled_utf8_is_read_as_utf8() -> None:
    body = "<title>Caf\u00e9 \u65e5\u672c</title><a href='/\u00e9'>x</a>".encode()
    page = parse_html(body, URL)
    assert page.title == "Café 日本"
    assert page.links == ("http://example.com/%C3%A9",)


def test_unlabelled_legacy_bytes_fall_back_to_windows_1252() -> None:
    body = "<title>Caf\u00e9</title>".encode("latin-1")
    assert parse_html(body, URL).title == "Café"


def test_unknown_encoding_argument_falls_back() -> None:
    body = "<title>Caf\u00e9</title>".encode()
    assert parse_html(body, URL, encoding="x-no-such-charset").title == "Café"


def test_utf8_bom() -> None:
    assert parse_html(b"\xef\xbb\xbf<title>Caf\xc3\xa9</title>", URL).title == "Café"


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"   \n\t ",
        b"\x00",
        bytes(range(256)) * 40,
        b"\xff\xfe\x00\x00garbage",
        b"<html><body><a href='/x'><div></p></span><title>",
        b"<<<<>>>><a href=>\x00<a href='/\x00'><a href=\"/ok\"",
        b"<!DOCTYPE html><!-- unterminated comment <a href='/c'>",
        b"<?xml version='1.0' encoding='utf-8'?><html><a href='/x'>x</a></html>",
        b"<svg><a href='/in-svg'>s</a></svg><math><mi>x</mi></math>",
        b"<" * 100_000,
    ],
)
def test_hostile_input_does_not_raise(body: bytes) -> None:
    page = parse_html(body, URL)
    assert isinstance(page, ParsedPage)
    assert all(link.startswith("http") for link in page.links)


def test_empty_body_is_empty_page() -> None:
    page = parse_html(b"", URL)
    assert page == ParsedPage(
        title=None, links=(), nofollow=False, noindex=False, links_refused=0, links_nofollow=0
    )


def test_malformed_html_still_yields_links() -> None:
    page = parse_html(b"<html><body><div><a href='/a'>a<a href=/b>b</div></td><a href='/c'", URL)
    assert "http://example.com/a" in page.links
    assert "http://example.com/b" in page.links


def test_parsed_page_is_frozen() -> None:
    page = _page("<title>t</title>")
    with pytest.raises(AttributeError):
        page.title = "changed"  # type: ignore[misc]


def test_content_digest() -> None:
    a = content_digest(b"hello")
    assert a == content_digest(b"hello")
    assert a != content_digest(b"hello!")
    assert len(a) == 32
    int(a, 16)
    assert len(content_digest(b"")) == 32


# -- encodings (the sniffing itself: test_encoding.py) -------------------------------

LEGACY = [
    # (Python codec, WHATWG name, title, a folder name in the script)
    ("gbk", "gbk", "分布式网络爬虫的设计与实现", "文章"),
    ("big5", "big5", "分散式網路爬蟲的設計與實現", "文章"),
    ("shift_jis", "shift_jis", "分散型ウェブクローラの設計と実装", "記事"),
    ("euc_kr", "euc-kr", "분산 웹 크롤러의 설계와 구현", "문서"),
    ("cp1251", "windows-1251", "Проектирование распределённого поискового робота", "статьи"),
]


def _legacy_page(codec: str, title: str, folder: str, head: str = "") -> bytes:
    return (
        f"<html><head>{head}<title>{title}</title></head><body><h1>{title}</h1>"
        f"<p>{'plain ascii filler ' * 50}</p>"
        f'<a href="/{folder}/1.html">{title[:4]}</a> <a href="?q=1">{title[-3:]}</a>'
        "</body></html>"
    ).encode(codec)


def _article(folder: str) -> str:
    # Browsers write a path in UTF-8 percent-escapes, whatever the page's encoding.
    return f"http://example.com/{quote(folder)}/1.html"


@pytest.mark.parametrize(("codec", "name", "title", "folder"), LEGACY)
def test_legacy_pages_from_every_source(codec: str, name: str, title: str, folder: str) -> None:
    body = _legacy_page(codec, title, folder)
    cases = [
        (parse_html(body, URL, encoding=name), EncodingSource.HEADER),
        (
            parse_html(_legacy_page(codec, title, folder, f'<meta charset="{name}">'), URL),
            EncodingSource.META,
        ),
        (parse_html(body, URL), EncodingSource.DETECTED),
    ]
    for page, source in cases:
        assert page.title == title, source
        assert (page.encoding, page.encoding_source) == (name, source)
        assert page.links == (_article(folder), "http://example.com/dir/page.html?q=1")


def test_the_issues_two_gbk_pages() -> None:
    # No declaration: was '·Ö²¼Ê½ÍøÂçÅÀ³æµÄÉè¼ÆÓëÊµÏÖ'. A <meta> saying utf-8: was '�ֲ�ʽ...'.
    codec, _, title, folder = LEGACY[0]
    for head in ("", '<meta charset="utf-8">', '<meta charset="UTF-8"/>'):
        page = parse_html(_legacy_page(codec, title, folder, head), URL)
        assert page.title == title
        assert (page.encoding, page.encoding_source) == ("gbk", EncodingSource.DETECTED)
        assert page.links[0] == _article(folder)


def test_an_invalid_byte_does_not_end_the_page() -> None:
    # libxml2's own converters stop at the first invalid sequence and drop the rest of
    # the document; read here, it is one U+FFFD and the links after it are kept.
    body = _legacy_page("gbk", "标题", "文章", '<meta charset="gbk">')
    broken = body.replace(b"<a href", b"\xff\xff<a href", 1)
    page = parse_html(broken, URL)
    assert page.title == "标题"
    assert page.links == (_article("文章"), "http://example.com/dir/page.html?q=1")


def test_the_source_is_recorded_for_utf8_and_ascii_pages() -> None:
    utf8 = "<title>Café 日本</title>".encode()
    assert parse_html(utf8, URL, encoding="utf-8").encoding_source is EncodingSource.HEADER
    assert parse_html(utf8, URL).encoding_source is EncodingSource.DETECTED
    plain = parse_html(b"<title>plain</title>", URL)
    assert (plain.encoding, plain.encoding_source) == ("utf-8", EncodingSource.DEFAULT)
    bom = parse_html(b"\xef\xbb\xbf<title>Caf\xc3\xa9</title>", URL, encoding="latin-1")
    assert (bom.title, bom.encoding, bom.encoding_source) == ("Café", "utf-8", EncodingSource.BOM)
    ascii_meta = parse_html(b'<meta charset="koi8-r"><title>plain</title>', URL)
    assert (ascii_meta.encoding, ascii_meta.encoding_source) == ("koi8-r", EncodingSource.META)
    nofollow = parse_html(b'<meta name="robots" content="nofollow"><title>t</title>', URL)
    assert nofollow.encoding_source is EncodingSource.DEFAULT
    assert parse_html(b"", URL).encoding is None


def test_utf16_with_a_bom() -> None:
    body = "<title>日本</title><a href='/页'>x</a>".encode("utf-16")  # with its BOM
    page = parse_html(body, URL)
    assert page.title == "日本"
    assert page.links == ("http://example.com/%E9%A1%B5",)
    assert page.encoding_source is EncodingSource.BOM


def test_an_idn_link_in_a_legacy_page_becomes_punycode() -> None:
    body = '<title>t</title><a href="http://网络爬虫.example/">站点</a>'.encode("gbk")
    assert parse_html(body, URL, encoding="gbk").links == ("http://xn--p0xp4y9jao6v.example/",)


def test_one_element_with_many_attributes_costs_linear_time() -> None:
    """libxml2 builds a tree in time quadratic in one element's attributes: a 0.9 MB
    page of one tag with 100,000 distinct attributes held the crawl's loop 10.8 s, and
    a page at the body cap would hold it for hours. Read as events it takes linear
    time. A tag of 400,000 attributes (3.9 MB), in a process allowed 20 s of CPU: about
    0.1 s now, minutes the quadratic way."""
    code = (
        "from ubipy.fetch.parse import parse_html\n"
        "attrs = b' '.join(b'a%d=1' % i for i in range(400_000))\n"
        "body = b'<html><body><p ' + attrs + b'>x</p><a href=/after>a</a></body></html>'\n"
        "print(parse_html(body, 'http://a.test/').links)\n"
    )

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (20, 20))

    done = subprocess.run(
        [sys.executable, "-c", code], preexec_fn=limit, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "http://a.test/after" in done.stdout


@pytest.mark.parametrize("codec", ["gbk", "shift_jis", "iso-8859-1", "utf-16"])
def test_an_xhtml_page_in_a_legacy_encoding_with_an_xml_declaration_is_read(codec: str) -> None:
    """lxml refuses a decoded page that opens with an XML declaration, and XHTML pages
    in legacy encodings do: they came out empty, no title and no link (found by a
    review). The declaration goes before the parse."""
    title = {"gbk": "中文标题", "shift_jis": "日本語", "iso-8859-1": "Café", "utf-16": "é"}[codec]
    html = (
        f'<?xml version="1.0" encoding="{codec}"?>\n'
        '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Strict//EN" '
        '"http://www.w3.org/TR/xhtml1/DTD/xhtml1-strict.dtd">\n'
        f'<html xmlns="http://www.w3.org/1999/xhtml"><head><meta charset="{codec}" />'
        f'<title>{title}</title></head><body><a href="/next">next</a></body></html>'
    )
    page = parse_html(html.encode(codec), URL)
    assert page.title == title
    assert page.links == ("http://example.com/next",)


@pytest.mark.parametrize(
    ("codec", "href", "link"),
    [
        # Its query in the page's encoding, the path in UTF-8, as a browser sends them.
        ("gbk", "/s?q=中文", "http://example.com/s?q=%D6%D0%CE%C4"),
        ("gbk", "/中文?q=1", "http://example.com/%E4%B8%AD%E6%96%87?q=1"),
        ("gbk", "/s?q=中文#top", "http://example.com/s?q=%D6%D0%CE%C4"),
        ("shift_jis", "/s?q=日本", "http://example.com/s?q=%93%FA%96{"),  # 本: 96 7B
        ("iso-8859-1", "/p?name=José", "http://example.com/p?name=Jos%E9"),
        # A character the encoding lacks: its &#N; escape, percent-encoded whole.
        ("iso-8859-1", "/p?q=中&x=1", "http://example.com/p?q=%26%2320013%3B&x=1"),
        ("gbk", "/p?q=😀", "http://example.com/p?q=%26%23128512%3B"),  # no 4-byte GBK
        # Controls escaped: ISO-2022-JP's escape sequences.
        ("iso-2022-jp", "/p?q=中文", "http://example.com/p?q=%1B$BCfJ8%1B(B"),
        ("utf-8", "/s?q=中文", "http://example.com/s?q=%E4%B8%AD%E6%96%87"),
        # Spaces at the ends stripped and tabs and newlines removed first, as in UTF-8
        # (escaped, an attribute wrapped across lines was another URL: a review).
        ("windows-1252", " /s?q=café ", "http://example.com/s?q=caf%E9"),
        ("windows-1252", "/s?q=ca\nfé\r\n", "http://example.com/s?q=caf%E9"),
        ("gbk", "/s?q=中文&x=\t1", "http://example.com/s?q=%D6%D0%CE%C4&x=1"),
    ],
)
def test_a_link_s_query_is_in_its_page_s_encoding(codec: str, href: str, link: str) -> None:
    """WHATWG URL, "encoding-parse a URL": a GBK page's '?q=中文' was sent in UTF-8,
    which a server reading GBK takes for other words (found by a review)."""
    html = f'<html><head><meta charset="{codec}"></head><body><a href="{href}">x</a></body>'
    page = parse_html(html.encode(codec, "xmlcharrefreplace"), URL)
    assert page.links == (link,)


def test_nothing_of_a_page_s_text_is_held_after_its_parse() -> None:
    """The text read while looking for the title is let go: a 10 MB page of tiny text
    nodes held 104 MB of them until the thread's next parse (found by a review)."""
    body = b"<html><title>t</title><body>" + b"ab<br>" * 200_000 + b"</body></html>"
    parse_html(b"<p>warm</p>", URL)  # the thread's parser made beforehand
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        page = parse_html(body, URL)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert page.title == "t"
    assert held < 100_000  # the 1.2 MB page's 400,000 pieces of text: about 20 MB


@pytest.mark.parametrize("charset", [None, "windows-1251"])
def test_a_page_of_nul_bytes_costs_no_more_than_its_size(charset: str | None) -> None:
    """libxml2 reports each NUL alone: 4 MB of them (UTF-16 without its BOM, a binary
    file served as HTML) took 340 MB of Python text while they were read, and 900 MB
    in all (QA). HTML ignores them (WHATWG's tree builder drops a NUL)."""
    body = b"<html><title>t</title><body>" + b"\0" * (4 << 20) + b"<a href=/x>x</a>"
    parse_html(b"<p>warm</p>", URL, encoding=charset)
    tracemalloc.start()
    try:
        page = parse_html(body, URL, encoding=charset)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert (page.title, page.links) == ("t", ("http://example.com/x",))
    assert peak < 3 * len(body)


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
@pytest.mark.parametrize("title", ["Hello", "Привет мир", "分布式网络爬虫的设计与实现"])
def test_utf16_without_its_bom_is_read_as_utf16(codec: str, title: str) -> None:
    # Read as UTF-8, its title was None (a NUL every other byte), then, its NULs
    # dropped, junk for any title not in ASCII (a review).
    html = f'<html><head><title>{title}</title></head><a href="/next">next</a></html>'
    page = parse_html(html.encode(codec), URL)
    assert (page.title, page.links) == (title, ("http://example.com/next",))
    assert (page.encoding, page.encoding_source) == (
        codec.replace("-le", "le").replace("-be", "be"),
        EncodingSource.DETECTED,
    )


_FEED = 256 * 1024  # what parse_html_steps feeds at a time
_LONG = "<p>" + "x" * (_FEED - 20) + "</p>"  # puts what follows across a feed's edge


@pytest.mark.parametrize(
    ("body", "charset"),
    [
        (b'<title>t</title><a href="/a">a</a>', None),
        (
            f'<html><head><title>a {_LONG[:-30]} title</title></head><a href="/a">a</a>'.encode(),
            None,
        ),
        ((_LONG + '<meta name="robots" content="nofollow"><a href="/a">a</a>').encode(), None),
        (("<title>分布式网络爬虫</title>" + _LONG + '<a href="/q?x=中">q</a>').encode("gbk"), None),
        (
            ('<?xml version="1.0" encoding="Shift_JIS"?><html><title>日本</title>' + _LONG).encode(
                "shift_jis"
            ),
            "shift_jis",
        ),
        ((_LONG + "\0" * 10 + '<base href="http://b.test/d/"><a href="x">x</a>').encode(), None),
        ((_LONG * 3 + "".join(f'<a href="/{i}">{i}</a>' for i in range(3000))).encode(), None),
    ],
)
def test_a_page_parsed_in_steps_is_the_page_parsed_whole(body: bytes, charset: str | None) -> None:
    """A large page is parsed a slice at a time (the event loop runs between two),
    by a parser of its own: what it finds is what the whole document's parse finds."""
    steps = parse_module.parse_html_steps(body, "http://a.test/p", encoding=charset)
    assert finished(steps) == parse_html(body, "http://a.test/p", encoding=charset)


def test_the_links_of_a_page_parsed_in_steps_are_resolved_in_steps() -> None:
    """20,000 hrefs took 100-230 ms to resolve in one step (a review): a step every
    thousand now, and the page found is the page parsed whole."""
    body = "".join(f'<a href="/{i}">{i}</a>' for i in range(5000)).encode()
    steps = parse_module.parse_html_steps(body, "http://a.test/p")
    taken = 0
    while True:
        try:
            next(steps)
        except StopIteration as done:
            page = done.value
            break
        taken += 1
    assert taken >= 5
    assert page == parse_html(body, "http://a.test/p")
    assert len(page.links) == 5000
