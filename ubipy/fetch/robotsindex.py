"""A robots.txt of many rules, matched through an index of the text each rule starts with.

protego (0.7) tries a URL against every rule with a wildcard or an end anchor, longest
first, until one matches: a robots.txt of 18,681 such rules (500 KiB, the most RFC
9309 asks a crawler to read) took 3.6 ms a URL, on the event loop, each time a page of
that host was taken (QA: 40 such hosts, a peer answering nobody for 1.6 s and
declared dead). A rule matches only a URL that starts with the literal text before its
first "*" (the whole pattern without one), so the rules are grouped by that text; a
URL is tried only against the groups that its own starts name, in protego's order,
and the first rule of them that matches decides, as in protego.

protego parses and groups; its rule set is read here through its internals (the
sorted rules, each pattern's text and match), which a later version may change: then
:func:`rule_index` gives None and protego matches as before, and the tests compare
both on many robots.txt. Fewer than ``INDEXED`` rules are matched by protego itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol
from urllib.parse import urlparse

from protego import Protego

__all__ = ["INDEXED", "RuleIndex", "rule_index"]

# Rules in the group that applies past which URLs are matched through the index.
INDEXED = 64


class _Pattern(Protocol):
    _pattern: str

    def match(self, url: str) -> bool: ...


class _Rule(Protocol):
    @property
    def field(self) -> str: ...

    @property
    def value(self) -> _Pattern: ...


class RuleIndex:
    """The rules of one group by their literal start; ``quote``: protego's quoting of
    a URL to the path and query its rules match."""

    __slots__ = ("_groups", "_lengths", "_quote", "_rules")

    def __init__(self, rules: Sequence[_Rule], quote: Callable[[str], str]) -> None:
        self._quote = quote
        # In protego's order (longest first, Allow before Disallow): the first that
        # matches decides.
        self._rules = rules
        # A rule's place in that order by its literal start; a list only where several
        # share one (most do not: 18,681 lists were 1.3 MB more).
        groups: dict[str, int | list[int]] = {}
        for i, rule in enumerate(rules):
            text = rule.value._pattern
            literal = text.partition("*")[0]
            if literal == text and text.endswith("$"):
                literal = text[:-1]
            group = groups.setdefault(literal, i)
            if isinstance(group, list):
                group.append(i)
            elif group != i:
                groups[literal] = [group, i]
        self._groups = groups
        self._lengths = sorted({len(literal) for literal in groups})

    def can_fetch(self, url: str) -> bool:
        """protego's ``can_fetch`` of ``url`` for the group indexed."""
        if "/robots.txt" in url and urlparse(url).path == "/robots.txt":
            return True  # as protego: robots.txt itself is never disallowed
        path = self._quote(url)
        groups, size = self._groups, len(path)
        candidates: list[int] = []
        for length in self._lengths:
            if length > size:
                break
            group = groups.get(path[:length])
            if isinstance(group, int):
                candidates.append(group)
            elif group is not None:
                candidates += group
        candidates.sort()
        rules = self._rules
        for i in candidates:
            if rules[i].value.match(path):
                return rules[i].field == "allow"
        return True


def rule_index(parser: Protego, agent: str) -> RuleIndex | None:
    """The index of the group of ``parser`` that applies to ``agent``, with protego's
    quoting of a URL to what its rules match; None when protego matches as fast (a
    few rules, none that apply) or its internals are not what this module reads."""
    try:
        from protego._utils import _quote_path

        rule_set = parser._get_matching_rule_set(agent)
        if rule_set is None or len(rule_set._rules) < INDEXED:
            return None
        return RuleIndex(rule_set._rules, _quote_path)
    except (ImportError, AttributeError, TypeError):
        return None
