"""A link's query as a page in a legacy encoding (GBK, Shift_JIS...) asks for it: WHATWG
URL's "percent-encode after encoding" (see :func:`query_in`), for the links
:func:`ubipy.fetch.parse.parse_html` resolves."""

from __future__ import annotations

import codecs
import re
from typing import Final

__all__ = ["query_in"]


def query_in(href: str, codec: str) -> str:
    """``href`` with its query (past ``?``, up to ``#``) as WHATWG's "percent-encode
    after encoding" writes it: in ``codec``, the bytes of the query percent-encode set
    (controls, space, ``"#'<>``, past ASCII) escaped, and a character the encoding
    lacks as ``%26%23N%3B``. On a GBK page ``?q=中文`` asks for ``?q=%D6%D0%CE%C4``,
    where reading it in UTF-8 asked a server that reads GBK for something else.

    As WHATWG's parser does first, and as :func:`resolve_link` does: spaces and
    controls at either end stripped, tabs and newlines removed (escaped here, an
    attribute wrapped across lines, or with a space at its end, was another URL)."""
    href = href.strip(_C0_AND_SPACE).translate(_TAB_OR_NEWLINE)
    begin = href.find("?")
    if begin < 0:
        return href
    end = href.find("#", begin)
    end = len(href) if end < 0 else end
    query = href[begin + 1 : end]
    if query.isascii():
        return href
    # Encoded whole, in C (ISO-2022-JP's escapes span characters; a character at a
    # time cost seconds on a page of long queries), and escaped a run at a time.
    raw = query.encode(codec, errors=_AS_ESCAPED_REFERENCE)
    out: list[str] = []
    at = 0
    for kept in _KEPT_IN_QUERY.finditer(raw):
        if kept.start() > at:
            out.append("%" + raw[at : kept.start()].hex("%").upper())
        out.append(kept.group().decode("ascii"))
        at = kept.end()
    if at < len(raw):
        out.append("%" + raw[at:].hex("%").upper())
    return href[: begin + 1] + "".join(out) + href[end:]


def _escaped_reference(error: UnicodeError) -> tuple[str, int]:
    """A character the encoding lacks, as WHATWG writes it: ``&#N;``, escaped."""
    assert isinstance(error, UnicodeEncodeError)
    lacking = error.object[error.start : error.end]
    return "".join(f"%26%23{ord(char)}%3B" for char in lacking), error.end


_C0_AND_SPACE: Final = "".join(map(chr, range(0x21)))
_TAB_OR_NEWLINE: Final = str.maketrans("", "", "\t\n\r")
_AS_ESCAPED_REFERENCE: Final = "ubipy-query-reference"
codecs.register_error(_AS_ESCAPED_REFERENCE, _escaped_reference)
# The bytes WHATWG URL's query percent-encode set leaves as they are, for special
# schemes: printable ASCII but ``"#'<>``.
_KEPT_IN_QUERY: Final = re.compile(rb"[\x21\x24-\x26\x28-\x3b\x3d\x3f-\x7e]+")
