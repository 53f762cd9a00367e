"""What becomes of the links found on a page (or a redirect's Location), and of seeds:
resolved and normalised, kept only in scope, out of path traps and through the URL
filters (--include, --exclude), each counted where it went. This is before routing:
a URL dropped here is neither admitted nor sent to its owner.

A sitemap (a candidate at a sitemap depth) is not put through the URL filters: they
say which pages to crawl, and a sitemap is how pages are found, not one of them (an
``--include '^https://site/docs/'`` would otherwise drop /sitemap.xml, and with it
every page only the sitemap lists). What a sitemap lists is filtered as any link."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ubipy.fetch import (
    BadURL,
    ScopeFilter,
    fingerprint,
    host_key,
    is_sitemap,
    path_trap,
    resolve_link,
)
from ubipy.peer.crawlstats import CrawlStats
from ubipy.store import NewURL


def candidates(
    links: Iterable[str],
    base: str | None,
    depth: int,
    *,
    scope: ScopeFilter,
    max_path_repeats: int,
    stats: CrawlStats,
    hosts: Iterable[str] | None = None,
    beyond_scope: Callable[[str], bool] | None = None,
) -> list[NewURL]:
    """The URLs worth admitting among ``links`` (relative to ``base``, if given;
    already normalised otherwise), at ``depth``. ``hosts``: the host key of each of
    the normalised ``links``, when known (a parsed page's); empty or None: looked up.
    ``beyond_scope``: the hosts taken besides the scope's (a sitemap's, see
    :mod:`ubipy.peer.sitemapping`)."""
    out: list[NewURL] = []
    # Most crawls give no filters; sitemaps are read whatever they say (see above).
    filters = scope.filters if scope.filters.patterns and not is_sitemap(depth) else None
    known = iter(hosts) if hosts else None  # a ParsedPage made without hosts has ()
    for link in links:
        stats.links_seen += 1
        if base is not None:
            try:
                link, host, stripped = resolve_link(link, base)
            except BadURL as exc:
                stats.refused[exc.reason.value] += 1
                continue
            stats.credentials_stripped += stripped
        elif known is not None:
            host = next(known)
        else:
            host = host_key(link)
        if not scope.allows_host(host) and (beyond_scope is None or not beyond_scope(host)):
            stats.out_of_scope += 1
            continue
        if path_trap(link, max_path_repeats):
            stats.refused["path repeats"] += 1
            continue
        if filters is not None and (why := filters.verdict(link)) is not None:
            stats.filtered[why] += 1
            continue
        out.append(NewURL(fingerprint(link), link, host, depth))
    return out


def seed_candidates(
    urls: Iterable[str], *, scope: ScopeFilter, stats: CrawlStats, score: float = 0.0
) -> tuple[int, list[NewURL], list[tuple[str, str]]]:
    """Seeds as URLs to admit at depth 0, each widening ``scope``: how many were
    offered, the candidates, and the refused ones with why. The URL filters apply to
    seeds as to links: a seed they drop is refused (and counted), with the reason,
    and widens nothing. ``score``: each seed's under the crawl order (OPIC's cash)."""
    offered = 0
    refused: list[tuple[str, str]] = []
    out: list[NewURL] = []
    for raw in urls:
        offered += 1
        try:
            url, host, stripped = resolve_link(raw)
        except BadURL as exc:
            refused.append((raw, exc.reason.value))
            continue
        stats.credentials_stripped += stripped
        why = scope.filters.verdict(url)
        if why is not None:
            stats.filtered[why] += 1
            refused.append((raw, why.value))
            continue
        scope.add_seed(url)
        out.append(NewURL(fingerprint(url), url, host, 0, score))
    return offered, out, refused
