"""The Encoding Standard's encodings: their WHATWG names, their labels, and the
Python codecs that read them as browsers do."""

from __future__ import annotations

from typing import Final

__all__ = ["DETECTABLE", "NAME_OF_CODEC", "codec_of", "lookup", "query_codec"]

# The Encoding Standard's encodings: WHATWG name -> (Python codec, its labels).
# Where Python's codec of the same name is narrower than what browsers decode, the
# wider one is used: GBK is read with the gb18030 decoder (the standard's own GBK
# decoder is gb18030's), Big5 with Big5-HKSCS, Shift_JIS as windows-31j (cp932),
# EUC-KR as windows-949 (cp949).
_ENCODINGS: Final[dict[str, tuple[str, str]]] = {
    "utf-8": ("utf-8", "unicode-1-1-utf-8 unicode11utf8 unicode20utf8 utf-8 utf8 x-unicode20utf8"),
    "ibm866": ("cp866", "866 cp866 csibm866 ibm866"),
    "iso-8859-2": (
        "iso8859_2",
        "csisolatin2 iso-8859-2 iso-ir-101 iso8859-2 iso88592 iso_8859-2 iso_8859-2:1987 l2 latin2",
    ),
    "iso-8859-3": (
        "iso8859_3",
        "csisolatin3 iso-8859-3 iso-ir-109 iso8859-3 iso88593 iso_8859-3 iso_8859-3:1988 l3 latin3",
    ),
    "iso-8859-4": (
        "iso8859_4",
        "csisolatin4 iso-8859-4 iso-ir-110 iso8859-4 iso88594 iso_8859-4 iso_8859-4:1988 l4 latin4",
    ),
    "iso-8859-5": (
        "iso8859_5",
        "csisolatincyrillic cyrillic iso-8859-5 iso-ir-144 iso8859-5 iso88595 iso_8859-5 "
        "iso_8859-5:1988",
    ),
    "iso-8859-6": (
        "iso8859_6",
        "arabic asmo-708 csiso88596e csiso88596i csisolatinarabic ecma-114 iso-8859-6 "
        "iso-8859-6-e iso-8859-6-i iso-ir-127 iso8859-6 iso88596 iso_8859-6 iso_8859-6:1987",
    ),
    "iso-8859-7": (
        "iso8859_7",
        "csisolatingreek ecma-118 elot_928 greek greek8 iso-8859-7 iso-ir-126 iso8859-7 "
        "iso88597 iso_8859-7 iso_8859-7:1987 sun_eu_greek",
    ),
    "iso-8859-8": (
        "iso8859_8",
        "csiso88598e csisolatinhebrew hebrew iso-8859-8 iso-8859-8-e iso-ir-138 iso8859-8 "
        "iso88598 iso_8859-8 iso_8859-8:1988 visual",
    ),
    "iso-8859-8-i": ("iso8859_8", "csiso88598i iso-8859-8-i logical"),
    "iso-8859-10": (
        "iso8859_10",
        "csisolatin6 iso-8859-10 iso-ir-157 iso8859-10 iso885910 l6 latin6",
    ),
    "iso-8859-13": ("iso8859_13", "iso-8859-13 iso8859-13 iso885913"),
    "iso-8859-14": ("iso8859_14", "iso-8859-14 iso8859-14 iso885914"),
    "iso-8859-15": (
        "iso8859_15",
        "csisolatin9 iso-8859-15 iso8859-15 iso885915 iso_8859-15 l9",
    ),
    "iso-8859-16": ("iso8859_16", "iso-8859-16"),
    "koi8-r": ("koi8_r", "cskoi8r koi koi8 koi8-r koi8_r"),
    "koi8-u": ("koi8_u", "koi8-ru koi8-u"),
    "macintosh": ("mac_roman", "csmacintosh mac macintosh x-mac-roman"),
    "windows-874": ("cp874", "dos-874 iso-8859-11 iso8859-11 iso885911 tis-620 windows-874"),
    "windows-1250": ("cp1250", "cp1250 windows-1250 x-cp1250"),
    "windows-1251": ("cp1251", "cp1251 windows-1251 x-cp1251"),
    "windows-1252": (
        "cp1252",
        "ansi_x3.4-1968 ascii cp1252 cp819 csisolatin1 ibm819 iso-8859-1 iso-ir-100 iso8859-1 "
        "iso88591 iso_8859-1 iso_8859-1:1987 l1 latin1 us-ascii windows-1252 x-cp1252",
    ),
    "windows-1253": ("cp1253", "cp1253 windows-1253 x-cp1253"),
    "windows-1254": (
        "cp1254",
        "cp1254 csisolatin5 iso-8859-9 iso-ir-148 iso8859-9 iso88599 iso_8859-9 "
        "iso_8859-9:1989 l5 latin5 windows-1254 x-cp1254",
    ),
    "windows-1255": ("cp1255", "cp1255 windows-1255 x-cp1255"),
    "windows-1256": ("cp1256", "cp1256 windows-1256 x-cp1256"),
    "windows-1257": ("cp1257", "cp1257 windows-1257 x-cp1257"),
    "windows-1258": ("cp1258", "cp1258 windows-1258 x-cp1258"),
    "x-mac-cyrillic": ("mac_cyrillic", "x-mac-cyrillic x-mac-ukrainian"),
    "gbk": (
        "gb18030",
        "chinese csgb2312 csiso58gb231280 gb2312 gb_2312 gb_2312-80 gbk iso-ir-58 x-gbk",
    ),
    "gb18030": ("gb18030", "gb18030"),
    "big5": ("big5hkscs", "big5 big5-hkscs cn-big5 csbig5 x-x-big5"),
    "euc-jp": ("euc_jp", "cseucpkdfmtjapanese euc-jp x-euc-jp"),
    "iso-2022-jp": ("iso2022_jp", "csiso2022jp iso-2022-jp"),
    "shift_jis": (
        "cp932",
        "csshiftjis ms932 ms_kanji shift-jis shift_jis sjis windows-31j x-sjis",
    ),
    "euc-kr": (
        "cp949",
        "cseuckr csksc56011987 euc-kr iso-ir-149 korean ks_c_5601-1987 ks_c_5601-1989 "
        "ksc5601 ksc_5601 windows-949",
    ),
    "utf-16be": ("utf-16-be", "unicodefffe utf-16be"),
    "utf-16le": (
        "utf-16-le",
        "csunicode iso-10646-ucs-2 ucs-2 unicode unicodefeff utf-16 utf-16le",
    ),
}
_LABELS: Final = {
    label: name for name, (_, labels) in _ENCODINGS.items() for label in labels.split()
}
# What the detector may answer: every web encoding but UTF-8 (checked before it is
# called) and UTF-16 (which only a BOM or a declaration may choose, as in browsers).
DETECTABLE: Final = sorted(
    {codec for name, (codec, _) in _ENCODINGS.items() if not name.startswith("utf-")}
)
# The detector's answer (a Python codec) back to a WHATWG name; for codecs two names
# share, the one pages call themselves.
NAME_OF_CODEC: Final = {
    **{codec: name for name, (codec, _) in _ENCODINGS.items()},
    "gb18030": "gbk",
    "iso8859_8": "iso-8859-8",
}


