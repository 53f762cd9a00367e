"""Which character encoding a page is in, and who said so.

The order is the WHATWG HTML standard's encoding sniffing algorithm, as browsers
run it:

1. a byte order mark (UTF-8, UTF-16LE, UTF-16BE) wins over everything;
2. the ``charset`` of the Content-Type header, if the Encoding Standard knows the label;
3. a ``<meta charset>`` or ``<meta http-equiv=Content-Type content="...; charset=...">``
   found by a prescan of the document's head;
4. detection: UTF-16 by where its NULs are, valid UTF-8 is UTF-8; anything else goes
   to charset-normalizer;
5. the default, when nothing decided: UTF-8 for ASCII-only bytes (every
   ASCII-compatible encoding reads them alike), windows-1252 otherwise.

Departures from the standard, because a crawler, unlike a browser, cannot let a
person pick another encoding from a menu when the page says nonsense:

* a ``<meta>`` whose encoding cannot read the bytes is not believed, and detection
  decides instead: ``charset=utf-8`` over bytes that are not valid UTF-8 (GBK text
  under a template's boilerplate, the usual case), or a legacy charset over bytes
  invalid in it that are valid UTF-8 (a site moved to UTF-8 that kept its old
  ``<meta>``). The header is still believed, as the standard says: a server that
  lies in its header lies to browsers too.
* the ``replacement`` and ``x-user-defined`` encodings are treated as unknown
  labels, so the next source decides.

Keeping the common case cheap: a header charset costs a dict look-up; a ``<meta>``
a regular-expression scan up to it (and, for non-ASCII bytes, one strict decode to
check it); an undeclared page the scan of its first 64 KiB and, if it is not ASCII,
a UTF-8 check. Only bytes that are neither declared nor UTF-8 pay for the detector
(a few milliseconds, on at most 64 KiB of their text).
"""

from __future__ import annotations

import codecs
import contextlib
import enum
import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple

from ubipy.fetch import alphabets
from ubipy.fetch.labels import DETECTABLE, NAME_OF_CODEC, codec_of, lookup
from ubipy.fetch.tlds import Hint, hint_of

if TYPE_CHECKING:
    from charset_normalizer import CharsetMatch, CharsetMatches

__all__ = [
    "DEFAULT_LEGACY",
    "DETECT_BYTES",
    "PRESCAN_BYTES",
    "EncodingSource",
    "Sniffed",
    "ascii_compatible",
    "codec_of",
    "decode",
    "detect",
    "lookup",
    "prescan",
    "sniff",
]


class EncodingSource(enum.Enum):
    """What decided a page's encoding (the WHATWG sniffing order)."""

    BOM = "bom"
    HEADER = "header"
    META = "meta"
    DETECTED = "detected"
    DOMAIN = "domain"  # the host's top-level domain settled it (tlds.py)
    DEFAULT = "default"


@dataclass(frozen=True, slots=True)
class Sniffed:
    """An encoding by its WHATWG name (lower case: ``utf-8``, ``gbk``, ``shift_jis``),
    and what decided it."""

    name: str
    source: EncodingSource


# The detector's multi-byte candidates (see detect()).
_MULTI_BYTE: Final = frozenset({"gb18030", "big5hkscs", "cp932", "cp949", "euc_jp", "iso2022_jp"})
# Latin-script single-byte code pages, ranked by how their readings fit (see detect()).
_LATIN: Final = frozenset(
    {"cp1250", "cp1252", "cp1254", "cp1257", "cp1258", "mac_roman"}
    | {f"iso8859_{n}" for n in (2, 3, 4, 10, 13, 14, 15, 16)}
)
# Of the readings that fit as well, the code page more pages are in goes first:
# windows-1252 (what browsers assume), then Central European, Turkish, Baltic...
# Before the size of the alphabet: Polish "każde" read in windows-1257 as "kaæde" is
# Danish's letters, an alphabet smaller than Polish's.
_LATIN_PRIOR: Final = (
    "cp1252", "cp1250", "iso8859_2", "cp1254", "cp1257", "iso8859_15", "iso8859_13",
    "cp1258", "iso8859_16", "iso8859_4", "iso8859_10", "iso8859_14", "iso8859_3", "mac_roman",
)  # fmt: skip
_LATIN_TOLERANCE: Final = 0.1
# The detector's order of a Latin code page it did not guess: after all it did.
_BEYOND: Final = 1_000
# Characters of a reading whose letters are weighed (alphabets.py): plenty to tell
# the code pages apart, and a few milliseconds of CPU, where 64 KiB were 20.
_FIT_CHARS: Final = 4096
# Encodings in which ASCII bytes stand for ASCII characters; ASCII-only bytes read the
# same in every one of them.
_NOT_ASCII_COMPATIBLE: Final = frozenset({"utf-16be", "utf-16le", "iso-2022-jp"})

