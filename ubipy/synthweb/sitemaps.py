"""Pages a crawler finds only through sitemaps, on two fixed hosts: h000 and h001 (when
there is one). No page links them; a crawl that reads no sitemap misses them.

* h000's robots.txt names two sitemaps. /maps/robots-listed.xml (on h000) lists two
  sitemap-only pages (one with a lastmod), a page of h002 that robots.txt disallows,
  and a page out of any crawl's scope. /maps/cross.xml is on another host, h001, and
  lists a page of h000 (robots.txt may name sitemaps anywhere).
* h000's /sitemap.xml is a sitemap index of four sitemaps: /maps/plain.xml, a gzip
  file /maps/zipped.xml.gz (no Content-Encoding), /maps/encoded.xml (sent with
  Content-Encoding: gzip), each listing sitemap-only pages, and /maps/nested.xml, an
  index in the index, which the protocol forbids: what it lists (/maps/too-deep.xml,
  and through it /from-sitemap/never.html) is not to be read.
* h001's robots.txt is a 404, and its /sitemap.xml a plain sitemap of two pages.

Every other host's /sitemap.xml is a 404, except on the changing web (`changing=True`),
where a share of the hosts list their changing pages with a lastmod that may tell the
truth, lie or say nothing (lastmods.py, added by `add_changing`). `documents` holds
every sitemap by URL (what it lists, as data, for the truth: no XML is parsed there),
`robots_lines(host)` the Sitemap lines of a host's robots.txt, `pages` the sitemap-only
pages, `names` their URLs by role, and `lastmods` what the fixed sitemaps say of them.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from xml.sax.saxutils import escape

from ubipy.synthweb.changing import ChangingWeb
from ubipy.synthweb.lastmods import LastmodSitemaps
from ubipy.synthweb.spec import Page, Response, WebView
from ubipy.synthweb.specials import OUTSIDE_URL
from ubipy.synthweb.urls import split_url

_XML = "application/xml"
_NS = "http://www.sitemaps.org/schemas/sitemap/0.9"


@dataclass(frozen=True, slots=True)
class Document:
    """One sitemap: an index (it lists sitemaps) or not (it lists pages), its entries
    (absolute URLs, with a lastmod or None) and how it is sent."""

    index: bool
    entries: tuple[tuple[str, str | None], ...]
    encoding: str = "plain"  # plain | gzip-file | content-encoding

    @property
    def locs(self) -> tuple[str, ...]:
        return tuple(loc for loc, _ in self.entries)

    def response(self) -> Response:
        root, entry = ("sitemapindex", "sitemap") if self.index else ("urlset", "url")
        lines = [f'<?xml version="1.0" encoding="UTF-8"?>\n<{root} xmlns="{_NS}">']
        for loc, lastmod in self.entries:
            mod = f"<lastmod>{lastmod}</lastmod>" if lastmod else ""
            lines.append(f"  <{entry}><loc>{escape(loc)}</loc>{mod}</{entry}>")
        lines.append(f"</{root}>\n")
        body = "\n".join(lines).encode()
        if self.encoding == "gzip-file":
            return Response(200, (("Content-Type", "application/x-gzip"),), _gzip(body))
        if self.encoding == "content-encoding":
            headers = (("Content-Type", _XML), ("Content-Encoding", "gzip"))
            return Response(200, headers, _gzip(body))
        return Response(200, (("Content-Type", _XML),), body)


class SitemapWeb:
    def __init__(self, web: WebView, *, empty: bool = False) -> None:
        self.documents: dict[str, Document] = {}
        self.pages: dict[tuple[int, str], Page] = {}
        self.names: dict[str, str] = {}
        self.lastmods: dict[str, str] = {}
        self._robots: dict[str, tuple[str, ...]] = {}
        # The changing web's sitemaps, answered at request time (their lastmods move).
        self.changing: LastmodSitemaps | None = None
        if not empty:  # empty: a web with no sitemap (the ranked web)
            self._build(web)

    def robots_lines(self, host: str) -> tuple[str, ...]:
        """The sitemaps `host`'s robots.txt names (when it is served, 200)."""
        return self._robots.get(host, ())

    def robots_text(self, host: str) -> bytes:
        return "".join(f"Sitemap: {url}\n" for url in self.robots_lines(host)).encode()

    def add_changing(self, changes: ChangingWeb) -> None:
        """The changing web's sitemaps, on hosts without a fixed one."""
        fixed = frozenset(self.documents)
        self.changing = LastmodSitemaps(changes, fixed.__contains__)
        for url, pages in self.changing.sitemaps().items():
            self.documents[url] = Document(False, tuple((page, None) for page in pages))

    def respond(self, url: str, now: float = 0.0) -> Response | None:
        """The sitemap at `url` (at server time `now`), None if there is none."""
        if self.changing is not None and (listed := self.changing.listed(url, now)) is not None:
            return Document(False, listed).response()
        document = self.documents.get(url)
        return None if document is None else document.response()

    def _build(self, web: WebView) -> None:
        hosts = web.spec.hosts
        u = web.url

        def page(i: int, name: str, lastmod: str | None = None) -> tuple[str, str | None]:
            path = f"/from-sitemap/{name}.html"
            url = self.names[f"sitemap_{name}"] = u(i, path)
            self.pages[(i, path)] = Page(url=url, title=f"{name}, in a sitemap of host {i}")
            if lastmod:
                self.lastmods[url] = lastmod
            return url, lastmod

        robots_listed = [page(0, "robots-1", "2024-05-01"), page(0, "robots-2")]
        if hosts > 2:  # h002's robots.txt disallows /private/
            disallowed = u(2, "/private/from-sitemap.html")
            self.pages[(2, "/private/from-sitemap.html")] = Page(disallowed, "disallowed")
            self.names["sitemap_disallowed"] = disallowed
            robots_listed.append((disallowed, None))
        robots_listed.append((OUTSIDE_URL.replace("/index.html", "/from-sitemap.html"), None))
        self.documents[u(0, "/maps/robots-listed.xml")] = Document(False, tuple(robots_listed))
        named = [u(0, "/maps/robots-listed.xml")]
        if hosts > 1:
            cross = (page(0, "cross-1", "2024-06-30T12:00:00+02:00"),)
            self.documents[u(1, "/maps/cross.xml")] = Document(False, cross)
            named.append(u(1, "/maps/cross.xml"))
            site = (page(1, "site-1", "2025-01-02T03:04:05Z"), page(1, "site-2"))
            self.documents[u(1, "/sitemap.xml")] = Document(False, site)
        self._robots[split_url(u(0, "/"))[0]] = tuple(named)

        children = {
            "/maps/plain.xml": Document(False, (page(0, "plain-1", "2023-12"),)),
            "/maps/zipped.xml.gz": Document(
                False, (page(0, "zipped-1"), page(0, "zipped-2", "2024")), "gzip-file"
            ),
            "/maps/encoded.xml": Document(False, (page(0, "encoded-1"),), "content-encoding"),
            "/maps/nested.xml": Document(True, ((u(0, "/maps/too-deep.xml"), None),)),
        }
        never = page(0, "never")
        self.documents[u(0, "/maps/too-deep.xml")] = Document(False, (never,))
        for path, document in children.items():
            self.documents[u(0, path)] = document
        listed = tuple((u(0, path), "2024-07-01") for path in children)
        self.documents[u(0, "/sitemap.xml")] = Document(True, listed)
        self.names["sitemap_index"] = u(0, "/sitemap.xml")
        self.names["sitemap_nested_index"] = u(0, "/maps/nested.xml")


def _gzip(body: bytes) -> bytes:
    return gzip.compress(body, mtime=0)
