"""A robots.txt of many rules, kept compact and matched through an index of the text
each rule starts with.

protego (0.7) tries a URL against every rule with a wildcard or an end anchor, longest
first, until one matches: a robots.txt of 18,681 such rules (500 KiB, the most RFC
9309 asks a crawler to read) took 3.6 ms a URL, on the event loop, each time a page of
that host was taken (QA: 40 such hosts, a peer answering nobody for 1.6 s and declared
dead). A rule matches only a URL that starts with the literal text before its first
"*" (the whole pattern without one), so the rules are grouped by that text; a URL is
tried only against the groups that its own starts name, in protego's order, and the
first rule of them that matches decides, as in protego.

protego's parse of such a file also holds 17.4 MB in some 75,000 objects that the
garbage collector scans: with 40 of them, each full collection held the loop 0.2 to
1.2 s, more with each (QA). Kept here: each rule's pattern, as protego quoted it, in
one tuple, its field in one bytes, the index in a dict of text to int or to a tuple of
ints (none of which the collector tracks once it has seen them), 5 MB; protego's
objects go. Where many rules share
their start ("/*a1", "/*a2"...), a URL is still tried against each, as protego tries
it (27,527 such rules: 19 ms a URL).

protego parses and groups; its rule set is read here through its internals (the
sorted rules, each pattern's quoted text, its URL quoting), and a rule's match is
protego's own, redone on the text: a later protego may change either, so
:func:`rule_index` gives None when the internals are not what it reads (protego then
matches as before), and the tests compare both on many robots.txt. Fewer than
``INDEXED`` rules are matched by protego itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from urllib.parse import urlparse

from protego import Protego

__all__ = ["INDEXED", "RuleIndex", "let_go", "rule_index"]

# Rules in the group that applies past which URLs are matched through the index.
INDEXED = 64
# Rules that share their literal start past which their patterns are split once.
_SPLIT_ONCE = 8


def _parts(pattern: str) -> tuple[str, ...] | None:
    """A wildcard pattern's literal parts, between its "*"s (its "$" left out); None
    for a pattern without one."""
    if "*" not in pattern:
        return None
    # protego makes one "*" of several first: an empty part between two matches anywhere.
    return tuple((pattern[:-1] if pattern.endswith("$") else pattern).split("*"))


def _matches(pattern: str, parts: tuple[str, ...] | None, path: str) -> bool:
    """Whether ``pattern`` (quoted: "*" any text, a last "$" the end; ``parts``: its
    :func:`_parts`) matches ``path``, as protego's ``_URLPattern.match``."""
    if parts is None:
        if pattern.endswith("$"):
            return path == pattern[:-1]
        return path.startswith(pattern)
    if not path.startswith(parts[0]):
        return False
    pos = len(parts[0])
    for part in parts[1:-1]:
        found = path.find(part, pos)
        if found < 0:
            return False
        pos = found + len(part)
    last = parts[-1]
    if pattern.endswith("$"):
        end = len(path) - len(last)
        return end >= pos and path[end:] == last
    return not last or path.find(last, pos) >= 0


class RuleIndex:
    """The rules of one group, in protego's order (longest first, Allow before
    Disallow: the first that matches decides), by their literal start; ``quote``:
    protego's quoting of a URL to the path and query its rules match."""

    __slots__ = ("_allows", "_groups", "_lengths", "_parts", "_patterns", "_quote")

    def __init__(self, rules: Sequence[tuple[bool, str]], quote: Callable[[str], str]) -> None:
        self._quote = quote
        self._patterns = tuple(pattern for _, pattern in rules)
        self._allows = bytes(allow for allow, _ in rules)
        groups: dict[str, int | list[int]] = {}
        for i, pattern in enumerate(self._patterns):
            literal = pattern.partition("*")[0]
            if literal == pattern and pattern.endswith("$"):
                literal = pattern[:-1]
            group = groups.setdefault(literal, i)
            if isinstance(group, list):
                group.append(i)
            elif group != i:
                groups[literal] = [group, i]
        # Tuples, not lists: the collector stops tracking a tuple of ints, and a dict
        # of nothing else, once it has looked at them.
        self._groups = {k: v if isinstance(v, int) else tuple(v) for k, v in groups.items()}
        # Split once where many rules share a start, which a URL is tried against in
        # turn; elsewhere as each is tried (kept for all, they doubled what is held).
        self._parts = {
            i: parts
            for group in groups.values()
            if isinstance(group, list) and len(group) >= _SPLIT_ONCE
            for i in group
            if (parts := _parts(self._patterns[i])) is not None
        }
        self._lengths = tuple(sorted({len(literal) for literal in groups}))

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
        for i in candidates:
            pattern = self._patterns[i]
            parts = self._parts.get(i) or _parts(pattern)
            if _matches(pattern, parts, path):
                return bool(self._allows[i])
        return True


def rule_index(parser: Protego, agent: str) -> RuleIndex | None:
    """The index of the group of ``parser`` that applies to ``agent``; None when
    protego matches as fast (a few rules, none that apply) or its internals are not
    what this module reads."""
    try:
        from protego._utils import _quote_path

        rule_set = parser._get_matching_rule_set(agent)
        if rule_set is None or len(rule_set._rules) < INDEXED:
            return None
        rules = [(rule.field == "allow", rule.value._pattern) for rule in rule_set._rules]
        if not all(isinstance(pattern, str) for _, pattern in rules):
            return None
        return RuleIndex(rules, _quote_path)
    except (ImportError, AttributeError, TypeError):
        return None


def let_go(parser: Protego) -> None:
    """Break the cycle each of ``parser``'s rule sets makes with it, which it is not
    used after: its objects then go with the last reference to it, not at the
    collector's next full collection (QA: those of 40 large robots.txt took 0.2 to 0.5
    s a collection to free)."""
    for rule_set in getattr(parser, "_user_agents", {}).values():
        if hasattr(rule_set, "_parser_instance"):
            rule_set._parser_instance = None
