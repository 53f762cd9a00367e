"""The synthetic web's plain types: its spec, a page's description, a response, and
the narrow view of the web that the special and hostile pages are built from (so
neither imports the model that composes them)."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Protocol

from ubipy.synthweb import bodies
from ubipy.synthweb.render import Link


@dataclass(frozen=True, slots=True)
class WebSpec:
    seed: int = 0
    hosts: int = 12
    pages_per_host: int = 20
    domain: str = "synth.test"
    cross_link_ratio: float = 0.2  # chance that an extra link on a page goes to another host
    page_bytes: int = 3000  # filler text per HTML page
    latency: float = 0.0  # seconds added before every response
    jitter: float = 0.0  # plus a deterministic uniform [0, jitter) per request
    crawl_delay: float = 0.3  # the Crawl-delay of the crawl-delay host (h004)
    robots_transient_failures: int = 2  # 503s from h005's robots.txt before it answers 200
    # The hostile web (hostile.py): off by default, so the default web stays as it is.
    hostile: bool = False
    huge_bytes: int = 50 * 1024 * 1024  # x-huge's body
    bomb_bytes: int = 100 * 1024 * 1024  # the bombs' bodies, decompressed
    slow_interval: float = 1.0  # x-slow: seconds per byte
    slow_bytes: int = 120  # x-slow: bytes sent before the server cuts the connection
    flaky_failures: int = 2  # failures of x-hang, x-slow, x-reset, x-flaky before a 200
    retry_after: int = 2  # seconds asked by x-ratelimit's 429 and x-unavailable's 503
    bigrobots_bytes: int = 10 * 1024 * 1024  # x-bigrobots' robots.txt
    many_links: int = 100_000  # anchors on x-manylinks' page (to 50 distinct targets)
    long_link_chars: int = 10_000  # the over-long href on x-weirdlinks
    # The paced web (pace.py): a fast, a slow and a busy (503 for a while) host. Off by
    # default, like the hostile web.
    paced: bool = False
    paced_pages: int = 8  # pages per paced host
    slow_latency: float = 0.2  # pace-slow answers after this much
    slow_jitter: float = 0.2  # plus a deterministic uniform [0, slow_jitter) per request
    unavailable_for: float = 60.0  # pace-busy's 503s last this long from its first page
    # The encodings web (encodings.py): legacy encodings, declared or not, and a host
    # with an internationalised name. Off by default, like the hostile web.
    encodings: bool = False
    # Links from the home page to hosts whose names do not resolve (deadN.invalid):
    # what any real crawl meets; no page of the truth, and no request should reach them.
    dead_links: int = 0
    # The ranked web (ranked.py): Zipf host sizes and heavy-tailed links, with none of
    # the special cases above (no sitemaps, robots.txt a 404 everywhere). The hostile,
    # paced and encodings hosts can be added to it.
    ranked: bool = False
    # The changing web (changing.py): the ordinary or ranked pages change as Poisson
    # processes, with ETag/Last-Modified and 304s. Off by default: pages never change.
    changing: bool = False

    def __post_init__(self) -> None:
        if self.hosts < 1 or self.pages_per_host < 1:
            raise ValueError("need at least one host and one page per host")
        if self.ranked and self.dead_links:
            raise ValueError("the ranked web has no dead links")
        if self.hostile:
            if self.huge_bytes < bodies.MIN_HUGE_BYTES or self.bomb_bytes < 1024:
                raise ValueError("huge_bytes and bomb_bytes must be at least 1 KiB")
            if self.bigrobots_bytes < bodies.MIN_BIG_ROBOTS:
                raise ValueError(f"bigrobots_bytes must be at least {bodies.MIN_BIG_ROBOTS}")
            if self.long_link_chars < 2100 or self.many_links < 50:
                raise ValueError("long_link_chars must exceed 2,100 and many_links 50")


@dataclass(frozen=True, slots=True)
class Response:
    """What the server sends. `stream`, when set, replaces `body` (sent chunked unless
    `content_length` is given): the hook for slow, huge or endless bodies. `fault`: "hang"
    (send nothing until the client goes), "reset" (close with an RST; both with status 0)
    or "cut" (close after the stream, without ending the body)."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    stream: Callable[[], AsyncGenerator[bytes, None]] | None = field(default=None, compare=False)
    content_length: int | None = None
    fault: str = ""


@dataclass(frozen=True, slots=True)
class Page:
    """A page description. kind: html | redirect | png | pdf | error (error = HTML, 5xx)."""

    url: str
    title: str
    links: tuple[Link, ...] = ()
    kind: str = "html"
    status: int = 200
    location: str | None = None  # the Location header exactly as sent (maybe relative)
    redirect_target: str | None = None  # Location resolved and normalised
    base_href: str | None = None
    meta_nofollow: bool = False
    frameset: bool = False
    special: str = ""  # a hostile page's behaviour (hostile.py); "" renders plain HTML


class WebView(Protocol):
    """What the special and hostile pages need of the web."""

    @property
    def spec(self) -> WebSpec: ...

    def url(self, host_index: int, path: str = "/") -> str: ...

    def render_page(
        self, status: int, url: str, links: tuple[Link, ...], title: str, page: Page | None = None
    ) -> Response: ...
