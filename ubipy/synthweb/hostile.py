"""The hostile web (`WebSpec(hostile=True)`): hosts `x-<case>.<domain>`, each linked from
h000's home page, each with a home page `/` that links its case.

* traps (infinite; the truth keeps only their fixed pages, see `is_trap`): x-calendar,
  x-session, x-deep.
* bodies: x-huge, x-gzip-bomb, x-deflate-bomb, x-endless.
* faults, failing the first `flaky_failures` times then answering 200 (x-hang, x-slow,
  x-reset), or for ever (x-hang-always, x-slow-always, x-reset-always); x-ratelimit (429,
  Retry-After in seconds, once), x-unavailable (503, Retry-After as an HTTP-date, once),
  x-flaky (500, `flaky_failures` times).
* content: x-malformed, x-binary, x-charset, x-manylinks, x-weirdlinks.
* robots: x-bigrobots (megabytes; only the first 500 KiB count), x-robots-hang (never
  answers: nothing of the host may be fetched).

Every host but the robots ones serves 404 for /robots.txt (allow all).
"""

from __future__ import annotations

import email.utils
import functools
import math
import random
import re

from ubipy.synthweb import bodies
from ubipy.synthweb.render import Link
from ubipy.synthweb.robots import RobotsKind
from ubipy.synthweb.spec import Page, Response, WebView
from ubipy.synthweb.urls import split_url

TRAPS = ("calendar", "session", "deep")
# case -> (path of the case page, its `Page.special`)
CASES: dict[str, tuple[str, str]] = {
    "huge": ("/huge.html", "huge"),
    "gzip-bomb": ("/bomb.html", "gzip-bomb"),
    "deflate-bomb": ("/bomb.html", "deflate-bomb"),
    "endless": ("/endless.html", "endless"),
    "hang": ("/hang.html", "hang"),
    "hang-always": ("/hang.html", "hang-always"),
    "slow": ("/slow.html", "slow"),
    "slow-always": ("/slow.html", "slow-always"),
    "reset": ("/reset.html", "reset"),
    "reset-always": ("/reset.html", "reset-always"),
    "ratelimit": ("/limited.html", "ratelimit"),
    "unavailable": ("/unavailable.html", "unavailable"),
    "flaky": ("/flaky.html", "flaky"),
    "malformed": ("/malformed.html", "malformed"),
    "binary": ("/binary.html", "binary"),
    "charset": ("/charset.html", "charset"),
    "manylinks": ("/many.html", "manylinks"),
    "weirdlinks": ("/weird.html", ""),
    "bigrobots": ("/late/page.html", ""),
    "robots-hang": ("/page.html", ""),
}
RECOVERING = ("hang", "slow", "reset", "ratelimit", "unavailable", "flaky")
FAILING = ("hang-always", "slow-always", "reset-always")
MANY_DISTINCT = 50
_CAL = re.compile(r"^/cal/(\d{4})/(\d{2})/$")
_DEEP = re.compile(r"^/deep/(?:[ab]/)+$")
_SESSION = re.compile(r"^(/|/item/[123]\.html)(?:\?sid=[0-9a-f]{12})?$")


