"""Sitemaps in the crawl: where they come from and what they bring (reading one is
``ubipy.fetch``'s, see its ``sitemaps`` module).

Where they come from. A host's robots.txt answer brings the sitemaps its ``Sitemap``
lines name and the host's own /sitemap.xml (unless ``--no-sitemaps``). Each is a
candidate at SITEMAP_DEPTH and goes where a link goes: normalised, kept in scope and
out of path traps, routed to its host's owner, admitted once there. The URL filters
(--include, --exclude) judge what a sitemap lists, not the sitemap itself. The
protocol lets a host's robots.txt name its sitemaps on another host (cross-submission:
a CDN, www.): when that host is in scope they are taken whatever the scope, and so are
the sitemaps they bring on their own host (an index's, a redirect's); what they list is
scope-checked as any link. The robots.txt of a host out of scope (such a sitemap's)
brings none: through it the crawl would widen a host at a time. A sitemap on
another host is therefore fetched by that host's owner, after that host's robots.txt
and through its politeness slot; and a URL is fetched once, as a sitemap or as a page,
whichever found it first, then read as what its answer is (:func:`read_as`): an HTML
page where a sitemap was looked for (/sitemap.xml redirected to the home page) as a
page if the filters take it (but a host's /sitemap.xml answered with a page, most
often a "not found" served with a 200, is no page), a sitemap given as a seed (or a
host's /sitemap.xml a link found first) as a sitemap.

What they bring, once fetched. A sitemap's URLs, as candidates at depth 1 (LISTED_DEPTH),
their ``lastmod`` kept beside them for recrawling; an index's sitemaps, as candidates at
INDEXED_SITEMAP_DEPTH (an index listed in an index is not read: the protocol forbids
it, and a hostile host could nest them without end); a redirect's Location, as a sitemap
at the same depth. The request is stored as a page row at its sitemap depth (its
status, its body) but counted as a sitemap, not as a page.

Under ``--recrawl`` a sitemap answered 200 is kept by the refresher like a page and asked
again (:mod:`ubipy.peer.refreshing`): each reading's URLs go through admission as before
(those already seen drop out), its lastmods are saved (the latest reading wins) and given
to the refresher, which checks them against the visits and takes them as hints
(:mod:`ubipy.peer.hints`).

What is past the protocol's limits (50,000 URLs a file, 50 MB uncompressed; Sitemap
lines past robots.txt's first thousand) is counted and skipped, and the first time
logged as a warning (each time after at debug level: a hostile host cannot flood the
log).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Sequence
from typing import Protocol

from ubipy.config import BoundsConfig
from ubipy.fetch import (
    INDEXED_SITEMAP_DEPTH,
    LISTED_DEPTH,
    SITEMAP_DEPTH,
    SITEMAP_PATH,
    Entry,
    FetchResult,
    RobotsFetch,
    RobotsRules,
    SitemapKind,
    content_digest,
    host_key,
    is_sitemap,
    path_and_query,
    site_of,
    sitemap_reading,
)
from ubipy.peer.commits import Commits, Found
from ubipy.peer.crawlstats import CrawlStats
from ubipy.peer.ordering import DAMPING
from ubipy.peer.reading import MAX_REDIRECTS, RedirectChains
from ubipy.peer.records import page_record
from ubipy.peer.refreshing import Refresher
from ubipy.steps import Steps, finished
from ubipy.store import Lastmod, NewURL, PageRecord

__all__ = ["SitemapCandidates", "Sitemapping", "sitemap_answered"]

log = logging.getLogger(__name__)


class SitemapCandidates(Protocol):
    """URLs (relative to a base URL) at a depth -> those to admit; ``beyond_scope``:
    the hosts taken besides the scope's."""

    def __call__(
        self,
        links: Sequence[str],
        base: str | None,
        depth: int,
        /,
        *,
        beyond_scope: Callable[[str], bool] | None = None,
    ) -> list[NewURL]: ...


def _anywhere(host: str) -> bool:
    return True


# Entries made candidates between two steps of a reading (about 10 ms).
_ENTRIES_A_STEP = 1000


