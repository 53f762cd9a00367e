"""The changing web's sitemaps: each host's `/sitemap.xml` lists its changing pages, with
a `<lastmod>` that tells the truth, lies, or says nothing (only with `changing=True`).

A crawler may take a sitemap's lastmod as a hint that a page changed; one that trusts it
blindly is fooled, as it would be in the wild, by the two common ways it goes wrong.
Each host is drawn one kind (a pure function of the seed and the host's name):

* ACCURATE (`ACCURATE_SHARE`): the time of the page's last change at request time (the
  web's creation, server time 0, for a page that has not changed yet);
* NOW (`NOW_SHARE`): the request's time for every page, as sitemaps generated on the fly
  often say;
* FROZEN (`FROZEN_SHARE`): the first version's date (server time 0) forever, as a
  sitemap written once and never again;
* ABSENT (the rest of the hosts with a sitemap): no `<lastmod>` at all;
* None (`NO_SITEMAP_SHARE`): no sitemap (a 404), as before.

A lastmod is a W3C datetime in whole seconds, in UTC, server time 0 being the changing
web's EPOCH (the Last-Modified dates' too). The sitemap lists every page of the host
that the changing web holds (those that never change included), in URL order. Hosts
whose `/sitemap.xml` is already one of the fixed sitemaps (h000 and h001 on the ordinary
web) keep theirs, and are of no kind here.
"""

from __future__ import annotations

import enum
import math
import time
from collections import defaultdict
from collections.abc import Callable

from ubipy.synthweb.changing import EPOCH, ChangingWeb, uniform
from ubipy.synthweb.urls import split_url

NO_SITEMAP_SHARE = 0.2
ACCURATE_SHARE = 0.4
NOW_SHARE = 0.15
FROZEN_SHARE = 0.15
# ABSENT: the remaining 0.1.


class LastmodKind(enum.Enum):
    """What a host's sitemap says of its pages' last changes."""

    ACCURATE = "accurate"
    NOW = "now"
    FROZEN = "frozen"
    ABSENT = "absent"


def w3c_datetime(server_time: float) -> str:
    """The W3C datetime (whole seconds, UTC) of a server time (seconds from EPOCH)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(math.floor(EPOCH + server_time)))


class LastmodSitemaps:
    """The hosts' `/sitemap.xml` on the changing web. `taken(url)`: whether a fixed
    sitemap is already served at `url` (that host keeps it)."""

    def __init__(self, changes: ChangingWeb, taken: Callable[[str], bool]) -> None:
        self._changes = changes
        self._taken = taken
        self._by_host: dict[str, list[str]] | None = None

    def _hosts(self) -> dict[str, list[str]]:
        if self._by_host is None:
            by_host: dict[str, list[str]] = defaultdict(list)
            for url in sorted(self._changes.urls()):
                by_host[split_url(url)[0]].append(url)
            self._by_host = dict(by_host)
        return self._by_host

    def lastmod_kind(self, host: str) -> LastmodKind | None:
        """The host's kind of sitemap; None if it serves none of this module's."""
        host = host.lower()
        if host not in self._hosts() or self._taken(f"http://{host}/sitemap.xml"):
            return None
        u = uniform("synthweb-lastmod", self._changes.spec.seed, host)
        for kind, share in (
            (None, NO_SITEMAP_SHARE),
            (LastmodKind.ACCURATE, ACCURATE_SHARE),
            (LastmodKind.NOW, NOW_SHARE),
            (LastmodKind.FROZEN, FROZEN_SHARE),
        ):
            if u < share:
                return kind
            u -= share
        return LastmodKind.ABSENT

    def sitemap_url(self, host: str) -> str | None:
        """The URL of the host's sitemap, if it has one."""
        return None if self.lastmod_kind(host) is None else f"http://{host.lower()}/sitemap.xml"

    def sitemaps(self) -> dict[str, tuple[str, ...]]:
        """Every sitemap of this module and the pages it lists (data, for the truth)."""
        found: dict[str, tuple[str, ...]] = {}
        for host, urls in self._hosts().items():
            if (url := self.sitemap_url(host)) is not None:
                found[url] = tuple(urls)
        return found

    def listed(self, url: str, now: float) -> tuple[tuple[str, str | None], ...] | None:
        """What the sitemap at `url` lists at server time `now`: (page, lastmod or None);
        None if `url` is no sitemap of this module."""
        host, path = split_url(url)
        kind = self.lastmod_kind(host) if path == "/sitemap.xml" else None
        if kind is None:
            return None
        urls = self._hosts()[host]
        if kind is LastmodKind.ABSENT:
            return tuple((u, None) for u in urls)
        if kind is LastmodKind.NOW:
            stamp = w3c_datetime(now)
            return tuple((u, stamp) for u in urls)
        if kind is LastmodKind.FROZEN:
            stamp = w3c_datetime(0.0)
            return tuple((u, stamp) for u in urls)
        last = self._changes.last_change
        return tuple((u, w3c_datetime(last(u, now) or 0.0)) for u in urls)
