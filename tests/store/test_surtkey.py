"""SURT keys made without the surt package for plain URLs: the same as its own."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ubipy.store.surtkey import _plain_key, _surt, surt_key

_LABEL = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)
_SEGMENT = st.text("abcXYZ019._~-", min_size=0, max_size=6)
_ARG = st.text("abAB01._~-", min_size=0, max_size=5)


@st.composite
def plain_urls(draw: st.DrawFn) -> str:
    labels = draw(st.lists(_LABEL, min_size=1, max_size=3))
    prefix = draw(st.sampled_from(["", "www.", "www2.", "wwwx."]))
    host = prefix + ".".join([*labels, draw(st.sampled_from(["com", "org", "test", "xyz"]))])
    path = "/" + "/".join(draw(st.lists(_SEGMENT, max_size=4)))
    url = draw(st.sampled_from(["http://", "https://"])) + host + path
    args = draw(st.lists(st.tuples(_ARG, st.sampled_from(["", "="]), _ARG), max_size=4))
    if args:
        url += "?" + "&".join(k + eq + v for k, eq, v in args)
    return url


@settings(max_examples=3000, deadline=None)
@given(plain_urls())
def test_a_plain_urls_key_is_the_surt_packages(url: str) -> None:
    assert surt_key(url) == _surt()(url)


@pytest.mark.parametrize(
    "url",
    [
        "http://www.Example.com/A/b/",
        "http://example.com/a//b",
        "http://example.com/a/./b",
        "http://example.com/a/../b",
        "http://example.com:8080/a",
        "http://user@example.com/a",
        "http://127.0.0.1/a",
        "http://0x7f.1/a",
        "http://example.com/a?",
        "http://example.com/a?JSESSIONID=0123456789abcdef0123456789abcdef&b=1",
        "http://example.com/a?sid=0123456789abcdef0123456789abcdef",
        "http://example.com/a%20b?c=%41",
        "http://example.com/a#frag",
        "http://xn--bcher-kva.example/a",
        "http://example.com./a",
    ],
)
def test_any_other_url_is_the_surt_packages_too(url: str) -> None:
    assert surt_key(url) == _surt()(url)


def test_most_crawled_urls_are_plain() -> None:
    rng = random.Random(1)
    urls = [f"http://h{rng.randrange(999):03d}.synth.test/p/{n}.html" for n in range(100)]
    assert all(_plain_key(u) is not None for u in urls)
    assert _plain_key("http://www.example.com/Path/?b=2&a=1") == "com,example)/path?a=1&b=2"