class Sitemapping:
    def __init__(
        self,
        bounds: BoundsConfig,
        candidates: SitemapCandidates,
        stats: CrawlStats,
        *,
        keep_bodies: bool,
        in_scope: Callable[[str], bool],
        chains: RedirectChains | None = None,
        score: float = 0.0,
        seeded: Callable[[str], bool] = lambda host: True,
    ) -> None:
        """``chains``: the redirects in a row so far, the pages' (reading.py); ``score``:
        a sitemap the robots.txt of a seed's host (``seeded``) brings, as a seed's (its
        cash under a ranked order, which a sitemap splits over what it lists as a page
        over its links: at 0, a sitemap and what only it listed went after every URL
        with cash, a review). Other hosts' hold none: each host's robots.txt minting
        cash, a farm of subdomains outranked the seeds (a review)."""
        self._score = score
        self._seeded = seeded
        self._candidates = candidates
        self._chains = RedirectChains() if chains is None else chains
        self._in_scope = in_scope
        self._stats = stats
        self._keep_bodies = keep_bodies
        self._max_depth = bounds.max_depth
        # Their URLs are at depth 1: under --max-depth 0 sitemaps could bring nothing.
        self.enabled = bounds.sitemaps and (
            self._max_depth is None or self._max_depth >= LISTED_DEPTH
        )
        self._warned = False

    def named_by_robots(self, fetched: RobotsFetch, rules: RobotsRules) -> list[NewURL]:
        """The sitemaps a host's robots.txt answer brings, as candidates: its Sitemap
        lines (relative to where robots.txt was read, after any redirect) and the
        host's /sitemap.xml."""
        if not self.enabled:
            return []
        if over := rules.sitemaps_over:
            self._stats.sitemap_skipped += over
            self._past_limits(
                fetched.start, f"{over} Sitemap lines past the first {len(rules.sitemaps)} skipped"
            )
        # Cross-submission: an in-scope host's Sitemap lines, on any host.
        beyond = _anywhere if self._in_scope(host_key(fetched.start)) else None
        found = self._candidates(rules.sitemaps, fetched.url, SITEMAP_DEPTH, beyond_scope=beyond)
        found += self._candidates([SITEMAP_PATH], fetched.start, SITEMAP_DEPTH)
        if not self._score or not self._seeded(host_key(fetched.start)):
            return found
        return [u._replace(score=self._score) for u in found]

    def reads(self, entry: Entry, result: FetchResult, page: Callable[[str], bool]) -> bool:
        """Whether this answer's body will be read as a sitemap (see :func:`read_as`
        for ``page``)."""
        if result.is_html and not is_sitemap(entry.depth):
            return False  # a page's HTML is never read as one: the usual answer, first
        entry = read_as(entry, result, sitemaps=self.enabled, page=page)
        read = result.ok and not result.is_redirect and _succeeded(result)
        return read and is_sitemap(entry.depth)

    def answered(
        self,
        host: str,
        entry: Entry,
        result: FetchResult,
        fetched_at: float | None = None,
        read: Found | None = None,
    ) -> tuple[PageRecord, list[NewURL], list[Lastmod]]:
        """A sitemap's final answer (ended at ``fetched_at``, the wall clock; None:
        now): its page row, the URLs it brings, their lastmod; ``read``: what
        :meth:`reading` found in its body, if it was read already."""
        stats = self._stats
        found: list[NewURL] = []
        lastmods: list[Lastmod] = []
        if not result.ok:
            stats.answered(result)  # counts the failure (pages only count what is fine)
            log.info("sitemap failed: %s: %s", entry.url, result.detail)
        else:
            stats.sitemaps += 1
            if result.is_redirect:
                assert result.location is not None
                # Still a sitemap, at the same depth: a redirect is not a hop. On its
                # own host it is taken as this one was (perhaps beyond the scope).
                # MAX_REDIRECTS in a row, as for pages: /sitemap.xml?n=k redirected to
                # n=k+1 was followed for ever.
                hops, _ = self._chains.follow(entry.fp, seed_host=False)
                if hops > MAX_REDIRECTS:
                    stats.refused["redirect chain"] += 1
                    log.info("sitemap %s: over %d redirects in a row", entry.url, MAX_REDIRECTS)
                else:
                    found = self._candidates(
                        [result.location], entry.url, entry.depth, beyond_scope=host.__eq__
                    )
                    found = self._chains.lead_to(found, hops, False)
            elif _succeeded(result):
                if read is None:
                    read = finished(self.reading(host, entry, result))
                found, lastmods = read
            if found and entry.score > 0:
                share = DAMPING * entry.score / len(found)  # as a page's (ordering.py)
                found = [u._replace(score=share) for u in found]
        digest = content_digest(result.body) if result.ok else None
        page = page_record(
            entry, host, result, keep_body=self._keep_bodies, digest=digest, fetched_at=fetched_at
        )
        return page, found, lastmods

    def reading(self, host: str, entry: Entry, result: FetchResult) -> Steps[Found]:
        """What a sitemap's body (a success's) brings, in steps (:mod:`ubipy.steps`):
        its URLs (or an index's sitemaps) as candidates, and their lastmod."""
        sitemap = yield from sitemap_reading(result.body, truncated=result.truncated)
        stats, url = self._stats, entry.url
        # A host's /sitemap.xml answered with a page is most often a "not found" served
        # with a 200: no sitemap, not a faulty one (status said so of most sites, QA).
        soft_404 = result.is_html and path_and_query(url) == SITEMAP_PATH
        if sitemap.error is not None and not (soft_404 and not sitemap.entries):
            stats.sitemaps_faulty += 1  # a "billion laughs" one went unsaid (QA)
            log.info("sitemap %s: %s", url, sitemap.error)
        entries, skipped = sitemap.entries, sitemap.over_limit
        if sitemap.kind is SitemapKind.INDEX and entry.depth == INDEXED_SITEMAP_DEPTH:
            entries, skipped = (), skipped + len(entries)
            self._past_limits(url, "a sitemap index listed in a sitemap index, skipped")
        elif skipped:
            self._past_limits(url, f"{skipped} entries past the first {len(entries)} skipped")
        if sitemap.cut:
            stats.sitemaps_cut += 1
            self._past_limits(
                url,
                "read in part (over 50 MB, the body cap, or too many elements): the entries "
                "before the cut are taken",
            )
        stats.sitemap_skipped += skipped
        if sitemap.kind is SitemapKind.INDEX:
            # The protocol keeps an index's sitemaps on its site: on its own host they
            # are taken as the index was (perhaps beyond the scope).
            locs = [e.loc for e in entries]
            return self._candidates(locs, url, INDEXED_SITEMAP_DEPTH, beyond_scope=host.__eq__), []
        stats.sitemap_urls += len(entries)
        if self._max_depth is not None and self._max_depth < LISTED_DEPTH:
            stats.too_deep += len(entries)
            return [], []
        found: list[NewURL] = []
        lastmods: list[Lastmod] = []
        site = site_of(host)
        for i, listed in enumerate(entries):
            if i % _ENTRIES_A_STEP == 0:
                yield
            one = self._candidates([listed.loc], url, LISTED_DEPTH)
            found += one
            # A lastmod speaks for its own site's pages only: another's sitemap (a
            # sibling in scope under --scope domain is not, another domain is) would
            # move their recrawls and their hosts' trust (hints.py).
            if one and listed.lastmod is not None and site_of(one[0].host) == site:
                u = one[0]
                lastmods.append(Lastmod(u.fp, u.url, u.host, listed.lastmod))
        return found, lastmods

    def _past_limits(self, url: str, what: str) -> None:
        if self._warned:
            log.debug("sitemap %s: %s", url, what)
            return
        self._warned = True
        log.warning(
            "sitemap %s: %s. What is past the sitemap protocol's limits is "
            "counted (sitemap_skipped, sitemaps_cut) and from now on logged at debug level",
            url,
            what,
        )


