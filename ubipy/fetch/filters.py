"""What the user asked to crawl beyond scope: URL patterns and response types.

``--include REGEX`` and ``--exclude REGEX`` (:class:`UrlFilter`) are searched
(``re.search``) in the normalised URL, before it is admitted or forwarded: a URL is
kept when it matches at least one include (if any is given) and no exclude, so a
filtered URL never crosses the wire and is never fetched. Seeds go through the same
filter; a seed it drops is refused with the reason, never silently. ``--max-depth``
travels with them (:meth:`UrlFilter.verdict_at`): a link is judged by it where it is
found, and an entry admitted before (by an earlier run, or by a peer that forwards it)
by the depth it was first found at, as Heritrix's Preselector does with recheckScope.

``--accept TYPE`` (:class:`MediaTypes`) says which responses are kept besides HTML:
HTML (``text/html``, ``application/xhtml+xml``) is always kept and parsed for links;
another type is kept (stored, not parsed) when accepted, and skipped otherwise: its
body is not read, and it is counted by :func:`type_family`.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable

from ubipy.fetch.fetcher import HTML_TYPES
from ubipy.fetch.sitemaps import is_sitemap

__all__ = ["Filtered", "MediaTypes", "UrlFilter", "type_family"]


class Filtered(enum.Enum):
    """Why a URL was filtered out; the value is said to the user (a refused seed's reason)."""

    EXCLUDED = "excluded by --exclude"
    NOT_INCLUDED = "matches no --include"
    # An entry an earlier run admitted deeper than this run's --max-depth.
    TOO_DEEP = "deeper than --max-depth"


class UrlFilter:
    """``--include`` and ``--exclude``, compiled once, and ``--max-depth``."""

    __slots__ = ("_exclude", "_include", "_max_depth")

    def __init__(
        self, include: Iterable[str] = (), exclude: Iterable[str] = (), max_depth: int | None = None
    ) -> None:
        """Raises ``re.error`` for a pattern that does not compile (the configuration
        has refused it already)."""
        self._include = tuple(re.compile(p) for p in include)
        self._exclude = tuple(re.compile(p) for p in exclude)
        self._max_depth = max_depth

    def __bool__(self) -> bool:
        return self.patterns or self._max_depth is not None

    @property
    def patterns(self) -> bool:
        """Whether there is an ``--include`` or ``--exclude``: what :meth:`verdict` can
        refuse a URL for (``--max-depth`` is judged apart where a link is found)."""
        return bool(self._include or self._exclude)

    def __str__(self) -> str:
        """The patterns, one a line ("+" include, "-" exclude), and the depth ("<" it):
        what a shard keeps to tell at its next start whether the filters changed."""
        depth = [] if self._max_depth is None else [f"<{self._max_depth}"]
        return "\n".join(
            [
                *(f"+{p.pattern}" for p in self._include),
                *(f"-{p.pattern}" for p in self._exclude),
                *depth,
            ]
        )

    def verdict(self, url: str) -> Filtered | None:
        """None when ``url`` is kept, why otherwise."""
        if self._include and not any(p.search(url) for p in self._include):
            return Filtered.NOT_INCLUDED
        if any(p.search(url) for p in self._exclude):
            return Filtered.EXCLUDED
        return None

    def verdict_at(self, url: str, depth: int) -> Filtered | None:
        """:meth:`verdict` for a frontier entry at ``depth``, or TOO_DEEP: None for a
        sitemap, which is how pages are found, not one of them (the filters judge what
        it lists). A narrower --max-depth at a restart was not applied to what the run
        before admitted (QA)."""
        if is_sitemap(depth):
            return None
        if self._max_depth is not None and depth > self._max_depth:
            return Filtered.TOO_DEEP
        return self.verdict(url)


class MediaTypes:
    """HTML and the ``--accept`` types (``type/subtype``, ``type/*`` or ``*/*``)."""

    __slots__ = ("_any", "_exact", "_families")

    def __init__(self, accept: Iterable[str] = ()) -> None:
        exact = set(HTML_TYPES)
        families: set[str] = set()
        for media in accept:
            kind, _, sub = media.strip().lower().partition("/")
            if sub == "*":
                families.add(kind)
            else:
                exact.add(f"{kind}/{sub}")
        self._any = "*" in families
        self._exact = frozenset(exact)
        self._families = frozenset(families)

    def allows(self, content_type: str | None) -> bool:
        """Whether a response of ``content_type`` (lower-case, no parameters; None:
        the server named none) is kept."""
        if self._any:
            return True
        if content_type is None:
            return False
        return content_type in self._exact or type_family(content_type) in self._families


def type_family(content_type: str | None) -> str:
    """The top-level type (``image`` of ``image/png``), ``none`` when there is none."""
    if not content_type:
        return "none"
    family, slash, _ = content_type.partition("/")
    return family if slash and family else "none"
