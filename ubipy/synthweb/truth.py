"""The ground truth: exactly the URLs a correct crawl requests, from the model alone.

No HTML is parsed here: links come from `SyntheticWeb.links_of`, redirects from
`redirect_of`, robots from the model's rules, so a bug in the crawler's parser cannot hide
behind the same bug in the judge. The semantics mirror the crawler's specification:

* seeds have depth 0, a followable link adds one, a redirect's target keeps the depth of
  the redirecting URL; nothing deeper than `max_depth` is admitted; each URL is requested
  once. Depths are minimal (breadth-first): a crawler that admits a URL first by a longer
  path and never lowers its depth can fall short of this truth under `max_depth`.
* scope, relative to the seeds: "host", "domain" (last two labels of the host) or "any".
* `keep`, the user's filters (--include, --exclude): a page's URL, a seed's too, that it
  refuses is not admitted; sitemaps are read whatever it says, what they list is judged.
* a host's robots.txt is requested before its first admitted URL, following up to
  `max_robots_redirects` redirects (each hop is requested); 2xx gives the rules, 4xx or too
  many redirects allow everything, 5xx is retried up to `robots_attempts` times in all and,
  if it never succeeds, none of the host's pages is requested.
* 3xx responses yield their Location; only 2xx HTML yields links.
* a URL longer than `max_url_length`, or whose path repeats one segment more than
  `max_path_repeats` times, is refused (links with control characters or no valid host
  never have a target in the model at all).
* no response at all (a robots.txt that hangs) counts as a failure, like a 5xx.
* sitemaps (unless `sitemaps=False`, or `max_depth` is 0): once a host's robots.txt is
  resolved (not unavailable), the sitemaps its Sitemap lines name (2xx only) and its
  /sitemap.xml are admitted like links (scope, length, path repeats; no depth) and
  requested if robots.txt allows; a sitemap an in-scope host's robots.txt names on
  another host (a cross-submission) whatever the scope. A sitemap lists pages,
  admitted at depth 1, or
  sitemaps (an index); an index listed in an index is requested but not read. A
  sitemap's redirect is a sitemap. What each sitemap lists is the model's data
  (`web.sitemaps.documents`), not parsed XML; a URL is requested once, as a sitemap or
  as a page, whichever admitted it first.

The hostile web (`WebSpec(hostile=True)`) has trap hosts with infinitely many pages; which
of them a crawl fetches depends on its order, so the truth keeps only their fixed pages
(`SyntheticWeb.is_trap`), and the referee bounds the rest: `over_budget`,
`repeated_segments`, and `unexpected(truth, ignore_hosts=web.trap_hosts())`. Every other
hostile URL is exact: failing URLs are in the truth because a correct crawl requests them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from enum import Enum

from ubipy.synthweb.model import SyntheticWeb
from ubipy.synthweb.urls import (
    normalize_url,
    registered_domain,
    resolve,
    segment_repeats,
    split_url,
)

SCOPES = ("host", "domain", "any")
# The depth of the pages a sitemap lists: one hop, as from the site's root.
LISTED_DEPTH = 1


class RobotsOutcome(Enum):
    RULES = "rules"  # 2xx: the model's rules apply
    ALLOW_ALL = "allow-all"  # 4xx, or too many redirects
    UNAVAILABLE = "unavailable"  # 5xx on every attempt: nothing may be fetched


def resolve_robots(
    web: SyntheticWeb, host: str, *, attempts: int = 3, max_redirects: int = 5
) -> tuple[RobotsOutcome, list[str]]:
    """What a correct robots.txt fetch for `host` ends with, and every URL it requests."""
    url = f"http://{host}/robots.txt"
    requested: list[str] = []
    redirects = 0
    while True:
        requested.append(url)
        h, target = split_url(url)
        status, location = 500, None
        for attempt in range(max(1, attempts)):
            response = web.respond(h, target, prior_requests=attempt)
            status = response.status
            location = dict(response.headers).get("Location")
            if 0 < status < 500:  # status 0: no answer (a hang, a reset), as bad as a 5xx
                break
        if status >= 500 or status == 0:
            return RobotsOutcome.UNAVAILABLE, requested
        if 300 <= status < 400 and location is not None:
            redirects += 1
            target_url = resolve(url, location)
            if redirects > max_redirects or target_url is None:
                return RobotsOutcome.ALLOW_ALL, requested
            url = target_url
            continue
        if 200 <= status < 300:
            return RobotsOutcome.RULES, requested
        return RobotsOutcome.ALLOW_ALL, requested


def ground_truth(
    web: SyntheticWeb,
    seeds: Iterable[str],
    *,
    max_depth: int | None = None,
    scope: str = "domain",
    robots_attempts: int = 3,
    max_robots_redirects: int = 5,
    max_pages_per_host: int | None = None,
    max_path_repeats: int | None = 3,
    max_url_length: int = 2048,
    sitemaps: bool = True,
    keep: Callable[[str], bool] | None = None,
) -> set[str]:
    """The URLs a correct crawl requests (see the module's docstring).

    `max_pages_per_host` does not cut the truth, which would make it depend on crawl order:
    a ValueError says when some host's (non-robots) truth exceeds it; otherwise the budget
    is the referee's to check (`over_budget`)."""
    if scope not in SCOPES:
        raise ValueError(f"scope must be one of {SCOPES}, not {scope!r}")
    seed_urls = [normalize_url(s) for s in seeds]
    seed_hosts = {split_url(s)[0] for s in seed_urls}
    seed_domains = {registered_domain(h) for h in seed_hosts}

    def in_scope(host: str) -> bool:
        if scope == "host":
            return host in seed_hosts
        if scope == "domain":
            return registered_domain(host) in seed_domains
        return True

    truth: set[str] = set()
    robots: dict[str, RobotsOutcome] = {}
    seen: set[str] = set()
    levels: list[deque[str]] = []
    # Sitemaps admitted and not yet requested: (URL, listed in an index).
    maps: deque[tuple[str, bool]] = deque()
    read_sitemaps = sitemaps and (max_depth is None or max_depth >= LISTED_DEPTH)
    lowest = 0  # no level below this one has URLs waiting

    def admit(
        url: str, depth: int | None, indexed: bool = False, *, beyond_scope: bool = False
    ) -> None:
        """`url` found at `depth`, or (None) a sitemap; `beyond_scope`: whatever the
        scope (a cross-submitted sitemap)."""
        nonlocal lowest
        if url in seen or (max_depth is not None and depth is not None and depth > max_depth):
            return
        if len(url) > max_url_length or web.is_trap(url):
            return
        if max_path_repeats is not None and segment_repeats(split_url(url)[1]) > max_path_repeats:
            return
        if not beyond_scope and not in_scope(split_url(url)[0]):
            return
        if depth is not None and keep is not None and not keep(url):
            return
        seen.add(url)
        if depth is None:
            maps.append((url, indexed))
            return
        while len(levels) <= depth:
            levels.append(deque())
        levels[depth].append(url)
        lowest = min(lowest, depth)  # a sitemap's pages are at depth 1, whatever the level

    def allowed(url: str) -> bool:
        """Whether `url` is requested, its host's robots.txt resolved first (and the
        host's sitemaps admitted then)."""
        host, target = split_url(url)
        outcome = robots.get(host)
        if outcome is None:
            outcome, hops = resolve_robots(
                web, host, attempts=robots_attempts, max_redirects=max_robots_redirects
            )
            robots[host] = outcome
            truth.update(hops)
            if read_sitemaps and outcome is not RobotsOutcome.UNAVAILABLE:
                named = web.sitemaps.robots_lines(host) if outcome is RobotsOutcome.RULES else ()
                for sitemap in named:
                    admit(normalize_url(sitemap), None, beyond_scope=in_scope(host))
                admit(normalize_url(f"http://{host}/sitemap.xml"), None)
        if outcome is RobotsOutcome.UNAVAILABLE:
            return False
        return outcome is not RobotsOutcome.RULES or web.robots_allows(host, target)

    def read(url: str, indexed: bool) -> None:
        document = web.sitemaps.documents.get(url)
        if document is None:  # a 404, or a page that is no sitemap; a redirect is one
            location = web.redirect_of(url)
            if location is not None:
                admit(location, None, indexed)
        elif not document.index:
            for loc in document.locs:
                admit(normalize_url(loc), LISTED_DEPTH)
        elif not indexed:
            for loc in document.locs:
                admit(normalize_url(loc), None, True)

    for url in seed_urls:
        admit(url, 0)
    # Breadth-first by level; a redirect appends to the level being processed, a
    # sitemap's pages to level 1. Sitemaps are read as soon as they are admitted.
    while True:
        if maps:
            url, indexed = maps.popleft()
            if allowed(url):
                truth.add(url)
                read(url, indexed)
            continue
        while lowest < len(levels) and not levels[lowest]:
            lowest += 1
        if lowest >= len(levels):
            break
        depth = lowest
        url = levels[depth].popleft()
        if not allowed(url):
            continue
        truth.add(url)
        location = web.redirect_of(url)
        if location is not None:
            admit(location, depth)
            continue
        for link in web.links_of(url):
            admit(link, depth + 1)
    if max_pages_per_host is not None:
        pages: dict[str, int] = {}
        for url in truth:
            host, target = split_url(url)
            if target not in web.robots_paths(host):
                pages[host] = pages.get(host, 0) + 1
        over = {h: n for h, n in pages.items() if n > max_pages_per_host}
        if over:
            raise ValueError(f"hosts with more pages than the budget, order-dependent: {over}")
    return truth


def expected_titles(web: SyntheticWeb, urls: Iterable[str]) -> dict[str, str]:
    """The title a correct crawler stores for each of `urls` that is an HTML page the
    model renders from its description (a 200 with a `<title>`): white space collapsed,
    as parsers report it. The encodings web's pages are among them, in their scripts;
    hostile bodies made by hand, redirects, errors and 404s are not."""
    titles: dict[str, str] = {}
    for url in urls:
        page = web.page(url)
        if page is None or page.kind != "html" or page.status != 200:
            continue
        if page.special not in ("", "encoding"):
            continue
        title = " ".join(page.title.split())
        if title:
            titles[url] = title
    return titles


def expected_encodings(web: SyntheticWeb) -> dict[str, tuple[str, str]]:
    """For the encodings web's pages (`WebSpec(encodings=True)`), the encoding a correct
    crawler reads each in, by WHATWG name, and what decides it (bom, header, meta or
    detected: the WHATWG sniffing order, with a lying `<meta>` overruled by detection)."""
    return {} if web.encodings is None else dict(web.encodings.encodings)