DEFAULT_LEGACY: Final = "windows-1252"
_UTF8_BOM: Final = b"\xef\xbb\xbf"
_BOMS: Final = ((_UTF8_BOM, "utf-8"), (b"\xff\xfe", "utf-16le"), (b"\xfe\xff", "utf-16be"))
_ANY_BOM: Final = tuple(bom for bom, _ in _BOMS)

# How much of the document the <meta> prescan reads. The standard asks for at least
# 1024 bytes; real heads put the declaration after kilobytes of scripts and styles.
PRESCAN_BYTES: Final = 64 * 1024
# How much of the body the detector sees: enough text to be sure, a bounded cost.
DETECT_BYTES: Final = 64 * 1024
# How much of an undeclared body shows where its NULs are (UTF-16 without a BOM).
_UTF16_SAMPLE: Final = 1024

# A comment (skipped: a <meta> in it does not count) or the start of a <meta> tag.
_PRESCAN = re.compile(rb"<!--|<meta[\t\n\f\r /]", re.IGNORECASE)
_ATTRIBUTE = re.compile(
    rb"""([^\t\n\f\r />][^\t\n\f\r /=>]*)(?:[\t\n\f\r ]*=[\t\n\f\r ]*"""
    rb"""(?:"([^"]*)"|'([^']*)'|([^\t\n\f\r >]*)))?"""
)
_CONTENT_CHARSET = re.compile(
    r"""charset[\t\n\f\r ]*=[\t\n\f\r ]*(?:"([^"]*)"|'([^']*)'|([^\t\n\f\r ;]+))""",
    re.IGNORECASE,
)
# Markup and character references, cut out of the detector's sample. A tag holds no
# "<": with "<[^>]*>" every "<" of a run with no ">" after it scanned to the sample's
# end (quadratic: seconds for 64 KiB of "<"), and a stray "<" in the text hid the words
# up to the next tag's end.
_MARKUP = re.compile(rb"<[^<>]*>|&#?[0-9A-Za-z]+;")


# A <meta> tag's attributes are remembered (sites repeat theirs on every page) only up
# to this size: a hostile page's 64 KiB of them, each different, would otherwise keep
# 64 MiB in the cache.
_CACHED_ATTRIBUTES: Final = 512


def _meta_charset(attributes: bytes) -> str | None:
    """The encoding a <meta> tag's attributes declare, per the prescan's rules."""
    if len(attributes) <= _CACHED_ATTRIBUTES:
        return _meta_charset_cached(attributes)
    return _read_meta_charset(attributes)


@functools.lru_cache(maxsize=1024)
def _meta_charset_cached(attributes: bytes) -> str | None:
    return _read_meta_charset(attributes)


def _read_meta_charset(attributes: bytes) -> str | None:
    charset: str | None = None
    http_equiv = False
    content: str | None = None
    seen: set[bytes] = set()
    for m in _ATTRIBUTE.finditer(attributes):
        name = m.group(1).lower()
        if name in seen:
            continue  # the first of an attribute counts
        seen.add(name)
        value = m.group(2) if m.group(2) is not None else m.group(3)
        if value is None:
            value = m.group(4) or b""
        text = value.decode("latin-1")
        if name == b"charset":
            charset = text
        elif name == b"http-equiv":
            http_equiv = text.strip().lower() == "content-type"
        elif name == b"content":
            content = text
    if charset is not None:
        return lookup(charset)
    if http_equiv and content is not None:
        found = _CONTENT_CHARSET.search(content)
        if found is not None:
            return lookup(next(g for g in found.groups() if g is not None))
    return None


