"""The special cases of the synthetic web, placed on fixed hosts so they exist at any size
with at least 12 hosts (fewer hosts simply drop the roles whose host is missing).

Each special page is linked from its host's root page. Pages "reachable only through" a
construct (nofollow, meta nofollow, a redirect, <base>, <area>, <iframe>, <frame>) have no
other inbound link, so a crawler that gets the construct wrong shows up as a missing or an
unexpected URL, not merely as a harmless duplicate.
"""

from __future__ import annotations

from ubipy.synthweb.render import Link
from ubipy.synthweb.spec import Page, WebView
from ubipy.synthweb.urls import resolve

OUTSIDE_URL = "http://www.outside.example/index.html"


RootLinks = dict[tuple[int, int], tuple[Link, ...]]
Extras = dict[tuple[int, str], Page]


def build_specials(web: WebView) -> tuple[RootLinks, Extras, dict[str, str]]:
    hosts, pages = web.spec.hosts, web.spec.pages_per_host
    roots: dict[tuple[int, int], list[Link]] = {}
    extras: Extras = {}
    names: dict[str, str] = {}

    def u(i: int, path: str) -> str:
        return web.url(i, path)

    def link(
        i: int,
        href: str,
        target: str | None,
        name: str = "",
        *,
        tag: str = "a",
        rel: str = "",
        text: str = "link",
    ) -> None:
        nofollow = "nofollow" in rel.lower().split()
        roots.setdefault((i, 0), []).append(Link(tag, href, target, nofollow, rel, text))
        if name and target:
            names[name] = target

    def page(
        i: int,
        path: str,
        name: str = "",
        *,
        kind: str = "html",
        status: int = 200,
        links: tuple[Link, ...] | None = None,
        base_href: str | None = None,
        meta_nofollow: bool = False,
        frameset: bool = False,
    ) -> None:
        if links is None:
            links = (Link("a", "/", u(i, "/"), text="home"),)
        extras[(i, path)] = Page(
            url=u(i, path),
            title=f"{path} on host {i}",
            links=links,
            kind=kind,
            status=status,
            base_href=base_href,
            meta_nofollow=meta_nofollow,
            frameset=frameset,
        )
        if name:
            names[name] = u(i, path)

    def redirect(i: int, path: str, status: int, location: str) -> None:
        extras[(i, path)] = Page(
            url=u(i, path),
            title="moved",
            kind="redirect",
            status=status,
            location=location,
            redirect_target=resolve(u(i, path), location),
        )

    # h000, the home: a link to every host's root, and the odd spellings of URLs, of
    # the hosts' own names (h0002 past 1,000 hosts: the truth expected h002 there, QA).
    def host_name(i: int) -> str:
        return u(i, "/").removeprefix("http://").removesuffix("/")

    for i in range(1, hosts):
        href = f"http://{host_name(2).upper()}/" if i == 2 else u(i, "/")
        link(0, href, u(i, "/"), text=f"host {i}")
    link(0, "mailto:webmaster@synth.test", None, text="mail")
    link(0, "javascript:void(0)", None, text="script")
    link(0, OUTSIDE_URL, OUTSIDE_URL, "out_of_scope", text="elsewhere")
    # Names that do not exist: no page behind them, nothing a crawler can fetch.
    for d in range(web.spec.dead_links):
        link(0, f"http://dead{d}.invalid/", None, text="gone")
    link(0, "#top", u(0, "/"), text="top")
    odd = (
        (1, "./s1/p1.html#intro", "/s1/p1.html"),
        (2, f"http://{host_name(0)}:80/s2/p2.html", "/s2/p2.html"),
        (4, f"HTTP://{host_name(0).upper()}/s1/p4.html", "/s1/p4.html"),
        (5, "/s1/../s2/p5.html", "/s2/p5.html"),
    )
    for need, href, path in odd:
        if pages > need:
            link(0, href, u(0, path), text="odd spelling")

    if hosts > 1:  # robots.txt is a 404; <base href>; percent-encoding
        link(1, "/base/index.html", u(1, "/base/index.html"), "base_page")
        based = (
            Link("a", "only.html", u(1, "/based/deep/only.html")),
            Link("a", "../sibling.html", u(1, "/based/sibling.html")),
        )
        page(1, "/base/index.html", base_href="/based/deep/", links=based)
        page(1, "/based/deep/only.html", "base_only")
        page(1, "/based/sibling.html", "base_sibling")
        link(1, "/%7Edocs/index.html", u(1, "/~docs/index.html"), "tilde")
        link(1, "/~docs/index.html", u(1, "/~docs/index.html"))
        page(1, "/~docs/index.html")
        link(1, "/%7eonly/page.html", u(1, "/~only/page.html"), "tilde_only")
        page(1, "/~only/page.html")
    if hosts > 2:  # robots disallows /private/; rel=nofollow
        for path, name in (
            ("/private/secret.html", "disallowed_subtree"),
            ("/private/", "disallowed_dir"),
            ("/privateer.html", "allowed_prefix"),
        ):
            link(2, path, u(2, path), name)
            page(2, path)
        link(2, "/nofollow/a.html", u(2, "/nofollow/a.html"), "nofollow_a", rel="nofollow")
        rel = "noopener NoFollow"
        link(2, "nofollow/b.html", u(2, "/nofollow/b.html"), "nofollow_b", rel=rel)
        page(2, "/nofollow/a.html")
        page(2, "/nofollow/b.html")
    if hosts > 3:  # wildcards in robots.txt; meta robots nofollow
        for path, kind, name in (
            ("/files/report.pdf", "pdf", "disallowed_pdf"),
            ("/files/report.pdf?download=1", "pdf", "allowed_pdf_query"),
            ("/private/hidden.html", "html", "disallowed_wildcard"),
            ("/private/public-info.html", "html", "allowed_by_allow"),
        ):
            link(3, path, u(3, path), name)
            page(3, path, kind=kind)
        link(3, "/meta-nofollow.html", u(3, "/meta-nofollow.html"), "meta_nofollow")
        meta = (
            Link("a", "/meta-only/a.html", u(3, "/meta-only/a.html")),
            Link("a", "meta-only/b.html", u(3, "/meta-only/b.html")),
        )
        page(3, "/meta-nofollow.html", meta_nofollow=True, links=meta)
        page(3, "/meta-only/a.html", "meta_only_a")
        page(3, "/meta-only/b.html", "meta_only_b")
    if hosts > 4:  # Crawl-delay; <area>, <iframe>, <frame>
        link(4, "/area/target.html", u(4, "/area/target.html"), "area_target", tag="area")
        link(4, "iframe/target.html", u(4, "/iframe/target.html"), "iframe_target", tag="iframe")
        link(4, "/frames.html", u(4, "/frames.html"), "frameset")
        frames = (
            Link("frame", "/frame/left.html", u(4, "/frame/left.html")),
            Link("frame", "frame/right.html", u(4, "/frame/right.html")),
        )
        page(4, "/frames.html", frameset=True, links=frames)
        page(4, "/area/target.html")
        page(4, "/iframe/target.html")
        page(4, "/frame/left.html", "frame_left")
        page(4, "/frame/right.html", "frame_right")
    for i, path in ((5, "/private/x.html"), (7, "/private/y.html")):
        if hosts > i:  # robots.txt after transient 503s / behind a redirect: /private/ is off
            link(i, path, u(i, path), f"disallowed_h{i}")
            page(i, path)
    if hosts > 8:  # 301 and 302 whose targets are reachable only through them
        link(8, "/old/page.html", u(8, "/old/page.html"), "redirect_301")
        redirect(8, "/old/page.html", 301, u(8, "/new/page.html"))
        page(8, "/new/page.html", "redirect_301_target")
        link(8, "/temp/go.html", u(8, "/temp/go.html"), "redirect_302")
        redirect(8, "/temp/go.html", 302, "landing.html")  # a relative Location
        page(8, "/temp/landing.html", "redirect_302_target")
    if hosts > 9:  # a chain of three redirects; a loop a -> b -> a
        link(9, "/chain/1", u(9, "/chain/1"), "chain_start")
        redirect(9, "/chain/1", 301, "/chain/2")
        redirect(9, "/chain/2", 302, u(9, "/chain/3"))
        redirect(9, "/chain/3", 307, "/chain/end.html")
        page(9, "/chain/end.html", "chain_end")
        link(9, "/loop/a", u(9, "/loop/a"), "loop_a")
        redirect(9, "/loop/a", 302, "/loop/b")
        redirect(9, "/loop/b", 302, "/loop/a")
        names["loop_b"] = u(9, "/loop/b")
    if hosts > 10:  # a 404 and a 500, whose bodies link to pages no crawler should reach
        link(10, "/missing.html", u(10, "/missing.html"), "not_found")
        link(10, "/error.html", u(10, "/error.html"), "server_error")
        error_links = (Link("a", "/error-only.html", u(10, "/error-only.html")),)
        page(10, "/error.html", kind="error", status=500, links=error_links)
        page(10, "/error-only.html", "error_only")
        page(10, "/not-found-only.html", "not_found_only")
    if hosts > 11:  # non-HTML: an image and a PDF; <img> and <link> are not links to follow
        link(11, "/img/logo.png", u(11, "/img/logo.png"), "image")
        link(11, "/files/manual.pdf", u(11, "/files/manual.pdf"), "pdf")
        link(11, "/img/inline.png", None, tag="img")
        link(11, "/style.css", None, tag="link")
        page(11, "/img/logo.png", kind="png")
        page(11, "/files/manual.pdf", kind="pdf")
        page(11, "/img/inline.png", "inline_image", kind="png")
    return {k: tuple(v) for k, v in roots.items()}, extras, names
