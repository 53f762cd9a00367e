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


def site_of(host: str) -> str:
    """The registrable domain of a ``HOST[:PORT]`` key (an IP literal: itself): the
    root a seed on it brings under ``--scope domain``."""
    return registered_domain(_hostname(host))


class ScopeFilter:
    """Remembers the seeds' hosts or domains and tests URLs against them; carries the
    URL filters, which apply where scope does (to seeds and to links, before routing).

    It also remembers the seeds' own hosts (``HOST[:PORT]``), whatever the scope: the
    user named those, so their addresses may be ones a crawler is otherwise refused
    (loopback, private). Only a seed the user gave counts, not a URL a seed's page
    redirects to, nor another port of the seed's address."""

    def __init__(
        self,
        scope: Scope,
        roots: Iterable[str] = (),
        filters: UrlFilter | None = None,
        seeds: Iterable[str] = (),
    ) -> None:
        self.scope = scope
        self.filters = filters or UrlFilter()
        self._roots: set[str] = set(roots)
        self._seeds: set[str] = set(seeds)
        # Every link asks; the public-suffix lookup is worth remembering per host.
        self._verdicts: dict[str, bool] = {}

    @classmethod
    def of(
        cls, bounds: BoundsConfig, roots: Iterable[str] = (), seeds: Iterable[str] = ()
    ) -> ScopeFilter:
        """The scope and filters ``bounds`` asks for, widened by ``roots``."""
        filters = UrlFilter(bounds.include, bounds.exclude, bounds.max_depth)
        return cls(bounds.scope, roots, filters, seeds)

    @property
    def roots(self) -> frozenset[str]:
        return frozenset(self._roots)

    @property
    def seeds(self) -> frozenset[str]:
        """The hosts seeds were on."""
        return frozenset(self._seeds)

    def seeded(self, host: str) -> bool:
        """Whether a seed was on ``host`` (a ``HOST[:PORT]`` key)."""
        return host in self._seeds

    def root_of(self, host: str) -> str:
        """The root a seed on ``host`` (a ``HOST[:PORT]`` key) brings."""
        return _hostname(host) if self.scope is Scope.HOST else site_of(host)

    def add_seed(self, url: str) -> bool:
        """Note a seed's host, and widen the scope to its host or domain; True if the
        root was new."""
        host = host_key(url)
        self._seeds.add(host)
        if self.scope is Scope.ANY:
            return False
        root = self.root_of(host)
        if root in self._roots:
            return False
        self._roots.add(root)
        self._verdicts.clear()
        return True

    def add_roots(self, roots: Iterable[str], seeds: Iterable[str] = ()) -> bool:
        """Take the roots and hosts another peer's seeds brought; True if any was new."""
        new_seeds = set(seeds) - self._seeds
        self._seeds |= new_seeds
        new = set(roots) - self._roots
        if not new or self.scope is Scope.ANY:
            return bool(new_seeds)
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
            verdict = self._verdicts[host] = self.root_of(host) in self._roots
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