def prescan(body: bytes) -> str | None:
    """The encoding the document's <meta> declares in its first bytes (WHATWG
    "prescan a byte stream to determine its encoding"), by WHATWG name, or None.

    A declaration of UTF-16 means UTF-8 (the bytes were readable as ASCII to find it),
    and comments are skipped.
    """
    end = min(len(body), PRESCAN_BYTES)
    pos = 0
    while True:
        m = _PRESCAN.search(body, pos, end)
        if m is None:
            return None
        if m.group().startswith(b"<!"):
            close = body.find(b"-->", m.start() + 2, end)
            if close < 0:
                return None
            pos = close + 3
            continue
        close = body.find(b">", m.end(), end)
        if close < 0:
            return None
        name = _meta_charset(body[m.end() : close])
        if name is not None:
            return "utf-8" if name.startswith("utf-16") else name
        pos = close + 1


def _reads_cleanly(body: bytes, name: str) -> bool:
    """Whether ``body`` holds no byte sequence that is invalid in ``name``. A sequence
    cut at the very end (a body truncated at the size cap) does not count against it."""
    if name == "utf-8":
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return exc.reason == "unexpected end of data"
        return True
    decoder = codecs.getincrementaldecoder(codec_of(name))("strict")
    try:
        decoder.decode(body, final=False)
    except UnicodeDecodeError:
        return False
    return True


def _nearly_utf8(body: bytes) -> bool:
    """Whether ``body`` is UTF-8 with a few invalid sequences: at least 20 valid
    non-ASCII characters and one invalid sequence at most for every 50 of them (a
    CMS that cut a description inside a character). Legacy bytes read as UTF-8 are
    mostly invalid: a GBK page gives 314 invalid sequences for 80 valid by accident."""
    text = body.decode("utf-8", "replace")
    bad = text.count("\ufffd") - body.count(b"\xef\xbf\xbd")
    good = len(text) - len(text.encode("ascii", "ignore")) - bad
    return good >= 20 and bad * 50 <= good


def _believable(body: bytes, declared: str) -> bool:
    """Whether a <meta> declaration fits the (non-ASCII) bytes of its page.

    UTF-8 must be valid, or nearly (`_nearly_utf8`): legacy bytes practically never
    are, so many invalid sequences mean the declaration is wrong (a template's
    boilerplate over GBK text, say). A legacy declaration is doubted only when the
    bytes are invalid in it and valid UTF-8 (a site moved to UTF-8 that kept its old
    <meta>); a few bad bytes in a page that is none of either are read as U+FFFD, as
    browsers do, under its declaration.
    """
    if _reads_cleanly(body, declared):
        return True
    if declared == "utf-8":
        return _nearly_utf8(body)
    return not _reads_cleanly(body, "utf-8")


# An ASCII letter or digit: a word with one is left out of the detector's second try.
_ALNUM = re.compile(rb"[A-Za-z0-9]")


def _sample(body: bytes) -> bytes:
    """What the detector reads: the words of the text that hold non-ASCII bytes.

    Markup, ASCII words and filler would drown a short title in a long page; without
    them the detector sees the script alone. Safe for multi-byte encodings: no trail
    byte of GBK, Big5, Shift_JIS or EUC-* is ``<``, ``>``, ``&`` or ASCII white space.
    """
    head = body[:DETECT_BYTES]
    # A body cut here, or at the fetcher's size cap, may end inside a character, and
    # the detector would rule out the very encoding it is in: the sample ends at the
    # last byte that cannot be part of one.
    cut = max(head.rfind(b"<"), head.rfind(b">"), head.rfind(b" "), head.rfind(b"\n"))
    if cut > 0:
        head = head[:cut]
    words = [w for w in _MARKUP.sub(b" ", head).split() if not w.isascii()]
    return b" ".join(words) if words else head


