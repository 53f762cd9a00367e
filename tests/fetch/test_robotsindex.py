"""A robots.txt of many rules is matched through an index of their literal starts
(ubipy.fetch.robotsindex): the same answers as protego's, trying a URL against a
handful of rules instead of all of them."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from protego import Protego
from protego._urlpattern import _URLPattern

from ubipy.fetch import robotsindex
from ubipy.fetch.robots import PRODUCT_TOKEN, RobotsRules
from ubipy.fetch.robotsindex import INDEXED, rule_index

# Pieces of paths and patterns: overlapping on purpose, so that rules share starts,
# wildcards meet literals, and an end anchor falls on and off a URL's end.
_PIECES = ["/", "a", "b", "ab", "x1", "%41", "A", "é", "?", "=", ".html", "$", "*", "-", "~"]
_piece = st.sampled_from(_PIECES)
_path = st.lists(_piece.filter(lambda p: p not in "*$"), max_size=8).map(
    lambda parts: "/" + "".join(parts)
)
_pattern = st.lists(_piece, max_size=7).map(lambda parts: "/" + "".join(parts))
_rule = st.tuples(st.sampled_from(["Allow", "Disallow"]), _pattern)


def _robots(rules: list[tuple[str, str]], filler: int) -> bytes:
    """``rules`` in the crawler's group, past ``filler`` others that match nothing of
    ``_PIECES`` (the index takes a group of INDEXED rules or more)."""
    lines = ["User-agent: *"]
    lines += [f"{field}: {value}" for field, value in rules]
    lines += [f"Disallow: /zz{i}*q" for i in range(filler)]
    return ("\n".join(lines) + "\n").encode()


@settings(max_examples=300, deadline=None)
@given(rules=st.lists(_rule, min_size=1, max_size=40), paths=st.lists(_path, max_size=20))
def test_the_index_answers_as_protego_does(rules: list[tuple[str, str]], paths: list[str]) -> None:
    body = _robots(rules, INDEXED)
    protego = Protego.parse(body.decode())
    robots = RobotsRules.parse(body)
    assert robots._index is not None
    for path in [*paths, "/robots.txt", "/zz3/q", "/zz3/aqa"]:
        url = "http://example.com" + path
        assert robots.allowed(url) == protego.can_fetch(url, PRODUCT_TOKEN), (rules, path)


def test_many_rules_of_one_start_answer_as_protego_does() -> None:
    """All of them tried for every URL (their patterns split once)."""
    lines = ["User-agent: *", "Allow: /*q5$", "Allow: /*q7*z"]
    lines += [f"Disallow: /*q{i}" for i in range(100)]
    text = "\n".join(lines) + "\n"
    robots, protego = RobotsRules.parse(text.encode()), Protego.parse(text)
    assert robots._index is not None
    for path in ["/a", "/aq5", "/aq55", "/q7", "/q7z", "/xq7yz", "/q99x", "/q100", "/q"]:
        url = "http://example.com" + path
        assert robots.allowed(url) == protego.can_fetch(url, PRODUCT_TOKEN), path


def test_a_few_rules_are_left_to_protego() -> None:
    assert RobotsRules.parse(_robots([("Disallow", "/a*b")], INDEXED - 2))._index is None
    many = RobotsRules.parse(_robots([("Disallow", "/a*b")], INDEXED))
    assert many._index is not None
    assert not many.allowed("http://example.com/a/b")
    assert many.allowed("http://example.com/b/a")


def test_protego_matches_alone_when_its_rule_set_is_not_what_the_index_reads() -> None:
    """A later protego may keep its rules otherwise: then it matches as before."""
    parser = Protego.parse(_robots([("Disallow", "/a*b")], INDEXED).decode())
    for rule_set in parser._user_agents.values():
        del rule_set._rules
    assert rule_index(parser, PRODUCT_TOKEN) is None


@contextmanager
def _counted(owner: object, name: str) -> Iterator[list[int]]:
    """Counts the calls of ``owner``'s function ``name``."""
    counted = [0]
    real = getattr(owner, name)

    def counting(*args: object) -> object:
        counted[0] += 1
        return real(*args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(owner, name, counting)
        yield counted


def _qas_robots() -> bytes:
    """The QA's robots.txt: 500 KiB of 18,681 wildcard rules, each starting with a
    path of its own."""
    lines, size, i = ["User-agent: *"], 0, 0
    while size < 500 * 1024 - 100:
        line = f"Disallow: /{i}/*a*b*c*d*e*f*g*h*$" if i % 2 else f"Allow: /x{i}*y*z*"
        lines.append(line)
        size, i = size + len(line) + 1, i + 1
    return ("\n".join(lines) + "\n").encode()


def test_a_url_is_tried_against_the_rules_that_start_as_it_does() -> None:
    """protego tried every URL against all 18,681 rules (3.6 ms a URL)."""
    body = _qas_robots()
    robots = RobotsRules.parse(body)
    with _counted(robotsindex, "_matches") as counted:
        assert not robots.allowed("http://example.com/1/xaxbxcxdxexfxgxh")
        assert robots.allowed("http://example.com/1/page.html")
        assert robots.allowed("http://example.com/x2/y/z")
        assert robots.allowed("http://example.com/elsewhere")
    assert counted[0] <= 8
    with _counted(_URLPattern, "match") as counted:
        Protego.parse(body.decode()).can_fetch("http://example.com/elsewhere", "ubipy")
    assert counted[0] > 18_000  # what the index spares


def test_many_rules_kept_leave_the_garbage_collector_little_to_scan() -> None:
    """protego's parse of the QA's robots.txt holds some 75,000 objects the collector
    scans at each full collection: 40 hosts' held a peer's loop up to 1.2 s a
    collection (QA). The rules kept of it are a few dozen, and what the parse made
    goes at once, without waiting for a collection (0.2 to 0.5 s each, QA)."""
    body = _qas_robots()
    gc.collect()
    before = len(gc.get_objects())
    gc.disable()
    try:
        robots = RobotsRules.parse(body)
        left = [o for o in gc.get_objects() if isinstance(o, (Protego, _URLPattern))]
        assert left == []
    finally:
        gc.enable()
    gc.collect()
    assert len(gc.get_objects()) - before < 100
    assert not robots.allowed("http://example.com/1/xaxbxcxdxexfxgxh")