def lookup(label: str | None) -> str | None:
    """The WHATWG name of an encoding label (the Encoding Standard's "get an
    encoding"), or None for a label it does not know."""
    if not label:
        return None
    return _LABELS.get(label.strip("\t\n\f\r ").lower())


def codec_of(name: str) -> str:
    """The Python codec that reads an encoding (by WHATWG name) as browsers do."""
    return _ENCODINGS[name][0]


# Where WHATWG's encoder is narrower than the decoder read with (codec_of): GBK knows
# no four-byte sequence, where gb18030 has them (Python's gbk also lacks the '€' that
# WHATWG writes as 0x80: it goes as its escape); Big5 leaves HKSCS out.
_ENCODERS: Final = {"gbk": "gbk", "big5": "big5"}
# Pages whose links' queries go in UTF-8 all the same, as the path always does.
_QUERY_IN_UTF8: Final = frozenset({"utf-8", "utf-16le", "utf-16be"})


def query_codec(name: str) -> str | None:
    """The Python codec a page's links' queries are written in, as browsers write them
    (WHATWG URL, "encoding-parse a URL"): the page's encoding (by WHATWG name), or
    None for UTF-8."""
    if name in _QUERY_IN_UTF8:
        return None
    return _ENCODERS.get(name) or codec_of(name)
