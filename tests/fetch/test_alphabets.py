"""How nearly a reading of Latin-script bytes is one language's letters (alphabets.py):
the right reading of a page in windows-1250, -1252 or -1257 is, the others mix
letters of several languages or put symbols inside words."""

from __future__ import annotations

import pytest

from ubipy.fetch.alphabets import accented, fit

LITHUANIAN = "Žiniatinklio robotas – tai programa, kuri automatiškai naršo internete"
CZECH = "Příliš žluťoučký kůň úpěl ďábelské ódy; děti si hrají venku"
POLISH = "Zażółć gęślą jaźń; w Polsce jest wiele pięknych miast"
FRENCH = "Une crème brûlée, s’il vous plaît — à la française"


@pytest.mark.parametrize(
    ("text", "codec"),
    [(LITHUANIAN, "cp1257"), (CZECH, "cp1250"), (POLISH, "cp1250"), (FRENCH, "cp1252")],
)
def test_the_right_reading_is_one_languages_and_the_wrong_ones_less(text: str, codec: str) -> None:
    right = fit(text)
    assert right.share == 1.0 and right.common
    body = text.encode(codec)
    for other in ("cp1250", "cp1252", "cp1257"):
        if other == codec:
            continue
        wrong = body.decode(other, errors="replace")
        if wrong == text:
            continue
        assert (fit(wrong).share, fit(wrong).common) < (right.share, right.common), (other, wrong)


def test_symbols_inside_words_and_capitals_after_small_letters_count_against() -> None:
    assert fit("każde").share == 1.0
    assert fit("ka¿de").share < 1.0  # Polish ż read in windows-1252
    assert fit("Rīga").share == 1.0
    assert fit("RÓga").share < 1.0  # a capital after a small letter (macintosh)
    # Words in capitals, an apostrophe and a soft hyphen inside words are words.
    assert fit("GRÖSSE DER STRAßE").share == 1.0
    assert fit("l’homme, Wort\u00adtrennung").share == 1.0


def test_punctuation_is_no_language_and_ascii_needs_none() -> None:
    assert fit("plain ASCII text") == (1.0, True, 0)
    assert fit("«quoted» — 5 €, 20 °C…") == (1.0, True, 0)


def test_a_common_language_and_then_a_small_alphabet_explain_best() -> None:
    # ž is Lithuanian's (and Czech's, Finnish's...), þ Icelandic's alone.
    assert fit("didžiausi").common and not fit("didþiausi").common
    # Of two common languages' letters, the smaller alphabet: Swedish's å and ä.
    assert fit("På julafton äter").letters < fit("Pĺ julafton äter").letters


def test_accented_letters_their_share_and_how_many_are_small() -> None:
    assert accented("nœud") == (0.25, 1.0)
    assert accented("123 — !") == (0.0, 0.0)
    assert accented("QQªF") == (0.0, 0.0)  # ª is a letter to Unicode, not an accent
    assert accented("Áy") == (0.5, 0.0)  # Big5's 臉 in windows-1252
    assert accented("网络爬虫") == (1.0, 0.0)


def test_marks_that_belong_inside_words_are_not_odd() -> None:
    # Vietnamese tones as combining marks (windows-1258), Catalan's middle dot.
    assert fit("Vie\u0323t Nam cu\u0309a").share == 1.0
    assert fit("intel·ligent").share == 1.0
    assert fit("PCªá").share < 1.0  # ª inside a word: Big5's 花 in windows-1252
