"""What a page's answer becomes: its stored record (digest, title, encoding) and the
URLs it reveals (a redirect's target at the same depth, up to MAX_REDIRECTS in a row;
an HTML page's links one hop deeper, none past ``--max-depth``), counted in the
crawl's figures."""

from __future__ import annotations

import logging
import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import Final, Protocol

from ubipy.config import CrawlConfig
from ubipy.fetch import (
    MAX_LINKS,
    Entry,
    FetchResult,
    ParsedPage,
    content_digest,
    header_noindex,
    parse_html,
    parse_html_steps,
    refresh_link,
    robots_token,
)
from ubipy.peer.crawlstats import CrawlStats
from ubipy.peer.records import page_record
from ubipy.steps import Steps
from ubipy.store import NewURL, PageRecord

__all__ = [
    "MAX_REDIRECTS",
    "SCOPE_REDIRECTS",
    "Candidates",
    "RedirectChains",
    "page_parsing",
    "read_page",
]

log = logging.getLogger("ubipy.peer.crawler")  # the crawler's log

#: Redirects followed in a row, as browsers and Scrapy do.
MAX_REDIRECTS: Final = 20
#: Of those, how many from a seed widen the scope (http to https, to www, to a
#: language's path...).
SCOPE_REDIRECTS: Final = 5


def _unbounded_if_none(bound: int | None) -> float:
    # Not "bound or inf": --max-depth 0 (the seeds alone) was no bound at all.
    return math.inf if bound is None else bound


class RedirectChains:
    """How many redirects in a row led to each URL waiting to be fetched, and whether
    the chain began on a seed's host. A redirect is no link hop (its target keeps the
    depth), so a server answering ``/go?n=k`` with a redirect to ``/go?n=k+1`` was
    followed for ever, whatever ``--max-depth`` said, and a seed's chain across hosts
    widened the scope at every hop. Kept for the last ``size`` targets on this peer;
    a target on a host another peer owns carries its count there (``NewURL.redirects``,
    in the outbox and the URL_BATCH), where the chain goes on from it: counted afresh
    by each peer, two hosts of two peers redirecting to each other were followed for
    ever. A chain that left the peer it began on widens the scope no more unless
    the host it comes to is a seed's."""

    __slots__ = ("_chains", "_size")

    def __init__(self, size: int = 65_536) -> None:
        self._chains: OrderedDict[int, tuple[int, bool]] = OrderedDict()
        self._size = size

    def follow(self, fp: int, *, seed_host: bool) -> tuple[int, bool]:
        """The URL ``fp`` (on a seed's host or not) redirects: how many redirects in a
        row this one makes, and whether the chain began on a seed's host."""
        hops, seeded = self._chains.pop(fp, (0, False))
        return hops + 1, seeded or seed_host

    def led_to(self, fp: int, hops: int, seeded: bool) -> None:
        self._chains[fp] = (hops, seeded)
        self._chains.move_to_end(fp)
        if len(self._chains) > self._size:
            self._chains.popitem(last=False)

    def lead_to(self, urls: list[NewURL], hops: int, seeded: bool) -> list[NewURL]:
        """``urls`` (a redirect's target) come after ``hops`` redirects in a row: kept
        here, and returned carrying the count to whichever peer owns them."""
        for url in urls:
            self.led_to(url.fp, hops, seeded)
        return [url._replace(redirects=hops) for url in urls]

    def carried(self, urls: Iterable[NewURL]) -> None:
        """URLs from elsewhere (another peer's batch, the outbox an earlier run left),
        each with the redirects in a row that led to it: the chain goes on from there
        when it redirects again. It widens the scope no more (unless this peer knows
        it as a seed's chain already): it left the peer it began on, or its memory."""
        chains = self._chains
        for url in urls:
            if url.redirects:
                hops, seeded = chains.get(url.fp, (0, False))
                self.led_to(url.fp, max(hops, url.redirects), seeded)


class Candidates(Protocol):
    """Links (relative to a base URL, or None: absolute, with their host keys when
    known) at a depth -> the URLs to admit."""

    def __call__(
        self,
        links: Sequence[str],
        base: str | None,
        depth: int,
        /,
        *,
        hosts: Sequence[str] | None = None,
    ) -> list[NewURL]: ...


def _values(result: FetchResult, name: bytes) -> list[str]:
    """The answer's values of the header ``name`` (lower case)."""
    return [value.decode("latin-1") for key, value in result.raw_headers if key.lower() == name]


def page_parsing(entry: Entry, result: FetchResult, config: CrawlConfig) -> Steps[ParsedPage]:
    """The parse of an HTML answer's body, in steps (a large page's, read in slices)."""
    return parse_html_steps(
        result.body,
        entry.url,
        encoding=result.charset,
        agent=robots_token(config.fetch.user_agent),
        robots_headers=_values(result, b"x-robots-tag"),
    )


