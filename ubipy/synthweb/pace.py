"""The paced web (`WebSpec(paced=True)`): hosts whose pace a polite crawler must follow.

Three hosts, each linked from h000's home page, each with `paced_pages` pages (`/`
linking `/p1.html` ... and every page linking home), robots.txt a 404:

- `pace-fast.<domain>` answers at once (the spec's latency): the yardstick;
- `pace-slow.<domain>` after `slow_latency` to `slow_latency + slow_jitter` seconds;
- `pace-busy.<domain>` 503 without Retry-After for `unavailable_for` seconds from its
  first page request, then 200.

The busy host's robots.txt is served all along (a static file, as from a CDN, while the
application behind it is down), so what a crawler does with it is its delay, not its
robots.txt retries. Its outage runs on the server's clock (`now`: trio's clock, so an
in-process crawl on the autojump clock sees a virtual minute).

:func:`pace_of` reads the request log afterwards: per host, how many requests, how long
they took and the gaps between them: a crawler whose delay listens leaves the slow
host longer gaps than the fast one, and the busy host growing ones.
"""

from __future__ import annotations

import itertools
import random
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from ubipy.synthweb.log import Request
from ubipy.synthweb.render import Link
from ubipy.synthweb.spec import Page, Response, WebView

CASES = ("fast", "slow", "busy")


@dataclass(frozen=True, slots=True)
class HostPace:
    """One host's requests as the server saw them (robots.txt included)."""

    host: str
    requests: int
    # Mean seconds from a request's arrival to its answer's end.
    response_time: float
    # Seconds between the end of one request and the start of the next, in order.
    gaps: tuple[float, ...]
    # Requests per second from the first arrival to the last answer.
    rate: float
    statuses: tuple[int, ...]

    @property
    def mean_gap(self) -> float:
        return statistics.fmean(self.gaps) if self.gaps else 0.0


class PaceWeb:
    def __init__(self, web: WebView) -> None:
        self.web = web
        domain = web.spec.domain
        self.hosts = {f"pace-{case}.{domain}": case for case in CASES}
        self.pages: dict[str, Page] = {}
        # When the busy host's outage began: its first page request, on the server's clock.
        self._outage_start: float | None = None
        for host in self.hosts:
            self._build(host)

    def host(self, case: str) -> str:
        return f"pace-{case}.{self.web.spec.domain}"

    def home_links(self) -> tuple[Link, ...]:
        return tuple(Link("a", f"http://{h}/", f"http://{h}/", text="paced") for h in self.hosts)

    def _build(self, host: str) -> None:
        root = f"http://{host}"
        home = Link("a", "/", f"{root}/", text="home")
        n = self.web.spec.paced_pages
        links = tuple(Link("a", f"p{i}.html", f"{root}/p{i}.html") for i in range(1, n))
        self.pages[f"{root}/"] = Page(f"{root}/", f"{host} home", links, special="pace")
        for i in range(1, n):
            url = f"{root}/p{i}.html"
            self.pages[url] = Page(url, f"{host} page {i}", (home,), special="pace")

    def page(self, url: str) -> Page | None:
        """The page at a normalised URL of a paced host; None for a 404."""
        return self.pages.get(url)

    def respond(self, host: str, now: float) -> Response | None:
        """The busy host's 503 while its outage lasts; None: the page as usual."""
        if self.hosts.get(host) != "busy":
            return None
        if self._outage_start is None:
            self._outage_start = now
        if now - self._outage_start >= self.web.spec.unavailable_for:
            return None
        return Response(503, (("Content-Type", "text/plain"),), b"down for maintenance\n")

    def latency(self, host: str, target: str, n: int) -> float:
        """Seconds the slow host takes over the others (deterministic per request)."""
        if self.hosts.get(host) != "slow":
            return 0.0
        spec = self.web.spec
        rng = random.Random(f"synthweb-pace:{spec.seed}:{target}:{n}")
        return spec.slow_latency + rng.random() * spec.slow_jitter


def pace_of(requests: Iterable[Request], host: str) -> HostPace:
    """``host``'s requests in ``requests`` (a server's log), in the order they came."""
    mine = sorted((r for r in requests if r.host == host), key=lambda r: r.start)
    gaps = tuple(b.start - a.end for a, b in itertools.pairwise(mine))
    span = mine[-1].end - mine[0].start if mine else 0.0
    return HostPace(
        host=host,
        requests=len(mine),
        response_time=statistics.fmean(r.end - r.start for r in mine) if mine else 0.0,
        gaps=gaps,
        rate=len(mine) / span if span > 0 else 0.0,
        statuses=tuple(r.status for r in mine),
    )
