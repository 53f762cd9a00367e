"""Encoding sniffing, source by source, in the WHATWG order: BOM, header, <meta>,
detection, default; and the named legacy encodings of issue #16 through each."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ubipy.fetch import encoding, labels
from ubipy.fetch.encoding import (
    DEFAULT_LEGACY,
    PRESCAN_BYTES,
    EncodingSource,
    Sniffed,
    codec_of,
    decode,
    detect,
    lookup,
    prescan,
    sniff,
)

BOM = EncodingSource.BOM
HEADER = EncodingSource.HEADER
META = EncodingSource.META
DETECTED = EncodingSource.DETECTED
DEFAULT = EncodingSource.DEFAULT

# The issue's page: a thesis title in GBK.
THESIS = "分布式网络爬虫的设计与实现"
# One text per named encoding: (WHATWG name, title, a paragraph).
TEXTS = {
    "gbk": (THESIS, "网络爬虫是一种按照一定的规则，自动地抓取万维网信息的程序或者脚本。"),
    "big5": (
        "分散式網路爬蟲的設計與實現",
        "網路爬蟲是一種按照一定的規則，自動地擷取全球資訊網資訊的程式。",
    ),
    "shift_jis": (
        "分散型ウェブクローラの設計と実装",
        "ウェブクローラは、ウェブページを自動的に収集するプログラムです。",
    ),
    "euc-kr": (
        "분산 웹 크롤러의 설계와 구현",
        "웹 크롤러는 조직적, 자동화된 방법으로 월드 와이드 웹을 탐색하는 프로그램이다.",
    ),
    "windows-1251": (
        "Проектирование распределённого поискового робота",
        "Поисковый робот — программа, являющаяся составной частью поисковой системы.",
    ),
    # Latin code pages the detector scores alike (alphabets.py tells them apart).
    "windows-1250": (
        "Návrh robota, který čte stránky a řídí se pravidly webů",
        "Webový robot je program, který automaticky prochází stránky a ukládá jejich "
        "obsah; před každým požadavkem čte soubor robots.txt a řídí se jím.",
    ),
    "windows-1257": (
        "Paskirstyto žiniatinklio roboto kūrimas ir įgyvendinimas",
        "Žiniatinklio robotas – tai programa, kuri automatiškai naršo internete ir renka "
        "puslapių turinį; prieš kiekvieną užklausą ji perskaito robots.txt failą.",
    ),
}
FILLER = " ".join(["lorem ipsum dolor sit amet consectetur adipiscing"] * 40)


def page(name: str, head: str = "", *, filler: bool = True, paragraph: bool = True) -> bytes:
    """A page in encoding `name`: its title, maybe a paragraph, links with text in the
    script, and (by default) a lot of ASCII, as real pages have."""
    title, text = TEXTS[name]
    html = f"<!DOCTYPE html><html><head>{head}<title>{title}</title></head><body><h1>{title}</h1>"
    if filler:
        html += f"<p>{FILLER}</p>"
    if paragraph:
        html += f"<p>{text}</p>"
    html += f'<ul><li><a href="/a.html">{text[:4]}</a></li><li><a href="/">{title[:3]}</a></ul>'
    return (html + "</body></html>\n").encode(codec_of(name))


@pytest.fixture
def no_detector(monkeypatch: pytest.MonkeyPatch) -> None:
    """The detector must not be called: declared, ASCII and UTF-8 pages do not pay for it."""

    def refuse(body: bytes) -> str | None:
        raise AssertionError("the detector was called")

    monkeypatch.setattr(encoding, "detect", refuse)


# -- labels -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "name"),
    [
        ("utf-8", "utf-8"),
        ("UTF8", "utf-8"),
        ("  Utf-8\t", "utf-8"),
        ("gb2312", "gbk"),
        ("GBK", "gbk"),
        ("x-gbk", "gbk"),
        ("gb18030", "gb18030"),
        ("big5", "big5"),
        ("Big5-HKSCS", "big5"),
        ("Shift_JIS", "shift_jis"),
        ("sjis", "shift_jis"),
        ("windows-31j", "shift_jis"),
        ("euc-kr", "euc-kr"),
        ("ks_c_5601-1987", "euc-kr"),
        ("windows-1251", "windows-1251"),
        ("cp1251", "windows-1251"),
        # The Encoding Standard reads Latin-1 and ASCII as windows-1252, as browsers do.
        ("iso-8859-1", "windows-1252"),
        ("us-ascii", "windows-1252"),
        ("latin1", "windows-1252"),
        ("iso-8859-9", "windows-1254"),
        ("tis-620", "windows-874"),
        ("utf-16", "utf-16le"),
        ("koi8-r", "koi8-r"),
    ],
)
def test_labels_are_the_encoding_standards(label: str, name: str) -> None:
    assert lookup(label) == name


@pytest.mark.parametrize("label", [None, "", "utf-9", "x-no-such", "replacement", "iso-2022-kr"])
def test_unknown_labels_give_nothing(label: str | None) -> None:
    assert lookup(label) is None


def test_every_encoding_has_a_python_codec_that_reads_like_a_browser() -> None:
    assert codec_of("gbk") == "gb18030"  # the standard's GBK decoder is gb18030's
    assert codec_of("shift_jis") == "cp932"
    assert codec_of("euc-kr") == "cp949"
    assert codec_of("big5") == "big5hkscs"
    for name in {lookup(label) for label in labels._LABELS}:
        assert name is not None
        b"ab".decode(codec_of(name))  # the codec exists


# -- the order ----------------------------------------------------------------------


def test_a_bom_wins_over_header_and_meta() -> None:
    body = b'\xef\xbb\xbf<meta charset="gbk"><title>\xc3\xa9</title>'
    assert sniff(body, "iso-8859-1") == Sniffed("utf-8", BOM)
    le = "<title>日本</title>".encode("utf-16-le")
    assert sniff(b"\xff\xfe" + le, "utf-8") == Sniffed("utf-16le", BOM)
    be = "<title>日本</title>".encode("utf-16-be")
    assert sniff(b"\xfe\xff" + be) == Sniffed("utf-16be", BOM)
    assert decode(b"\xff\xfe" + le, Sniffed("utf-16le", BOM)) == "<title>日本</title>"


@pytest.mark.parametrize("name", list(TEXTS))
def test_the_header_wins_over_the_meta(name: str, no_detector: None) -> None:
    body = page(name, '<meta charset="iso-8859-5">')
    assert sniff(body, name) == Sniffed(name, HEADER)


def test_a_header_is_believed_even_when_the_bytes_disagree(no_detector: None) -> None:
    # As in browsers: the page is read as the server says (invalid bytes become U+FFFD).
    body = page("gbk")
    assert sniff(body, "utf-8") == Sniffed("utf-8", HEADER)
    assert "\ufffd" in decode(body, sniff(body, "utf-8"))


def test_an_unknown_header_label_falls_through_to_the_meta(no_detector: None) -> None:
    body = page("big5", '<meta charset="big5">')
    assert sniff(body, "x-klingon") == Sniffed("big5", META)


@pytest.mark.parametrize("name", list(TEXTS))
def test_meta_charset_and_http_equiv(name: str, no_detector: None) -> None:
    assert sniff(page(name, f'<meta charset="{name}">')) == Sniffed(name, META)
    pragma = f"<meta http-equiv='Content-Type' content='text/html; charset={name.upper()}'>"
    assert sniff(page(name, pragma)) == Sniffed(name, META)
    unquoted = f"<META HTTP-EQUIV=content-type CONTENT='text/html;charset={name}'>"
    assert sniff(page(name, unquoted)) == Sniffed(name, META)


def test_the_prescan_follows_the_standards_rules() -> None:
    assert prescan(b'<html><head><meta charset="koi8-r">') == "koi8-r"
    assert prescan(b"<meta charset=gb2312>") == "gbk"
    assert prescan(b"<meta charset='euc-kr'/>") == "euc-kr"
    # A comment is skipped; the first <meta> that declares something counts.
    assert prescan(b'<!-- <meta charset="big5"> --><meta charset="sjis">') == "shift_jis"
    assert prescan(b'<meta name="x"><meta charset="x-junk"><meta charset="big5">') == "big5"
    assert prescan(b'<meta charset="euc-kr"><meta charset="big5">') == "euc-kr"
    # content= counts only with http-equiv=content-type, and charset= wins over it.
    assert prescan(b'<meta content="text/html; charset=big5">') is None
    assert prescan(b'<meta name="description" content="charset=big5">') is None
    both = b'<meta http-equiv="content-type" content="text/html; charset=big5" charset="gbk">'
    assert prescan(both) == "gbk"
    # UTF-16 in a <meta> means UTF-8: the prescan read the bytes as ASCII to find it.
    assert prescan(b'<meta charset="utf-16le">') == "utf-8"
    # Unterminated: nothing.
    assert prescan(b'<!-- <meta charset="big5">') is None
    assert prescan(b'<meta charset="big5"') is None
    assert prescan(b"<metadata charset=big5>") is None
    # Past the prescan's window: not seen.
    late = b"<p>" + b"x" * PRESCAN_BYTES + b'<meta charset="big5">'
    assert prescan(late) is None


def test_a_declaration_that_the_bytes_contradict_is_overruled_by_detection() -> None:
    # The issue's second page: GBK whose <meta> says UTF-8.
    body = page("gbk", '<meta charset="utf-8">')
    assert sniff(body) == Sniffed("gbk", DETECTED)
    # A legacy declaration over UTF-8 bytes (a site moved to UTF-8, its old template kept).
    moved = f'<meta charset="gb2312"><title>{THESIS}</title><p>{FILLER}</p>'.encode()
    assert sniff(moved) == Sniffed("utf-8", DETECTED)


@pytest.mark.parametrize("head", ['<meta charset="utf-8">', ""], ids=["declared", "undeclared"])
def test_utf8_with_a_character_cut_in_two_is_still_utf8(head: str, no_detector: None) -> None:
    # A CMS cut a description inside a character: browsers show one U+FFFD, not a
    # page of windows-1252 mojibake.
    title, text = TEXTS["gbk"]
    cut = text.encode()[:-4]
    body = (
        f"<html><head>{head}<title>{title}</title></head><body><p>".encode()
        + cut
        + f"</p><p>{text}</p></body></html>".encode()
    )
    sniffed = sniff(body)
    assert sniffed.name == "utf-8"
    decoded = decode(body, sniffed)
    assert title in decoded and text in decoded and decoded.count("\ufffd") == 1


def test_a_legacy_declaration_stands_over_a_few_bad_bytes(no_detector: None) -> None:
    # Neither GBK nor UTF-8 can read it all: the page is read as it says, as browsers do.
    body = page("gbk", '<meta charset="gbk">').replace(b"<ul>", b"\xff\xff<ul>")
    assert sniff(body) == Sniffed("gbk", META)
    assert decode(body, sniff(body)).count("\ufffd") == 2


def test_a_body_cut_inside_a_character_keeps_its_meta(no_detector: None) -> None:
    # The size cap may cut a page in the middle of a two-byte character.
    body = page("gbk", '<meta charset="gbk">')
    assert sniff(body[:-20]) == Sniffed("gbk", META)
    cut = body[: body.index("程序".encode("gbk")) + 1]
    assert sniff(cut) == Sniffed("gbk", META)


def test_ascii_and_utf8_without_a_declaration_never_reach_the_detector(
    no_detector: None,
) -> None:
    assert sniff(b"<title>plain</title>") == Sniffed("utf-8", DEFAULT)
    assert sniff("<title>Café 日本</title>".encode()) == Sniffed("utf-8", DETECTED)
    # A declared page with ASCII bytes is believed at once.
    assert sniff(b'<meta charset="big5"><title>x</title>') == Sniffed("big5", META)


# -- detection ----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(TEXTS))
@pytest.mark.parametrize(
    ("filler", "paragraph"),
    [(True, True), (False, True), (True, False), (False, False)],
    # title-only: the title and two short link texts, a lot of ASCII: little to go on
    ids=["long", "no-filler", "title-only", "tiny"],
)
def test_undeclared_pages_are_detected(name: str, filler: bool, paragraph: bool) -> None:
    body = page(name, filler=filler, paragraph=paragraph)
    sniffed = sniff(body)
    assert sniffed == Sniffed(name, DETECTED)
    assert TEXTS[name][0] in decode(body, sniffed)


def test_the_issues_gbk_title_is_no_longer_latin1_mojibake() -> None:
    body = f"<html><head><title>{THESIS}</title></head><body></body></html>".encode("gbk")
    text = decode(body, sniff(body))
    assert THESIS in text
    assert "·Ö²¼Ê½ÍøÂçÅÀ³æ" not in text


@pytest.mark.parametrize("title", ["iPad版", "新iPhone", "无http-equiv"])
def test_a_gbk_page_whose_title_glues_latin_to_chinese_is_gbk(title: str) -> None:
    """The detector gave up on a sample that begins so, and the whole page was read as
    windows-1252 (QA: 252 of 252 such titles)."""
    words = "这是一个没有声明编码的中文页面，用来测试分布式网络爬虫的编码识别功能。"
    body = f"<html><head><title>{title}</title></head><body><p>{words}</p></body>".encode("gbk")
    sniffed = sniff(body)
    assert sniffed == Sniffed("gbk", DETECTED)
    assert title in decode(body, sniffed)


def test_a_long_page_is_detected_from_its_first_bytes() -> None:
    paragraph = TEXTS["shift_jis"][1]
    body = ("<html><body>" + f"<p>{paragraph}</p>\n" * 10_000).encode("cp932")
    assert len(body) > 4 * encoding.DETECT_BYTES
    assert sniff(body) == Sniffed("shift_jis", DETECTED)


@pytest.mark.parametrize("filler", [b"<", b"<a", b"<\xe9 "])
def test_a_page_of_tags_that_never_close_is_sniffed_in_reasonable_time(filler: bytes) -> None:
    # Markup was cut out of the detector's sample with "<[^>]*>", which looked for a
    # ">" from every "<": 64 KiB of "<" took seconds of the crawler's loop per page.
    body = b"\xe9" + filler * (encoding.DETECT_BYTES // len(filler))
    started = time.monotonic()
    sniffed = sniff(body)
    assert time.monotonic() - started < 0.5
    assert sniffed.source in (DETECTED, DEFAULT)


@pytest.mark.parametrize(
    "text",
    [
        "<title>Café</title>",
        "<p>Une crème brûlée — s’il vous plaît</p>",
        # Each of these was taken for another code page: Big5 ("nœ" a character),
        # windows-1250 ("Pĺ"), macintosh ("‡ ·rvores").
        "<title>Chaque nœud conserve une copie partielle</title>",
        "<title>På julafton äter man skinka</title>",
        "<title>os idosos conversam à sombra das árvores</title>",
        "<title>Über die Brücke zur Straßenbahn</title>",
    ],
)
def test_western_european_text_is_windows_1252(text: str) -> None:
    assert sniff(text.encode("cp1252")) == Sniffed("windows-1252", DETECTED)


@pytest.mark.parametrize(
    ("text", "codec"),
    [
        # A character whose bytes read as punctuation, or a capital, in windows-1252
        # ("»P", "Áy"): one language's words with a few accents they are not.
        ("F1 與 App", "big5"),
        ("2024 對 DVD", "cp932"),
        ("臉", "big5"),
        # Read in windows-1252 (and windows-1257), as before alphabets.py.
        ("Türkiye'nin başkenti Ankara'dır", "cp1254"),
    ],
)
def test_short_titles_in_other_code_pages_keep_them(text: str, codec: str) -> None:
    body = f"<title>{text}</title>".encode(codec)
    assert decode(body, sniff(body)) == f"<title>{text}</title>"


def test_iso_2022_jp_is_seven_bit_and_still_detected() -> None:
    body = "<title>日本語のページ</title>".encode("iso2022_jp")
    assert body.isascii()
    assert sniff(body) == Sniffed("iso-2022-jp", DETECTED)


def test_the_detector_answers_with_web_encodings_only() -> None:
    assert detect(page("gbk")) == "gbk"  # not gb18030, its codec
    assert detect(page("big5")) == "big5"  # not big5hkscs
    assert detect(page("euc-kr")) == "euc-kr"  # not cp949


def test_noise_is_read_somehow_and_never_raises() -> None:
    for noise in (bytes(range(128, 256)) * 4, bytes(range(256)) * 40, b"\x81\x8d\x8f\x90\x9d"):
        sniffed = sniff(noise)
        assert sniffed.source in (DETECTED, DEFAULT)
        assert lookup(sniffed.name) == sniffed.name
        decode(noise, sniffed)


def test_when_the_detector_has_nothing_the_default_is_windows_1252(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(encoding, "_guess", lambda body, hint: (None, False))
    assert sniff(b"<title>\xe9\xe8</title>") == Sniffed(DEFAULT_LEGACY, DEFAULT)
    # As in browsers, the default of a country whose legacy pages were in another.
    at_ru = Sniffed("windows-1251", EncodingSource.DOMAIN)
    assert sniff(b"<title>\xe9\xe8</title>", host="www.example.ru") == at_ru


def test_decode_replaces_what_it_cannot_read() -> None:
    assert decode(b"ok \xff\xfe ok", Sniffed("gbk", DETECTED)) == "ok \ufffd\ufffd ok"
    assert decode(b"\xef\xbb\xbfhi", Sniffed("utf-8", BOM)) == "hi"


_PIECES = st.sampled_from(
    [
        b"<meta charset=",
        b'"gbk">',
        b"utf-8",
        b"<!--",
        b"-->",
        b"<meta http-equiv=content-type content='text/html; charset=big5'>",
        b"\xef\xbb\xbf",
        b"\xff\xfe",
        "分布式".encode("gbk"),
        "日本".encode(),
        b"\x1b$B",
        b"<title>",
    ]
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.one_of(_PIECES, st.binary(max_size=40)), max_size=12).map(b"".join),
    st.one_of(st.none(), st.sampled_from(["utf-8", "gbk", "x-bogus", "utf-16", ""])),
)
def test_any_bytes_are_sniffed_and_decoded_without_raising(body: bytes, header: str | None) -> None:
    sniffed = sniff(body, header)
    assert lookup(sniffed.name) == sniffed.name
    assert isinstance(decode(body, sniffed), str)


def test_meta_tags_remembered_for_the_next_page_are_small_ones() -> None:
    """Sites repeat their <meta> on every page, so its reading is remembered; but pages
    of huge, ever different <meta> tags would make that memory 64 MiB."""
    encoding._meta_charset_cached.cache_clear()
    for i in range(50):
        junk = b" data-x%d='%s'" % (i, b"y" * 60_000)
        page = b"<html><head><meta" + junk + b' charset="gbk"></head></html>'
        assert encoding.prescan(page) == "gbk"
    assert encoding._meta_charset_cached.cache_info().currsize == 0
    assert encoding.prescan(b'<meta charset="big5">') == "big5"
    assert encoding._meta_charset_cached.cache_info().currsize == 1