# A sitemap's root element, near the start of its body (namespace prefix allowed); a
# feed's too (read as one: sitemaps.SitemapKind).
_SITEMAP_ROOT = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?(?:urlset|sitemapindex|rss|feed)[\s>/]")


def read_as(
    entry: Entry,
    result: FetchResult,
    *,
    sitemaps: bool,
    page: Callable[[str], bool] = lambda url: True,
) -> Entry:
    """The entry to read an answer as: a sitemap's as a page (at LISTED_DEPTH) when it
    is an HTML page that ``page`` (the filters) would take, a seed's or a host's
    /sitemap.xml as a sitemap (with ``sitemaps``) when it is one. Only those: a
    sitemap's URLs, or a page's links, read as sitemaps would nest them without end
    (what an index lists is not read as an index for that reason).

    A host's /sitemap.xml answered with HTML stays a sitemap that is none, its links
    not followed: most such answers are a "page not found" page served with a 200 (QA:
    a junk page a host in the export); a redirect's target (a home page) is read."""
    if not (result.ok and _succeeded(result)):
        return entry
    if is_sitemap(entry.depth):
        body = result.body
        # A gzipped sitemap served as text/html is still one (its root is compressed).
        if (
            result.is_html
            and body[:2] != _GZIP
            and not _SITEMAP_ROOT.search(body, 0, 4096)
            and path_and_query(entry.url) != SITEMAP_PATH
            and page(entry.url)
        ):
            return entry._replace(depth=LISTED_DEPTH)
    elif sitemaps and _may_be_sitemap(entry) and not result.is_html:
        body, ctype = result.body, result.content_type
        # Gzip of a sitemap's type (or named so), XML with a sitemap's root, or, for a
        # seed, text whose first line is a URL (a text sitemap).
        gzipped = body[:2] == _GZIP and (
            entry.url.endswith(".xml.gz") or ctype in sitemap_types(entry)
        )
        text = ctype == "text/plain" and entry.depth == 0 and _TEXT_SITEMAP.match(body)
        if gzipped or text or _SITEMAP_ROOT.search(body, 0, 4096):
            return entry._replace(depth=SITEMAP_DEPTH)
    return entry