def read_page(
    entry: Entry,
    host: str,
    result: FetchResult,
    *,
    config: CrawlConfig,
    candidates: Candidates,
    stats: CrawlStats,
    seed_redirect: Callable[[str, str], object] = lambda location, seed: None,
    fetched_at: float | None = None,
    chains: RedirectChains | None = None,
    is_seed_host: Callable[[str], bool] = lambda host: True,
    parsed: ParsedPage | None = None,
) -> tuple[PageRecord, list[NewURL]]:
    """The page's record and the URLs it revealed; ``seed_redirect(location, seed)``
    is told where a URL at depth 0 redirects, first, on a chain that began on a
    seed's host (``is_seed_host``), within SCOPE_REDIRECTS. ``fetched_at``: when the
    answer ended (the wall clock; None: now); ``chains``: the redirects in a row so
    far (None: not counted); ``parsed``: the page's parse, made already
    (:func:`page_parsing`)."""
    discovered: list[NewURL] = []
    nofollow = False  # a meta robots said so
    noindex: bool | None = None  # what the answer said, when it is one read for it
    title = encoding = encoding_source = None
    digest = None
    if result.ok and result.accepted:
        # A 304 has no body: its visit is of the version held (the refresher's). Its
        # empty body's digest was stored for every unchanged visit (QA).
        digest = None if result.not_modified else content_digest(result.body)
        if result.is_redirect:
            assert result.location is not None
            # A redirect is not a link hop: the target keeps the depth.
            hops, seeded = 1, is_seed_host(host)
            if chains is not None:
                hops, seeded = chains.follow(entry.fp, seed_host=seeded)
            if hops > MAX_REDIRECTS:
                stats.refused["redirect chain"] += 1
            else:
                if entry.depth == 0 and seeded and hops <= SCOPE_REDIRECTS:
                    seed_redirect(result.location, entry.url)
                discovered = candidates([result.location], entry.url, entry.depth)
                if chains is not None:
                    discovered = chains.lead_to(discovered, hops, seeded)
        elif result.is_html:
            if parsed is None:  # at once: the usual page, small
                parsed = parse_html(
                    result.body,
                    entry.url,
                    encoding=result.charset,
                    agent=robots_token(config.fetch.user_agent),
                    robots_headers=_values(result, b"x-robots-tag"),
                )
            nofollow, noindex = parsed.nofollow, parsed.noindex
            title, encoding = parsed.title, parsed.encoding
            if parsed.encoding_source is not None:
                encoding_source = parsed.encoding_source.value
            stats.refused["link"] += parsed.links_refused
            if parsed.links_cut:
                # A page's own links past the cap are lost to the crawl: said once (a
                # page of a hostile site may be one of thousands), then counted.
                log.log(
                    logging.DEBUG if stats.links_cut else logging.WARNING,
                    "page %s: %d hrefs past its first %d links not read; counted in "
                    "links_cut, and from now on logged at debug level",
                    entry.url, parsed.links_cut, MAX_LINKS,
                )  # fmt: skip
                stats.links_cut += parsed.links_cut
            stats.credentials_stripped += parsed.links_stripped
            if entry.depth + 1 > _unbounded_if_none(config.bounds.max_depth):
                stats.too_deep += len(parsed.links)
            else:
                discovered = candidates(parsed.links, None, entry.depth + 1, hosts=parsed.hosts)
        elif 200 <= (result.status or 0) < 300:
            # A PDF, an image...: only its header can say it. (An error page is
            # nothing to index either way.)
            agent = robots_token(config.fetch.user_agent)
            noindex = header_noindex(_values(result, b"x-robots-tag"), agent)
    refresh = result.refresh
    if refresh is not None and result.ok and 200 <= (result.status or 0) < 300 and not nofollow:
        # Whatever the body (often none) and its type, as browsers do.
        agent = robots_token(config.fetch.user_agent)
        target = refresh_link(refresh, _values(result, b"x-robots-tag"), agent)
        if target is not None and entry.depth + 1 > _unbounded_if_none(config.bounds.max_depth):
            stats.too_deep += 1
        elif target is not None:
            discovered += candidates([target], entry.url, entry.depth + 1)
    # Counted once read: a page that breaks the parser is counted as the error it is
    # stored as (processing_failed), not as a page and an error.
    stats.answered(result)
    page = page_record(
        entry,
        host,
        result,
        keep_body=config.fetch.store_bodies,
        digest=digest,
        title=title,
        encoding=encoding,
        encoding_source=encoding_source,
        fetched_at=fetched_at,
        noindex=noindex,
    )
    return page, discovered
