"""bench/encodings.py: undeclared legacy pages of a whole paragraph are all read in
their encoding (a title alone may still be read in another code page)."""

from __future__ import annotations

from bench.encodings import TEXTS, wrong


def test_undeclared_paragraphs_are_read_in_their_encoding() -> None:
    result = wrong(runs=2, seed=1)
    assert {codec: result[codec, "long"][0] for codec in TEXTS} == dict.fromkeys(TEXTS, 0)
