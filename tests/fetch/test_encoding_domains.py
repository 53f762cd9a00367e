"""Undeclared pages whose bytes read alike in two encodings: the host's top-level domain
settles it, as browsers settle it (ubipy.fetch.tlds), and a letter of another script
alone among Latin words is no text in that script."""

from __future__ import annotations

import pytest

from ubipy.fetch import EncodingSource, decode, parse_html, sniff
from ubipy.fetch.encoding import Sniffed
from ubipy.fetch.tlds import Hint, hint_of

DOMAIN = EncodingSource.DOMAIN
DETECTED = EncodingSource.DETECTED


def _page(title: str, codec: str) -> bytes:
    return f"<html><head><title>{title}</title></head><body><p>{title}</p>".encode(codec)


@pytest.mark.parametrize(
    ("host", "hint"),
    [
        ("www.example.pl", Hint("iso-8859-2", "polish")),
        ("WWW.EXAMPLE.LV.", Hint("windows-1257", "latvian")),
        ("a.b.cz", Hint("windows-1250", "czech")),
        ("www.example.pl:8443", Hint("iso-8859-2", "polish")),  # a host key, its port
        ("example.ru", Hint("windows-1251", None)),
        ("example.xn--p1ai", Hint("windows-1251", None)),  # .рф, as hosts are kept
        ("news.example.cn", Hint("gbk", None)),
        ("example.com", None),
        ("example.fr", None),  # windows-1252, the default
        ("127.0.0.1", None),
        ("[::1]", None),
        ("[::1]:8080", None),
        ("localhost", None),
    ],
)
def test_a_domain_suggests_what_its_legacy_pages_were_in(host: str, hint: Hint | None) -> None:
    assert hint_of(host) == hint


@pytest.mark.parametrize(
    ("title", "codec", "host", "name"),
    [
        # Latvian "ziemā" in windows-1257 reads "ziemâ" in windows-1252: French letters.
        ("brauc uz jūrmalu, bet ziemā", "cp1257", "www.example.lv", "windows-1257"),
        # Lithuanian "didžiausi" reads as Romanian "didţiausi" in windows-1250.
        ("o didžiausi miestai", "cp1257", "www.example.lt", "windows-1257"),
        # Polish "pięknych" reads "piêknych" in windows-1252.
        ("wiele pięknych miast,", "iso8859_2", "www.example.pl", "iso-8859-2"),
        ("nad zahradou. Děti si", "cp1250", "www.example.cz", "windows-1250"),
    ],
)
def test_a_short_page_its_bytes_leave_open_is_read_as_its_domain_says(
    title: str, codec: str, host: str, name: str
) -> None:
    body = _page(title, codec)
    assert title not in decode(body, sniff(body))  # with no domain: read wrong
    assert sniff(body, host=host) == Sniffed(name, DOMAIN)  # the domain's doing
    assert title in decode(body, sniff(body, host=host))


@pytest.mark.parametrize(
    ("title", "host"),
    [
        # French è read in ISO 8859-2 is č: "systčme" is no Polish.
        ("Le système de fichiers distribué", "www.example.pl"),
        # One language's words with a few accents are not a CJK character each.
        ("Chaque nœud conserve une copie", "www.example.cn"),
        ("Über die Brücke gehen täglich", "www.example.jp"),
    ],
)
def test_a_page_that_is_not_in_its_domains_encoding_is_still_read_right(
    title: str, host: str
) -> None:
    body = _page(title, "cp1252")
    assert sniff(body, host=host) == sniff(body)
    assert title in decode(body, sniff(body, host=host))


def test_a_long_page_is_read_from_its_bytes_wherever_it_is() -> None:
    text = (
        "Распределённый веб-краулер должен учитывать планирование, дедупликацию, "
        "хранение и вежливость по отношению к каждому сайту, который он посещает."
    )
    body = _page(text, "cp1251")
    for host in ("example.com", "example.ru", "example.lv", "example.cn"):
        assert decode(body, sniff(body, host=host)).count(text) == 2


@pytest.mark.parametrize(
    "title",
    [
        "brincam e os idosos conversam à sombra",  # Portuguese
        "og á veturna er dimmt",  # Icelandic
    ],
)
def test_one_accented_letter_among_latin_words_is_no_cyrillic_text(title: str) -> None:
    body = _page(title, "cp1252")
    assert sniff(body) == Sniffed("windows-1252", DETECTED)
    assert title in decode(body, sniff(body))


def test_a_short_russian_title_is_still_russian() -> None:
    body = _page("Распределённый краулер", "cp1251")
    assert sniff(body).name == "windows-1251"


def test_a_parsed_page_is_read_as_its_hosts_domain_says() -> None:
    title = "galvaspilsēta ir Rīga, Vasarā cilvēki"
    body = _page(title, "cp1257")
    at_lv = parse_html(body, "http://www.example.lv:8080/riga.html")
    assert (at_lv.title, at_lv.encoding, at_lv.encoding_source) == (
        title,
        "windows-1257",
        DOMAIN,
    )
    assert parse_html(body, "http://www.example.com/riga.html").title != title


@pytest.mark.parametrize(
    ("html", "codec", "host"),
    [
        # Latin words with an accent or two are no text of the domain's script.
        ("<title>à la</title><div id=x></div>", "cp1252", "www.example.ru"),
        ("<title>danskere cykler på</title><div id=x></div>", "cp1252", "example.sa"),
        ("<title>à la</title><div id=x></div>", "cp1252", "example.th"),
        # Nor is another script's text: a hint settles between its own script's
        # encodings only.
        ("<title>Дети играют</title><p>Дети играют</p>", "cp1251", "example.gr"),
        ("<title>孩子们 在院子里 玩耍</title><p>孩子们 在院子里 玩耍</p>", "gbk", "example.th"),
        ("<title>台北 是 美麗</title><p>台北 是 美麗</p>", "big5", "example.jp"),
    ],
)
def test_a_hint_of_another_script_does_not_overrule_the_bytes(
    html: str, codec: str, host: str
) -> None:
    body = html.encode(codec)
    assert sniff(body, host=host) == sniff(body)
    assert decode(body, sniff(body, host=host)) == html


@pytest.mark.parametrize("word", ["она", "як", "моря"])
def test_a_russian_word_among_english_ones_is_still_russian(word: str) -> None:
    """Few letters beyond ASCII, but a word made of them: another script's, not a
    Latin one's accents (read in windows-1252, "она" is Italian's letters "îíà")."""
    html = f"<title>{word}</title><p>The quick brown fox jumps over the lazy dog.</p>"
    body = html.encode("cp1251")
    assert decode(body, sniff(body)) == html