# A text sitemap's start: blank lines, then an absolute http or https URL.
_TEXT_SITEMAP = re.compile(rb"\s*https?://", re.IGNORECASE)


_GZIP = b"\x1f\x8b"
# The types a seed's or a host's /sitemap.xml answer may be a sitemap in: XML, gzip,
# and the bytes of a .xml.gz served as they are; and for a seed, a text sitemap's.
_XML_TYPES = frozenset(
    {"application/xml", "text/xml", "application/gzip", "application/x-gzip"}
    | {"application/octet-stream", "application/rss+xml", "application/atom+xml"}
)
_SEED_TYPES = _XML_TYPES | {"text/plain"}


def _may_be_sitemap(entry: Entry) -> bool:
    """A seed, or a host's own /sitemap.xml found as a link first (robots.txt's then
    finds it taken): one such URL a host, so they cannot nest. Asked of every page
    (its --accept, its answer): the URL is parsed only if it names a sitemap at all."""
    url = entry.url
    return entry.depth == 0 or (SITEMAP_PATH in url and path_and_query(url) == SITEMAP_PATH)


def sitemap_types(entry: Entry) -> frozenset[str]:
    """The types a page's answer may be a sitemap in (none but for a seed and a
    host's /sitemap.xml), whose body is read whatever --accept says, so that a sitemap
    given as a seed is asked once (QA: it was asked as a page, its type not accepted,
    then again as a sitemap). One that is no sitemap is then read as of a type not
    accepted (:func:`not_accepted_after_all`)."""
    if not _may_be_sitemap(entry):
        return frozenset()
    return _SEED_TYPES if entry.depth == 0 else _XML_TYPES


def page_accept(
    accept: Callable[[str | None], bool], entry: Entry | None, *, sitemaps: bool
) -> Callable[[str | None], bool]:
    """--accept (``accept``) for a page, widened for a seed or a host's /sitemap.xml to
    the types a sitemap may come in (:func:`sitemap_types`)."""
    types = sitemap_types(entry) if entry is not None and sitemaps else None
    return accept if not types else (lambda ctype: ctype in types or accept(ctype))


def not_accepted_after_all(
    entry: Entry, result: FetchResult, accept: Callable[[str | None], bool]
) -> FetchResult:
    """A page's answer read only in case it was a sitemap (:func:`sitemap_types`), when
    it was not one: what --accept would have made of it."""
    ctype = result.content_type
    # The type first: an HTML page's (most) is no sitemap's, whatever its URL.
    if ctype not in _SEED_TYPES or not (
        result.accepted and _succeeded(result) and ctype in sitemap_types(entry)
    ):
        return result  # a redirect's, an error's: --accept does not judge those
    if accept(ctype):
        return result
    detail = f"type not accepted: {ctype}"
    return dataclasses.replace(result, body=b"", truncated=False, accepted=False, detail=detail)


def sitemap_after_all(entry: Entry, result: FetchResult, *, sitemaps: bool) -> bool:
    """Whether the answer of a seed or of a host's /sitemap.xml, of a type not kept
    (its body not read) or cut at --max-body, may be a sitemap, to ask again as one
    (to the protocol's 50 MB): XML or gzip, bytes (a .xml.gz served as they are), and
    for a seed text (see :func:`read_as` for why those alone). Not one asked as a
    sitemap already: cut at the protocol's 50 MB, it was asked again at once, and
    again, for as long as the crawl ran (a /sitemap.xml of 60 MB, or a gzip bomb)."""
    if not _may_be_sitemap(entry) or not sitemaps or not result.ok or is_sitemap(entry.depth):
        return False
    if result.accepted and not result.truncated:
        return False
    return _succeeded(result) and result.content_type in sitemap_types(entry)


def _succeeded(result: FetchResult) -> bool:
    return result.status is not None and 200 <= result.status < 300


def sitemap_answered(
    commits: Commits,
    refresher: Refresher | None,
    entry: Entry,
    result: FetchResult,
    answer: tuple[PageRecord, list[NewURL], list[Lastmod]],
) -> None:
    """Where a sitemap's answer goes: its first reading is stored as a page with what
    it brings; under --recrawl the refresher keeps it, and a later reading brings its
    URLs and lastmods without storing the page again."""
    page, found, lastmods = answer
    if refresher is None:
        commits.answered(page, found, lastmods)
        return
    first, row, visit = refresher.answered(entry, page, result)
    commits.refreshed(row, visit)
    for checked in refresher.lastmods(lastmods):
        commits.refreshed(checked, None)
    if first:
        commits.answered(page, found, lastmods)
    else:
        commits.found(found, lastmods)
