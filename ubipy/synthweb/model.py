"""The synthetic web: a seeded, deterministic set of hosts, pages, links and robots rules.

Nothing is stored per page: a page's links come from an RNG seeded by (seed, host, page)
and its body from another, so a 200×100 web costs nothing until it is crawled, and the
same seed gives the same web in every process (`random.Random(str)` hashes with SHA-512,
never Python's salted `hash()`). Special cases live on fixed hosts h000–h011 (see
`specials.py`); hosts beyond them are ordinary.
"""

from __future__ import annotations

import itertools
import random
import re
import time
from collections.abc import Mapping

from ubipy.synthweb import render
from ubipy.synthweb.changing import ChangingWeb
from ubipy.synthweb.encodings import EncodingWeb
from ubipy.synthweb.hostile import HostileWeb
from ubipy.synthweb.pace import PaceWeb
from ubipy.synthweb.ranked import RankedWeb, host_names
from ubipy.synthweb.render import Link
from ubipy.synthweb.robots import RobotsKind, RobotsRules, rules_for
from ubipy.synthweb.sitemaps import SitemapWeb
from ubipy.synthweb.spec import Page, Response, WebSpec
from ubipy.synthweb.specials import build_specials
from ubipy.synthweb.urls import normalize_target, normalize_url, split_url

_ORDINARY = re.compile(r"^/s(\d)/p(\d+)\.html$")
_ROBOTS_KINDS = {
    1: RobotsKind.ABSENT,
    2: RobotsKind.SUBTREE,
    3: RobotsKind.WILDCARD,
    4: RobotsKind.CRAWL_DELAY,
    5: RobotsKind.TRANSIENT,
    6: RobotsKind.BROKEN,
    7: RobotsKind.REDIRECT,
}
_FORMS = ("abs", "root", "rel", "dot", "frag", "upper", "port")
_FORM_CUM_WEIGHTS = tuple(itertools.accumulate((2.0, 3.0, 4.0, 1.0, 1.0, 0.3, 0.3)))


def ordinary_path(page: int) -> str:
    return "/" if page == 0 else f"/s{page % 3}/p{page}.html"


def _relative(source_path: str, target_path: str) -> str:
    """Relative href from one ordinary path to another (both "/" or "/sN/pM.html")."""
    source_dir = source_path.rsplit("/", 1)[0] or "/"
    if len(source_path) < 2 or len(target_path) < 2:  # fast paths for the root (hot loop)
        if source_path == target_path:
            return "./"
        return target_path[1:] if source_path == "/" else "../"
    if source_dir == target_path.rsplit("/", 1)[0]:
        return target_path.rsplit("/", 1)[1]
    return "../" + target_path[1:]  # ordinary paths are one directory deep


