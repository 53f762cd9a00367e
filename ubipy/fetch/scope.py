"""Which discovered URLs a crawl follows, relative to its seeds, and the user's
URL filters (--include, --exclude) beside them."""

from __future__ import annotations

from collections.abc import Iterable

from ubipy.config import BoundsConfig, Scope
from ubipy.fetch.filters import UrlFilter
from ubipy.fetch.urls import host_key, registered_domain

_VERDICT_CACHE = 100_000


def _hostname(key: str) -> str:
    # host_key keeps a non-default port; scope is about names, not ports.
    if key.startswith("["):
        return key[: key.index("]") + 1]
    return key.rsplit(":", 1)[0] if key.count(":") == 1 else key


class ScopeFilter:
    """Remembers the seeds' hosts or domains and tests URLs against them; carries the
    URL filters, which apply where scope does (to seeds and to links, before routing)."""

    def __init__(
        self, scope: Scope, roots: Iterable[str] = (), filters: UrlFilter | None = None
    ) -> None:
        self.scope = scope
        self.filters = filters or UrlFilter()
        self._roots: set[str] = set(roots)
        # Every link asks; the public-suffix lookup is worth remembering per host.
        self._verdicts: dict[str, bool] = {}

    @classmethod
    def of(cls, bounds: BoundsConfig, roots: Iterable[str] = ()) -> ScopeFilter:
        """The scope and filters ``bounds`` asks for, widened by ``roots``."""
        return cls(bounds.scope, roots, UrlFilter(bounds.include, bounds.exclude))

    @property
    def roots(self) -> frozenset[str]:
        return frozenset(self._roots)

    def _root_of(self, host: str) -> str:
        name = _hostname(host)
        return name if self.scope is Scope.HOST else registered_domain(name)

    def add_seed(self, url: str) -> bool:
        """Widen the scope to a seed's host or domain; True if it was new."""
        if self.scope is Scope.ANY:
            return False
        root = self._root_of(host_key(url))
        if root in self._roots:
            return False
        self._roots.add(root)
        self._verdicts.clear()
        return True

    def add_roots(self, roots: Iterable[str]) -> bool:
        """Take roots another peer's seeds brought; True if any was new."""
        new = set(roots) - self._roots
        if not new or self.scope is Scope.ANY:
            return False
        self._roots |= new
        self._verdicts.clear()
        return True

    def allows_host(self, host: str) -> bool:
        if self.scope is Scope.ANY:
            return True
        verdict = self._verdicts.get(host)
        if verdict is None:
            if len(self._verdicts) >= _VERDICT_CACHE:
                self._verdicts.clear()
            verdict = self._verdicts[host] = self._root_of(host) in self._roots
        return verdict


def path_trap(url: str, limit: int) -> bool:
    """Whether a segment of the URL's path occurs more than ``limit`` times
    (:func:`path_repeats`). A segment occurs no more often than the URL has slashes
    past its scheme's two, and most URLs have too few: one C pass answers for them."""
    return url.count("/") - 2 > limit and path_repeats(url) > limit


def path_repeats(url: str) -> int:
    """How often the most repeated segment occurs in the URL's path.

    Crawler traps grow paths by repeating themselves (``/a/b/a/b/a/b/``); a
    normal site rarely repeats a segment more than twice.
    """
    start = url.find("/", url.find("//") + 2)
    if start < 0:
        return 0
    end = len(url)
    for mark in "?#":
        i = url.find(mark, start)
        if i >= 0:
            end = min(end, i)
    parts = url[start:end].split("/")
    distinct = set(parts)
    if len(distinct) == len(parts):  # nearly every URL: no part twice, one C pass
        return 1 if len(distinct) > 1 or parts[0] else 0
    segments = [s for s in parts if s]
    if len(segments) < 2:
        return len(segments)
    counts: dict[str, int] = {}
    for seg in segments:
        counts[seg] = counts.get(seg, 0) + 1
    return max(counts.values())
