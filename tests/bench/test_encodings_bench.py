"""bench/encodings.py: undeclared legacy pages of a whole paragraph are all read in
their encoding, under any domain (a title alone may still be read in another code
page, fewer of them under their country's domain)."""

from __future__ import annotations

import pytest

from bench.encodings import DOMAINS, TEXTS, wrong


@pytest.mark.parametrize("domains", [False, True])
def test_undeclared_paragraphs_are_read_in_their_encoding(domains: bool) -> None:
    result = wrong(runs=2, seed=1, domains=domains)
    assert {codec: result[codec, "long"][0] for codec in TEXTS} == dict.fromkeys(TEXTS, 0)


def test_every_text_has_its_countrys_domain() -> None:
    assert {codec: len(texts) for codec, texts in TEXTS.items()} == {
        codec: len(tlds) for codec, tlds in DOMAINS.items()
    }