class SyntheticWeb:
    def __init__(self, spec: WebSpec | None = None) -> None:
        self.spec = spec or WebSpec()
        self._names = host_names(self.spec)
        self._index = {name: i for i, name in enumerate(self._names)}
        # Special pages are few (a few dozen) and fixed, so they are built eagerly.
        self._last: tuple[str, Page | None] | None = None
        # The ranked web (ranked.py) replaces the ordinary hosts' pages, and has no
        # special cases and no sitemaps.
        self.ranked = RankedWeb(self.spec) if self.spec.ranked else None
        self._root_links, self._extras, self.specials = (
            build_specials(self) if self.ranked is None else ({}, {}, {})
        )
        # Pages no page links, listed in sitemaps only (sitemaps.py).
        self.sitemaps = SitemapWeb(self, empty=self.ranked is not None)
        self._extras.update(self.sitemaps.pages)
        self.hostile = HostileWeb(self) if self.spec.hostile else None
        self.pace = PaceWeb(self) if self.spec.paced else None
        if self.pace is not None:
            self._root_links[(0, 0)] = self._root_links.get((0, 0), ()) + self.pace.home_links()
        if self.hostile is not None:
            home = self._root_links.get((0, 0), ())
            self._root_links[(0, 0)] = home + self.hostile.home_links()
        self.encodings = EncodingWeb(self) if self.spec.encodings else None
        if self.encodings is not None:
            home = self._root_links.get((0, 0), ())
            self._root_links[(0, 0)] = home + self.encodings.home_links()
        # Pages that change over time (changing.py): the ordinary or ranked pages.
        self.changes = (
            ChangingWeb(self.spec, self._changing_page, self._changing_urls)
            if self.spec.changing
            else None
        )
        if self.changes is not None:  # its hosts' sitemaps, with lastmods (lastmods.py)
            self.sitemaps.add_changing(self.changes)

    # -- names ---------------------------------------------------------------------------
    def host_names(self) -> list[str]:
        return list(self._names)

    def host_index(self, host: str) -> int | None:
        return self._index.get(host.lower().removesuffix(":80"))

    def url(self, host_index: int, path: str = "/") -> str:
        return f"http://{self._names[host_index]}{path}"

    def seed_url(self) -> str:
        """h000's home page (in the ranked web, the largest host's)."""
        return self.url(0)

    def hostile_hosts(self) -> list[str]:
        return [] if self.hostile is None else list(self.hostile.cases)

    def trap_hosts(self) -> frozenset[str]:
        """Hosts with infinitely many pages: pass them to `Referee.unexpected(ignore_hosts=)`."""
        return frozenset() if self.hostile is None else self.hostile.trap_hosts()

    def is_trap(self, url: str) -> bool:
        """A (normalised) trap page outside the truth: see `HostileWeb.is_trap`."""
        return self.hostile is not None and self.hostile.is_trap(url)

    # -- pages ---------------------------------------------------------------------------
    def page(self, url: str) -> Page | None:
        """The description of the page at `url` (normalised here), None if it is a 404."""
        last = self._last
        if last is not None and last[0] == url:  # links_of after redirect_of: build once
            return last[1]
        result = self._page(url)
        self._last = (url, result)
        return result

    def _page(self, url: str) -> Page | None:
        host, target = split_url(normalize_url(url))
        index = self._index.get(host)
        if index is None:
            if self.pace is not None and host in self.pace.hosts:
                return self.pace.page(f"http://{host}{target}")
            if self.encodings is not None and host in self.encodings.hosts:
                return self.encodings.page(f"http://{host}{target}")
            return None if self.hostile is None else self.hostile.page(f"http://{host}{target}")
        extra = self._extras.get((index, target))
        if extra is not None:
            return extra
        if self.ranked is not None:
            return self._ranked_page(index, target)
        page = self._ordinary_number(target)
        if page is None:
            return None
        return Page(
            url=self.url(index, target),
            title=f"{self._names[index]} page {page}",
            links=self._ordinary_links(index, page) + self._root_links.get((index, page), ()),
        )

    def _ordinary_number(self, target: str) -> int | None:
        """The number of the ordinary page at path `target`, None if there is none."""
        if target == "/":
            return 0
        m = _ORDINARY.match(target)
        if m and 0 < int(m.group(2)) < self.spec.pages_per_host:
            page = int(m.group(2))
            if int(m.group(1)) == page % 3 and m.group(2) == str(page):
                return page
        return None

    def _changing_page(self, url: str) -> tuple[int, str] | None:
        """(number, host) of an ordinary or ranked page at normalised `url`: the pages
        that change (not the special ones, which replace some ordinary paths)."""
        host, target = split_url(url)
        index = self._index.get(host)
        if index is None or (index, target) in self._extras:
            return None
        if self.ranked is not None:
            return None if (page := self.ranked.locate(index, target)) is None else (page, host)
        page = self._ordinary_number(target)
        return None if page is None else (index * self.spec.pages_per_host + page, host)

    def _changing_urls(self) -> list[str]:
        if self.ranked is not None:
            urls = self.ranked.page_urls()
        else:
            pages = range(self.spec.pages_per_host)
            urls = [self.url(h, ordinary_path(p)) for h in range(self.spec.hosts) for p in pages]
        return [url for url in urls if self._changing_page(url) is not None]

    def _ranked_page(self, index: int, target: str) -> Page | None:
        assert self.ranked is not None
        page = self.ranked.locate(index, target)
        if page is None:
            return None
        # Only a home page has root links (the hostile, paced and encodings hosts').
        extra = self._root_links.get((index, 0), ()) if target == "/" else ()
        return Page(
            url=self.url(index, target),
            title=self.ranked.title(page),
            links=self.ranked.links(page) + extra,
        )

    def _ordinary_links(self, index: int, page: int) -> tuple[Link, ...]:
        spec = self.spec
        rng = random.Random(f"synthweb-links:{spec.seed}:{index}:{page}")
        targets: list[tuple[int, int]] = []
        for child in (2 * page + 1, 2 * page + 2, page + 1):
            if child < spec.pages_per_host:
                targets.append((index, child))
        if page:
            targets.append((index, 0))
        for _ in range(rng.randint(1, 3)):
            if spec.hosts > 1 and rng.random() < spec.cross_link_ratio:
                other = rng.randrange(spec.hosts - 1)
                targets.append((other + (other >= index), rng.randrange(spec.pages_per_host)))
            else:
                targets.append((index, rng.randrange(spec.pages_per_host)))
        source = ordinary_path(page)
        links = []
        for host, target_page in targets:
            path = ordinary_path(target_page)
            target = self.url(host, path)
            form = "abs" if host != index else rng.choices(_FORMS, cum_weights=_FORM_CUM_WEIGHTS)[0]
            href = self._href(form, host, source, path, rng)
            links.append(Link("a", href, target, text=f"page {target_page}"))
        return tuple(links)

    def _href(self, form: str, host: int, source: str, path: str, rng: random.Random) -> str:
        name = self._names[host]
        rel = _relative(source, path)
        if form == "abs":
            return f"http://{name}{path}"
        if form == "root":
            return path
        if form == "dot":
            return rel if rel.startswith(".") else "./" + rel
        if form == "frag":
            return f"{rel}#sec{rng.randrange(5)}"
        if form == "upper":
            return f"http://{name.upper()}{path}"
        if form == "port":
            return f"http://{name}:80{path}"
        return rel

    def links_of(self, url: str) -> list[str]:
        """Absolute normalised targets of the page's followable links, in document order."""
        page = self.page(url)
        if page is None or page.kind != "html" or page.meta_nofollow:
            return []
        return [x.target for x in page.links if x.target is not None and not x.nofollow]

    def redirect_of(self, url: str) -> str | None:
        page = self.page(url)
        return page.redirect_target if page is not None else None

    # -- robots --------------------------------------------------------------------------
    def robots_kind(self, host: str) -> RobotsKind | None:
        index = self.host_index(host)
        if index is None:
            hostile = self.hostile
            if hostile is not None and host.lower() in hostile.cases:
                return hostile.robots_kind(host.lower())
            if self.pace is not None and host.lower() in self.pace.hosts:
                return RobotsKind.ABSENT
            if self.encodings is not None and host.lower() in self.encodings.hosts:
                return RobotsKind.ABSENT
            return None
        if self.ranked is not None:
            return RobotsKind.ABSENT  # a 404: everything allowed
        return _ROBOTS_KINDS.get(index, RobotsKind.PLAIN)

    def robots_rules(self, host: str) -> RobotsRules | None:
        """Rules once robots.txt is resolved; None means nothing may ever be fetched."""
        kind = self.robots_kind(host)
        return RobotsRules() if kind is None else rules_for(kind, self.spec.crawl_delay)

    def robots_allows(self, host: str, path_and_query: str) -> bool:
        rules = self.robots_rules(host)
        if rules is None:
            return False
        _, target = split_url(normalize_target(host, path_and_query))
        return rules.allows(target)

    def crawl_delay(self, host: str) -> float | None:
        rules = self.robots_rules(host)
        return None if rules is None else rules.crawl_delay

    def robots_paths(self, host: str) -> tuple[str, ...]:
        """Every path a robots.txt fetch for `host` touches (the redirect chain included)."""
        if self.robots_kind(host) is RobotsKind.REDIRECT:
            return ("/robots.txt", "/robots-real.txt")
        return ("/robots.txt",)

    # -- responses -----------------------------------------------------------------------
    def respond(
        self,
        host: str,
        target: str,
        *,
        prior_requests: int = 0,
        wall_time: float | None = None,
        now: float | None = None,
        conditions: Mapping[str, str] | None = None,
    ) -> Response:
        """The response to GET `target` on `host`; `prior_requests` counts earlier requests
        for the same URL, so stateful behaviour (transient failures) stays a pure function.
        `wall_time` (default: now) dates a Retry-After given as an HTTP-date; `now` is the
        server's clock (default: time.monotonic()), which the busy host's outage and the
        changing web's pages run on; `conditions`: the request's If-None-Match and
        If-Modified-Since (lower-case names), which the changing web may answer 304."""
        url = normalize_target(host.lower().removesuffix(":80"), target)
        host, path = split_url(url)
        clock = time.monotonic() if now is None else now
        kind = self.robots_kind(host)
        if kind is not None and path in self.robots_paths(host):
            return self._robots_response(host, kind, path, prior_requests)
        sitemap = self.sitemaps.respond(url, clock)
        if sitemap is not None:
            return sitemap
        page = self.page(url)
        if page is None:
            return self.render_page(404, url, (_not_found_link(),), "not found")
        if page.special == "encoding" and self.encodings is not None:
            encoded = self.encodings.respond(url)
            if encoded is not None:
                return encoded
        if page.special == "pace" and self.pace is not None:
            busy = self.pace.respond(host, clock)
            if busy is not None:
                return busy
        if page.special and self.hostile is not None:
            wall = time.time() if wall_time is None else wall_time
            special = self.hostile.respond(url, page, prior_requests, wall)
            if special is not None:
                return special
        headers: tuple[tuple[str, str], ...] = ()
        if page.kind == "redirect":
            assert page.location is not None
            headers = (("Location", page.location),)
            return Response(page.status, (*headers, ("Content-Type", "text/plain")), b"moved\n")
        if page.kind == "png":
            return Response(200, (("Content-Type", "image/png"),), render.png_bytes(4))
        if page.kind == "pdf":
            return Response(200, (("Content-Type", "application/pdf"),), render.pdf_bytes(url))
        response = self.render_page(page.status, url, page.links, page.title, page)
        if self.changes is not None and page.kind == "html" and page.status == 200:
            return self.changes.respond(url, response, clock, conditions or {})
        return response

    def render_page(
        self, status: int, url: str, links: tuple[Link, ...], title: str, page: Page | None = None
    ) -> Response:
        rng = random.Random(f"synthweb-body:{self.spec.seed}:{url}")
        body = render.render_html(
            title=title,
            links=links,
            rng=rng,
            size=self.spec.page_bytes,
            base_href=page.base_href if page else None,
            meta_nofollow=page.meta_nofollow if page else False,
            frameset=page.frameset if page else False,
        )
        return Response(status, (("Content-Type", "text/html; charset=utf-8"),), body)

    def _robots_response(
        self, host: str, kind: RobotsKind, path: str, prior_requests: int
    ) -> Response:
        text = (("Content-Type", "text/plain"),)
        if kind is RobotsKind.ABSENT:
            return Response(404, text, b"no robots here\n")
        if kind is RobotsKind.BROKEN:
            return Response(500, text, b"robots backend down\n")
        if kind is RobotsKind.HANG:
            return Response(0, fault="hang")
        if kind is RobotsKind.HUGE and self.hostile is not None:
            return Response(200, text, self.hostile.robots_body())
        if kind is RobotsKind.TRANSIENT and prior_requests < self.spec.robots_transient_failures:
            return Response(503, text, b"try again\n")
        if kind is RobotsKind.REDIRECT and path == "/robots.txt":
            return Response(301, (("Location", f"http://{host}/robots-real.txt"), *text), b"")
        rules = self.robots_rules(host)
        assert rules is not None
        return Response(200, text, rules.render() + self.sitemaps.robots_text(host))

    def latency_for(self, host: str, target: str, n: int) -> float:
        """Seconds before the `n`-th answer to `target` on `host`: the spec's latency, its
        jitter, and the slow host's own."""
        extra = 0.0 if self.pace is None else self.pace.latency(host, target, n)
        return self.spec.latency + self.jitter_for(host, target, n) + extra

    def jitter_for(self, host: str, target: str, n: int) -> float:
        """Deterministic per-request jitter in [0, spec.jitter)."""
        if self.spec.jitter <= 0:
            return 0.0
        rng = random.Random(f"synthweb-jitter:{self.spec.seed}:{host}:{target}:{n}")
        return rng.random() * self.spec.jitter


def _not_found_link() -> Link:
    # 4xx/5xx bodies carry a link: a crawler that follows links from error pages strays
    # to /not-found-only.html, which is a 200 on h010 and never in the truth.
    return Link("a", "/not-found-only.html", None, text="you might like")