def detect(body: bytes, hint: Hint | None = None) -> str | None:
    """The detector's guess for bytes that are not UTF-8, by WHATWG name; None when
    it has none.

    Two tie-breaks on top of charset-normalizer's ranking, for short samples where
    its language statistics are thin:

    * a multi-byte encoding (GBK, Big5, Shift_JIS, EUC-KR, EUC-JP) that reads the
      sample with no more mess than the best guess is preferred to a single-byte one:
      every byte string is some single-byte text (GBK titles read as plausible Thai
      in windows-874), while pages of non-ASCII bytes that pair up into valid
      double-byte characters, every one of them, are not an accident;
    * when the best guess is a Latin code page, the Latin code pages that read the
      bytes nearly as well are ranked by how nearly their reading is one language's
      letters (alphabets.py): the detector scored Lithuanian in windows-1257 and its
      windows-1252 reading alike, and short Western European text fits windows-1250
      as well. Of readings that fit alike, the more common code page goes first,
      windows-1252 before all: it is what browsers assume for unlabelled legacy
      pages. A windows-1252 reading that is one language's words with a few
      accented letters is not overruled by a multi-byte encoding: ``nœud`` read as
      one Big5 character between ``n`` and ``d`` was.

    ``hint``, the encoding (and language) the page's top-level domain suggests
    (tlds.py), is taken where its reading is as likely as the guess
    (:func:`_hint_fits`): a short Polish title in ISO 8859-2 and its windows-1252
    reading are both one language's letters, Polish and French.
    """
    return _guess(body, hint)[0]


def _guess(body: bytes, hint: Hint | None) -> tuple[str | None, bool]:
    """:func:`detect`'s answer, and whether ``hint`` settled it (the bytes alone said
    another)."""
    # Imported on first use: most crawls never meet an undeclared legacy page, and
    # the import costs tens of milliseconds.
    import charset_normalizer

    sample = _sample(body)
    matches = charset_normalizer.from_bytes(sample, cp_isolation=DETECTABLE)
    best = matches.best()
    if best is None:
        # It gives up on a sample that begins with ASCII letters glued to a CJK
        # character ("iPad版"), and a whole GBK page went to windows-1252 (QA): asked
        # again without the words that mix them.
        pure = b" ".join(w for w in sample.split() if not _ALNUM.search(w))
        if pure and pure != sample:
            sample = pure
            matches = charset_normalizer.from_bytes(sample, cp_isolation=DETECTABLE)
            best = matches.best()
    if best is None:
        return None, False
    latin = _latin_reading(sample, matches, best.chaos)
    # A windows-1252 reading of one language's words, a few of their letters
    # accented, is no accident either: "nœud" was taken for one Big5 character
    # between n and d. Not for none accented ("»P", Big5's 與), nor mostly capitals
    # ("Áy", Big5's 臉), nor another code page (Big5's 山 as "Īs" in ISO 8859-10).
    words = (
        latin is not None
        and latin.codec == "cp1252"
        and latin.share == 1.0
        and 0 < latin.accented < 0.5
        and latin.small >= 0.5
    )
    answer = NAME_OF_CODEC.get(best.encoding)
    if best.encoding in _MULTI_BYTE:
        answer = NAME_OF_CODEC.get(latin.codec if words and latin else best.encoding)
    elif not words and (
        multi := next(
            (m for m in matches if m.chaos <= best.chaos and m.encoding in _MULTI_BYTE), None
        )
    ):
        answer = NAME_OF_CODEC.get(multi.encoding)
    elif best.encoding in _LATIN and latin is not None:
        answer = NAME_OF_CODEC.get(latin.codec)
    # A Latin reading in one language's letters, with no word wholly of letters
    # beyond ASCII (Russian "она" read in windows-1252 as Italian's "îíà").
    lettered = latin is not None and latin.share == 1.0 and not _WHOLLY_BEYOND.search(sample)
    if _family(answer) not in ("latin", "cjk") and lettered and _few_beyond_ascii(body):
        # A letter of another script among Latin words: Portuguese "à sombra" read
        # in windows-1251 as "а sombra", a Russian word alone in Portuguese text.
        # Text in that script has few Latin letters; this has few of its own.
        answer = NAME_OF_CODEC.get(latin.codec) if latin else answer
    # A hint of another script only settles between that script's encodings (GBK or
    # Big5 on .cn), or over a Latin reading that is no language's letters (a .ru title
    # read as "Äåòè"): not over French words on a .ru host, nor a Hebrew page on a .ru
    # one. This test first, _hint_fits's readings after.
    if (
        hint is not None
        and hint.encoding != answer
        and (
            hint.language is not None
            or (family := _family(answer)) == _family(hint.encoding)
            or (family == "latin" and not lettered)
        )
        and _hint_fits(hint, sample, matches, latin)
    ):
        return hint.encoding, True
    return answer, False


