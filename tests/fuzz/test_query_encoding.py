"""A link's query on a page in a legacy encoding, written as WHATWG's "percent-encode
after encoding" defines it a character at a time: each character in the page's
encoding, the bytes of the query percent-encode set escaped, and one the encoding
lacks as ``%26%23N%3B``. The crawler encodes a query whole, in C, and escapes it a
run of bytes at a time (a character at a time cost seconds on a page of long
queries); both must write the same."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.common import fuzz
from ubipy.fetch.legacyquery import query_in

CODECS = ["gbk", "gb18030", "big5", "shift_jis", "euc-jp", "iso-2022-jp", "euc-kr",
          "windows-1252", "windows-1251", "iso-8859-2", "koi8-r", "utf-8"]  # fmt: skip
# WHATWG URL's query percent-encode set, for special schemes (http, https).
ESCAPED = frozenset([*range(0x21), 0x22, 0x23, 0x27, 0x3C, 0x3E, *range(0x7F, 0x100)])
C0_AND_SPACE = "".join(map(chr, range(0x21)))
TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")
chars = (
    st.sampled_from("abcé中文日本語한국어Ωжß€\u00a0 \"#'<>%&;=?/\x7f\x01\U0001f600ｱ")
    | st.characters()
)


def by_character(query: str, codec: str) -> str:
    out: list[str] = []
    run = ""  # characters the encoding has, encoded together (ISO-2022-JP's escapes)
    for char in [*query, None]:
        if char is not None and _encodes(char, codec):
            run += char
            continue
        out.extend(f"%{b:02X}" if b in ESCAPED else chr(b) for b in run.encode(codec))
        run = ""
        if char is not None:
            out.append(f"%26%23{ord(char)}%3B")
    return "".join(out)


def _encodes(char: str, codec: str) -> bool:
    try:
        char.encode(codec)
    except UnicodeEncodeError:
        return False
    return True


@fuzz(300)
@given(
    query=st.text(chars, min_size=1, max_size=16),
    codec=st.sampled_from(CODECS),
    fragment=st.booleans(),
)
def test_a_query_is_written_as_a_character_at_a_time_would_write_it(
    query: str, codec: str, fragment: bool
) -> None:
    href = "/p?" + query.replace("#", "") + ("#frag#x" if fragment else "")
    written = query_in(href, codec)
    # As WHATWG's parser reads it first: spaces and controls at the ends stripped, tabs
    # and newlines removed.
    href = href.strip(C0_AND_SPACE).translate(TAB_OR_NEWLINE)
    query = href[3:].split("#", 1)[0]
    if query.isascii():
        assert written == href
    else:
        assert written == "/p?" + by_character(query, codec) + href[3 + len(query) :]
