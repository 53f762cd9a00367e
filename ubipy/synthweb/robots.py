"""The model's own robots.txt rules: rendered to text for the server, matched in code.

The referee and the ground truth ask the model whether a path is allowed; they must not
parse robots.txt with the same kind of library the crawler uses, so the rules are kept as
data here and matched with RFC 9309 semantics (longest match wins, Allow wins a tie,
`*` matches any run of characters, a trailing `$` anchors at the end).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum


class RobotsKind(Enum):
    """How a host serves /robots.txt."""

    PLAIN = "plain"  # 200, allow all
    ABSENT = "absent"  # 404: everything allowed
    SUBTREE = "subtree"  # 200, Disallow: /private/
    WILDCARD = "wildcard"  # 200, Allow/Disallow with * and $
    CRAWL_DELAY = "crawl-delay"  # 200 with Crawl-delay
    TRANSIENT = "transient"  # 503 the first N times, then 200 with Disallow: /private/
    BROKEN = "broken"  # 500 for ever: nothing may be fetched
    REDIRECT = "redirect"  # 301 to /robots-real.txt, which is 200 with Disallow: /private/
    # The hostile web (hostile.py):
    HUGE = "huge"  # 200, megabytes: Disallow: /early/ first, Disallow: /late/ past 500 KiB
    HANG = "hang"  # never answers: unreachable, so nothing may be fetched


@dataclass(frozen=True, slots=True)
class Rule:
    allow: bool
    pattern: str


@dataclass(frozen=True, slots=True)
class RobotsRules:
    """The `User-agent: *` group that applies to the crawler, plus decoys for other agents."""

    rules: tuple[Rule, ...] = ()
    crawl_delay: float | None = None
    # A group for another agent: a crawler that picks the wrong group disobeys the rules.
    decoy_agent: str | None = None

    def allows(self, path_and_query: str) -> bool:
        if path_and_query == "/robots.txt":
            return True
        best: Rule | None = None
        for rule in self.rules:
            if not _matches(rule.pattern, path_and_query):
                continue
            if (
                best is None
                or len(rule.pattern) > len(best.pattern)
                or (len(rule.pattern) == len(best.pattern) and rule.allow)
            ):
                best = rule
        return best is None or best.allow

    def render(self) -> bytes:
        lines: list[str] = ["# synthweb robots.txt"]
        if self.decoy_agent:
            lines += [f"User-agent: {self.decoy_agent}", "Disallow: /", ""]
        lines.append("User-agent: *")
        if self.crawl_delay is not None:
            lines.append(f"Crawl-delay: {self.crawl_delay:g}")
        lines += [f"{'Allow' if r.allow else 'Disallow'}: {r.pattern}" for r in self.rules]
        if not self.rules:
            lines.append("Disallow:")
        return ("\n".join(lines) + "\n").encode()


_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


def _matches(pattern: str, path: str) -> bool:
    regex = _REGEX_CACHE.get(pattern)
    if regex is None:
        anchored = pattern.endswith("$")
        body = pattern[:-1] if anchored else pattern
        text = ".*".join(re.escape(part) for part in body.split("*"))
        regex = re.compile(text + (r"\Z" if anchored else ""), re.DOTALL)
        _REGEX_CACHE[pattern] = regex
    return regex.match(path) is not None


PRIVATE = RobotsRules(rules=(Rule(False, "/private/"),))
WILDCARD = RobotsRules(
    rules=(
        Rule(False, "/*.pdf$"),
        Rule(False, "/private/"),
        Rule(True, "/private/public*"),
    ),
    decoy_agent="otherbot",
)

EARLY = RobotsRules(rules=(Rule(False, "/early/"),))


def rules_for(kind: RobotsKind, crawl_delay: float) -> RobotsRules | None:
    """The rules a crawler ends up with for `kind`; None means nothing may be fetched."""
    if kind in (RobotsKind.BROKEN, RobotsKind.HANG):
        return None
    if kind is RobotsKind.HUGE:
        # Only what a parser reading the first 500 KiB (RFC 9309 §2.5) sees.
        return EARLY
    if kind in (RobotsKind.SUBTREE, RobotsKind.TRANSIENT, RobotsKind.REDIRECT):
        return PRIVATE
    if kind is RobotsKind.WILDCARD:
        return WILDCARD
    if kind is RobotsKind.CRAWL_DELAY:
        return RobotsRules(crawl_delay=crawl_delay)
    return RobotsRules()
