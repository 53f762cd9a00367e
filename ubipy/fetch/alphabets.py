"""Whether a reading of Latin-script bytes is text in one language.

The Latin code pages (windows-1250, -1252, -1257, ISO 8859-x) give the same bytes
other letters, and the detector (charset-normalizer) often cannot tell them apart:
it scored Lithuanian in windows-1257 and its windows-1252 reading ("Þmonës èia
mëgsta") alike, and Czech, Polish and Portuguese titles read as windows-1250 or
-1252 by a hair either way. A person tells them at a glance: the right reading
uses the letters of one language, a wrong one mixes letters no language has
together (Icelandic þ beside Albanian ë and Danish ø) or puts symbols in words
(Polish ą and ł read as ¹ and ³ in windows-1252).

:func:`fit` is the share of a text's non-ASCII characters, punctuation aside, that
one language's alphabet holds, for the language that holds the most, and that
alphabet's size: of two readings that are each one language's letters, the one in
the smaller alphabet is the likelier.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from typing import Final, NamedTuple

__all__ = ["Fit", "accented", "fit"]

# The letters beyond ASCII of the languages written in Latin code pages, lower case
# (upper case is added below).
_LANGUAGES: Final = {
    "albanian": "çë",
    "catalan": "àçèéíïòóúü·",
    "czech": "áčďéěíňóřšťúůýž",
    "danish, norwegian": "æøåé",
    "dutch": "éëïöüè",
    "esperanto": "ĉĝĥĵŝŭ",
    "estonian": "äõöüšž",
    "finnish": "äöåšž",
    "french": "àâæçéèêëîïôœùûüÿ",
    "german": "äöüß",
    "hungarian": "áéíóöőúüű",
    "icelandic, faroese": "áðéíóúýþæöø",
    "italian": "àèéìíîòóùú",
    "latvian": "āčēģīķļņšūž",
    "lithuanian": "ąčęėįšųūž",
    "maltese": "àċèġħìòùżî",
    "polish": "ąćęłńóśźż",
    "portuguese": "áâãàçéêíóôõú",
    "romanian": "ăâîșşțţ",
    "serbo-croatian, slovene": "čćđšž",
    "slovak": "áäčďéíĺľňóôŕšťúýž",
    "spanish": "áéíñóúü",
    "swedish": "åäöé",
    "turkish": "çğıİöşüâîû",
    "welsh": "âêîôûŵŷ",
    # Most tones are combining marks in windows-1258, Vietnamese's own code page.
    "vietnamese": "àáâăèéêìíòóôơùúưýđ\u0300\u0301\u0303\u0309\u0323",
}
# Languages few pages are written in, or that no legacy code page was mostly used
# for: their alphabets explain a reading only when no other does as well (Czech
# read as windows-1252 is Vietnamese's letters, Lithuanian Icelandic's).
_RARE: Final = frozenset({"albanian", "esperanto", "icelandic, faroese", "maltese", "welsh"})
# Each alphabet, upper case added, whether its language is common, its size, and its
# language.
_ALPHABETS: Final = tuple(
    (alphabet, language not in _RARE and language != "vietnamese", len(letters), language)
    for language, letters in _LANGUAGES.items()
    for alphabet in [frozenset(letters) | frozenset(letters.upper())]
)
# Characters beyond ASCII that any of these languages' text may hold, and those of
# them that may stand inside a word.
_PUNCTUATION: Final = frozenset("\u00a0\u00ad–—‐‑‘’‚“”„…«»‹›•€£©®™°§¡¿×½ºª")
_IN_WORDS: Final = frozenset("\u00ad‐‑’·")  # the middle dot: Catalan's l·l
_NON_ASCII: Final = re.compile(r"[^\x00-\x7f]")
_LETTER: Final = re.compile(r"[^\W\d_]")
# A character beyond ASCII between two letters.
_IN_WORD: Final = re.compile(r"(?<=[^\W\d_])[^\x00-\x7f](?=[^\W\d_])")


class Fit(NamedTuple):
    """How nearly a text is one language's: ``share``, of its non-ASCII characters
    (punctuation aside), in the alphabet that holds the most of them (1.0 when one
    holds them all, or there are none); ``common``: whether a common language's
    alphabet holds as many; ``letters``: the size of the smallest alphabet of those
    (0: none needed). Of two readings, the larger share, then a common language,
    then the smaller alphabet is the likelier (Lithuanian's ž against Icelandic's þ)."""

    share: float
    common: bool
    letters: int


def fit(text: str, language: str | None = None) -> Fit:
    """How nearly ``text`` is one language's letters (see :class:`Fit`), or
    ``language``'s when given (a key of ``_LANGUAGES``)."""
    counts = Counter(_NON_ASCII.findall(text))
    for mark in _PUNCTUATION.intersection(counts):
        del counts[mark]
    # What no language's words hold: a symbol inside a word (Polish ż read as
    # "ka¿de"), a capital inside a word beside a small letter ("RÓga").
    odd = [
        ch
        for found in _IN_WORD.finditer(text)
        if (ch := found.group()) not in _IN_WORDS
        and not unicodedata.combining(ch)  # Vietnamese tones, in windows-1258
        and (
            ch in _PUNCTUATION  # ª and º are letters to Unicode
            or not ch.isalpha()
            or (ch.isupper() and (text[found.start() - 1].islower() or text[found.end()].islower()))
        )
    ]
    # Punctuation where it has no place counts, as a letter no language holds.
    total = counts.total() + sum(ch in _PUNCTUATION for ch in odd)
    if not total:
        return Fit(1.0, True, 0)
    held, common, letters = max(
        (sum(n for ch, n in counts.items() if ch in alphabet), common, -size)
        for alphabet, common, size, name in _ALPHABETS
        if language is None or name == language
    )
    return Fit(max(0, held - len(odd)) / total, common, -letters)


def accented(text: str) -> tuple[float, float]:
    """Of ``text``'s letters, the share that are not ASCII, and of those the share
    in small letters ((0.0, 0.0) for none): a few, mostly small, in a Latin-script
    language's words; nearly all in a reading of CJK bytes, many of them capitals
    (lead bytes from 0xC0 are capitals in windows-1252)."""
    letters = _LETTER.findall(text)
    beyond = [ch for ch in letters if not ch.isascii() and ch not in _PUNCTUATION]
    if not beyond:
        return 0.0, 0.0
    return len(beyond) / len(letters), sum(ch.islower() for ch in beyond) / len(beyond)