# A word whose letters are all beyond ASCII, two or more: Latin-script text has few
# (Portuguese "à", French "où" has an o); text in another script is made of them.
_WHOLLY_BEYOND: Final = re.compile(rb"(?<![A-Za-z\x80-\xff])[\x80-\xff]{2,}(?![A-Za-z\x80-\xff])")
# The scripts of the encodings that are not Latin code pages, by codec.
_FAMILIES: Final = {
    **dict.fromkeys(
        ("cp1251", "koi8_r", "koi8_u", "iso8859_5", "cp866", "mac_cyrillic"), "cyrillic"
    ),
    **dict.fromkeys(("cp1253", "iso8859_7"), "greek"),
    **dict.fromkeys(("cp1255", "iso8859_8"), "hebrew"),
    **dict.fromkeys(("cp1256", "iso8859_6"), "arabic"),
    "cp874": "thai",
    **dict.fromkeys(_MULTI_BYTE, "cjk"),
}


def _family(name: str | None) -> str:
    """The script of an encoding (by WHATWG name): ``latin`` for a Latin code page."""
    return "latin" if name is None else _FAMILIES.get(codec_of(name), "latin")


def _hint_fits(
    hint: Hint, sample: bytes, matches: CharsetMatches, latin: _LatinReading | None
) -> bool:
    """Whether the hint's reading of ``sample`` is as likely as the detector's
    answer: as clean to the detector as its best guess (a Latin code page's, nearly
    as clean); a Latin code page's, as nearly the hint's language's letters as the
    likeliest Latin reading is one language's (``latin``: all of them, when none
    is)."""
    best = matches.best()
    assert best is not None
    codec = codec_of(hint.encoding)
    tolerance = _LATIN_TOLERANCE if hint.language is not None else 0.0
    if not any(
        m.chaos <= best.chaos + tolerance and codec in m.could_be_from_charset for m in matches
    ):
        return False
    if hint.language is None:
        return True
    try:
        fit = alphabets.fit(sample[:_FIT_CHARS].decode(codec), hint.language)
    except UnicodeDecodeError:
        return False
    return fit.share >= (latin.share if latin else 1.0)


# Of a text's letters, the share beyond ASCII under which it is Latin-script text,
# not text in another script: at most about one letter in ten is accented in Latin
# languages (Czech's many), where Russian, Greek or Arabic text is nearly all its own.
_FEW_BEYOND_ASCII: Final = 0.1


def _few_beyond_ascii(body: bytes) -> bool:
    """Whether the text's bytes beyond ASCII are few among its letters (markup aside)."""
    text = _MARKUP.sub(b" ", body[:DETECT_BYTES])
    beyond = len(text) - len(text.translate(None, _HIGH_BYTES))
    ascii_letters = len(text) - len(text.translate(None, _ASCII_LETTERS))
    return beyond < _FEW_BEYOND_ASCII * (beyond + ascii_letters)


_ASCII_LETTERS: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_HIGH_BYTES: Final = bytes(range(128, 256))


class _LatinReading(NamedTuple):
    """A Latin code page's reading: its share of one language's letters and whether
    a common language's (alphabets.fit), the share of its letters that are accented
    and of those the share in small letters (alphabets.accented)."""

    codec: str
    share: float
    common: bool
    accented: float
    small: float


def _latin_reading(
    sample: bytes, matches: Iterable[CharsetMatch], chaos: float
) -> _LatinReading | None:
    """The Latin code page among the detector's near guesses (no more than
    ``_LATIN_TOLERANCE`` messier than ``chaos``, the best's), and every other that
    reads ``sample``, whose reading is likeliest one language's letters
    (alphabets.py): the larger share, a common language, the code page more pages
    are in (``_LATIN_PRIOR``), the smaller alphabet, the detector's order. With that
    reading's share of one language's letters and its accented letters
    (alphabets.accented); None when no Latin code page is among them."""
    readings = []
    for i, match in enumerate(matches):
        codec = "cp1252" if "cp1252" in match.could_be_from_charset else match.encoding
        if match.chaos <= chaos + _LATIN_TOLERANCE and codec in _LATIN:
            readings.append((-i, codec, sample[:_FIT_CHARS].decode(codec, "replace")))
    if not readings:
        return None
    # The other Latin code pages too, each that reads the sample: the detector's
    # near guesses left out the right one at times (Swedish read as windows-1250
    # only, Polish in ISO 8859-2 as ISO 8859-10, -4 or -14 only).
    guessed = {codec for _, codec, _ in readings}
    for codec in _LATIN_PRIOR:
        if codec not in guessed:
            with contextlib.suppress(UnicodeDecodeError):
                text = sample[:_FIT_CHARS].decode(codec)
                readings.append((-_BEYOND - len(readings), codec, text))
    ranked = []
    for order, codec, text in readings:
        fit = alphabets.fit(text)
        likelier = (fit.share, fit.common, -_LATIN_PRIOR.index(codec), -fit.letters, order)
        ranked.append((likelier, codec, text))
    (share, common, *_), codec, text = max(ranked)
    return _LatinReading(codec, share, common, *alphabets.accented(text))