class HostileWeb:
    def __init__(self, web: WebView) -> None:
        self.web = web
        self.spec = web.spec
        self.cases = {self.host(c): c for c in (*TRAPS, *CASES)}
        self.pages: dict[str, Page] = {}
        self.fixed: set[str] = set()  # trap hosts' pages that the truth keeps
        self._build()

    def host(self, case: str) -> str:
        return f"x-{case}.{self.spec.domain}"

    def url(self, case: str, path: str) -> str:
        return f"http://{self.host(case)}{path}"

    def trap_hosts(self) -> frozenset[str]:
        return frozenset(self.host(c) for c in TRAPS)

    def recovering_urls(self) -> frozenset[str]:
        """Fail `flaky_failures` times (at most once for Retry-After), then answer 200."""
        return frozenset(self.url(c, CASES[c][0]) for c in RECOVERING)

    def failing_urls(self) -> frozenset[str]:
        """Never answer whole: a crawler gives up on them after its retries."""
        return frozenset(self.url(c, CASES[c][0]) for c in FAILING)

    def home_links(self) -> tuple[Link, ...]:
        """h000's links to every hostile host."""
        homes = (self.url(c, "/") for c in self.cases.values())
        return tuple(Link("a", u, u, text="hostile") for u in homes)

    def robots_kind(self, host: str) -> RobotsKind:
        case = self.cases.get(host)
        if case == "bigrobots":
            return RobotsKind.HUGE
        return RobotsKind.HANG if case == "robots-hang" else RobotsKind.ABSENT

    def is_trap(self, url: str) -> bool:
        """A page of a trap host beyond its fixed pages: crawl-order dependent, never in the
        truth (and `Referee.unexpected(..., ignore_hosts=trap_hosts())` ignores them)."""
        return self.cases.get(split_url(url)[0]) in TRAPS and url not in self.fixed

    # -- pages ---------------------------------------------------------------------------
    def _page(
        self, case: str, path: str, links: tuple[Link, ...] | None = None, special: str = ""
    ) -> None:
        """A page; by default it links its host's home (ordinary HTML does)."""
        url = self.url(case, path)
        if links is None:
            links = (Link("a", "/", self.url(case, "/"), text="home"),)
        self.pages[url] = Page(url, f"{case} {path}", links, special=special)

    def _link(self, case: str, href: str, path: str | None) -> Link:
        return Link("a", href, None if path is None else self.url(case, path), text=href[:40])

    def _build(self) -> None:
        for case in ("calendar", "deep"):
            entry = "/cal/2026/11/" if case == "calendar" else "/deep/a/"
            # /about.html first: a crawler with a per-host FIFO reaches it within any budget.
            about = self._link(case, "/about.html", "/about.html")
            self._page(case, "/", (about, self._link(case, entry, entry)))
            self._page(case, "/about.html")
            self.fixed |= {self.url(case, p) for p in ("/", "/about.html", entry)}
        self._page("session", "/about.html")
        self.fixed |= {self.url("session", p) for p in ("/", "/about.html")}
        for case, (path, special) in CASES.items():
            self._page(case, "/", (self._link(case, path, path),))
            # Bodies made in bodies.py carry no links; the others render with a home link.
            opaque = special in ("huge", "gzip-bomb", "deflate-bomb", "endless", "binary")
            self._page(case, path, () if opaque else None, special)
        for case in ("ratelimit", "unavailable"):  # the other page must wait out Retry-After
            path = CASES[case][0]
            other = self._link(case, "/other.html", "/other.html")
            self._page(case, "/", (self._link(case, path, path), other))
            self._page(case, "/other.html")
        m = "malformed"
        links = tuple(self._link(m, p, p) for p in bodies.MALFORMED_LINKS)
        self._page(m, "/malformed.html", links, "malformed")
        for path in bodies.MALFORMED_LINKS:
            self._page(m, path)
        c = "charset"
        links = (self._link(c, "/caf\ufffd.html", bodies.CHARSET_TARGET), self._link(c, "/", "/"))
        self._page(c, "/charset.html", links, "charset")
        for path in (bodies.CHARSET_TARGET, *bodies.CHARSET_DECOYS):
            self._page(c, path)
        targets = tuple(f"/t/{n}.html" for n in range(MANY_DISTINCT))
        links = tuple(self._link("manylinks", p, p) for p in targets)
        self._page("manylinks", "/many.html", links, "manylinks")
        for path in targets:
            self._page("manylinks", path)
        self._build_weird()
        b = "bigrobots"
        paths = ("/early/page.html", "/late/page.html", "/about.html")
        self._page(b, "/", tuple(self._link(b, p, p) for p in paths))
        for path in ("/early/page.html", "/about.html"):
            self._page(b, path)

    def _build_weird(self) -> None:
        w = "weirdlinks"
        long_href = "/long/" + "x" * (self.spec.long_link_chars - 11) + ".html"
        cases: tuple[tuple[str, str | None], ...] = (
            (long_href, long_href),  # resolvable, but over 2,048 characters: refused
            ("/with space/a b.html", "/with%20space/a%20b.html"),
            ("  /padded.html\t ", "/padded.html"),  # WHATWG strips leading/trailing space
            ("/search.html?q=a b", "/search.html?q=a%20b"),
            ("/ünïcode/页.html", "/%C3%BCn%C3%AFcode/%E9%A1%B5.html"),
            ("/ctl\x01.html", None),  # control characters: refused
            ("/del\x7f.html", None),
            ("http://", None),  # no host: invalid
            ("http://[::1/x.html", None),  # broken IPv6 brackets: invalid
        )
        links = [self._link(w, href, path) for href, path in cases]
        for href, target in (
            ("http://bücher.example/", "http://xn--bcher-kva.example/"),
            ("http://例え.テスト/", "http://xn--r8jz45g.xn--zckzah/"),
        ):  # IDNA: out of scope (domain), and 404 on this server if fetched anyway
            links.append(Link("a", href, target, text="idna"))
        self._page(w, "/weird.html", tuple(links))
        for _, path in cases[:5]:
            assert path is not None
            self._page(w, path)
        self._page(w, "/ctl.html")  # where a crawler that drops control characters lands
        self._page(w, "/del.html")

    def page(self, url: str) -> Page | None:
        """The page at a normalised URL of a hostile host; None for a 404."""
        fixed = self.pages.get(url)
        if fixed is not None:
            return fixed
        host, path = split_url(url)
        case = self.cases.get(host, "")
        if case == "session" and _SESSION.match(path):
            return self._session_page(url, 0)
        if case == "deep" and _DEEP.match(path):
            deeper = (self._link(case, "a/", path + "a/"), self._link(case, "b/", path + "b/"))
            return Page(url, f"deep {path}", deeper)
        m = _CAL.match(path) if case == "calendar" else None
        if m and 1 <= int(m.group(1)) <= 9999 and 1 <= int(m.group(2)) <= 12:
            month = int(m.group(1)) * 12 + int(m.group(2)) - 1  # months since year 0
            months = [self._link(case, "/", "/")]
            for k in (month - 1, month + 1):  # previous and next, to the ends of year 1-9999
                if 12 <= k < 120000:
                    target = f"/cal/{k // 12:04d}/{k % 12 + 1:02d}/"
                    months.append(self._link(case, target, target))
            return Page(url, f"calendar {path}", tuple(months))
        return None

    def _session_page(self, url: str, n: int) -> Page:
        """Links to the same few pages with a fresh session id, seeded by the URL and the
        number of earlier requests for it: a replayed crawl sees the same ids."""
        rng = random.Random(f"synthweb-sid:{self.spec.seed}:{url}:{n}")
        links = [self._link("session", "/about.html", "/about.html")]
        for path in ("/item/1.html", "/item/2.html", "/item/3.html", "/"):
            href = f"{path}?sid={rng.getrandbits(48):012x}"
            links.append(self._link("session", href, href))
        return Page(url, f"session {split_url(url)[1]}", tuple(links), special="session")

    # -- responses -----------------------------------------------------------------------
    def respond(self, url: str, page: Page, prior: int, wall_time: float) -> Response | None:
        """The special response of `page`, or None to render it as ordinary HTML."""

        spec, special = self.spec, page.special
        html = bodies.HTML_TYPE
        failing = special.endswith("-always") or prior < spec.flaky_failures
        kind = special.removesuffix("-always")
        if kind == "hang" and failing:
            return Response(0, fault="hang")
        if kind == "reset" and failing:
            return Response(0, fault="reset")
        if kind == "slow" and failing:
            stream = functools.partial(bodies.slow_stream, spec.slow_interval, spec.slow_bytes)
            return Response(200, html, stream=stream, fault="cut")
        if special == "flaky" and failing:
            return Response(500, html, b"<html><body>try again</body></html>\n")
        if special == "ratelimit" and prior < 1:
            return Response(429, (*html, ("Retry-After", str(spec.retry_after))), b"slow down\n")
        if special == "unavailable" and prior < 1:
            # Rounded up: an HTTP-date has whole seconds, and the wait must be >= retry_after.
            when = email.utils.formatdate(math.ceil(wall_time) + spec.retry_after, usegmt=True)
            return Response(503, (*html, ("Retry-After", when)), b"come back later\n")
        if special == "huge":
            stream = functools.partial(bodies.huge_stream, spec.huge_bytes)
            return Response(200, html, stream=stream, content_length=spec.huge_bytes)
        if special in ("gzip-bomb", "deflate-bomb"):
            coding = special.removesuffix("-bomb")
            headers = (*html, ("Content-Encoding", coding))
            return Response(200, headers, bodies.bomb(spec.bomb_bytes, coding))
        if special == "endless":
            return Response(200, html, stream=bodies.endless_stream)
        bodies_by_special = {
            "malformed": lambda: bodies.MALFORMED,
            "binary": lambda: bodies.binary(spec.seed),
            "charset": lambda: bodies.CHARSET_PAGE,
            "manylinks": lambda: bodies.many_links(spec.many_links, MANY_DISTINCT),
        }
        if special in bodies_by_special:
            return Response(200, html, bodies_by_special[special]())
        if special == "session":
            fresh = self._session_page(url, prior)
            return self.web.render_page(200, url, fresh.links, fresh.title, fresh)
        return None

    def robots_body(self) -> bytes:
        return bodies.big_robots(self.spec.bigrobots_bytes)