@functools.cache
def _sniffed(name: str, source: EncodingSource) -> Sniffed:
    # Every page gets one of a few dozen answers: made once each (a frozen dataclass
    # costs a microsecond to build, a sizeable part of sniffing a declared page).
    return Sniffed(name, source)


def _utf16(body: bytes) -> str | None:
    """UTF-16 without its BOM, by where its NULs are: every ASCII character (all of the
    markup) has one, on the odd bytes in UTF-16LE, the even ones in BE. Read as UTF-8
    it has a NUL every other byte, and no title (QA)."""
    head = body[:_UTF16_SAMPLE]
    even, odd = head[0::2].count(0), head[1::2].count(0)
    if max(even, odd) < len(head) // 8 or min(even, odd) * 8 > max(even, odd):
        return None
    return "utf-16le" if odd > even else "utf-16be"


def _detected(body: bytes, host: str | None) -> Sniffed:
    """Steps 4 and 5: what the bytes themselves say (with what ``host``'s top-level
    domain suggests, when they say it no less likely), or the default (that
    domain's, as in browsers)."""
    if b"\0" in body[:_UTF16_SAMPLE] and (name := _utf16(body)) is not None:
        return _sniffed(name, EncodingSource.DETECTED)
    if body.isascii():
        if b"\x1b" in body and (name := detect(body)) is not None:
            return _sniffed(name, EncodingSource.DETECTED)  # ISO-2022-JP is 7-bit
        return _sniffed("utf-8", EncodingSource.DEFAULT)
    if _reads_cleanly(body, "utf-8") or _nearly_utf8(body):
        return _sniffed("utf-8", EncodingSource.DETECTED)
    hint = hint_of(host) if host else None
    name, hinted = _guess(body, hint)
    if name is None:
        if hint is not None:
            return _sniffed(hint.encoding, EncodingSource.DOMAIN)
        return _sniffed(DEFAULT_LEGACY, EncodingSource.DEFAULT)
    return _sniffed(name, EncodingSource.DOMAIN if hinted else EncodingSource.DETECTED)


def sniff(body: bytes, header_charset: str | None = None, *, host: str | None = None) -> Sniffed:
    """The encoding of an HTML document, from its bytes and the Content-Type header's
    ``charset`` parameter (as sent: a label, maybe unknown), in the WHATWG order;
    ``host``: the page's, whose top-level domain may settle what its bytes leave open."""
    if body.startswith(_ANY_BOM):
        for bom, bom_encoding in _BOMS:
            if body.startswith(bom):
                return _sniffed(bom_encoding, EncodingSource.BOM)
    name = lookup(header_charset)
    if name is not None:
        return _sniffed(name, EncodingSource.HEADER)
    name = prescan(body)
    if name is not None and (body.isascii() or _believable(body, name)):
        return _sniffed(name, EncodingSource.META)
    return _detected(body, host)


def ascii_compatible(name: str) -> bool:
    """Whether ASCII bytes mean ASCII characters in this encoding."""
    return name not in _NOT_ASCII_COMPATIBLE


def decode(body: bytes, sniffed: Sniffed) -> str:
    """The document's text: a BOM dropped, invalid sequences as U+FFFD."""
    if sniffed.source is EncodingSource.BOM:
        body = body[3:] if sniffed.name == "utf-8" else body[2:]
    return body.decode(codec_of(sniffed.name), "replace")
