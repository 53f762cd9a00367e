"""How fresh a crawler kept its copies: Cho and Garcia-Molina's freshness and age, exact.

Cho & Garcia-Molina ("Synchronizing a database to improve freshness", SIGMOD 2000):
a copy is fresh at time t while it equals the live page (freshness 1, else 0); its age
at t is 0 while fresh, else the time since the live page first changed after the copy
was taken. Both are averaged over the pages and over a window [start, end].

A copy taken at time f holds the page's version at f (the changes at or before f), so
it is fresh until the page's first change after f, c, and from c its age grows as
t - c until the next fetch. Each fetch-to-fetch interval is integrated in closed form
against the page's change times (`ChangingWeb.timeline`), so the figures are exact, not
sampled, and cost one binary search per fetch.

A page has no copy before its first fetch: that time is `missing`, counted as not
fresh, and left out of the age (which is averaged over the time a copy exists).
A fetch is the request log's `start` (when the server read the request, and when it
chose the version it sent): `fetches(log)` takes them from the complete GETs that got
a 200 or a 304.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from operator import eq

from ubipy.synthweb.changing import ChangingPage, ChangingWeb
from ubipy.synthweb.log import Request
from ubipy.synthweb.urls import normalize_url


@dataclass(frozen=True, slots=True)
class PageFreshness:
    """One page over a window, in seconds: `fresh` (time its copy was current), `age`
    (the integral of its copy's age), `missing` (time with no copy yet); `fetches` in
    the window and `unchanged` (those that found the page as the fetch before it had)."""

    fresh: float
    age: float
    missing: float
    fetches: int
    unchanged: int


@dataclass(frozen=True, slots=True)
class Freshness:
    """Averages over `pages` pages and the window: `freshness` (0..1, the share of
    page-time a copy was current; missing time counts as not fresh), `age` (seconds,
    averaged over page-time with a copy), `missing` (share of page-time with no copy);
    `fetches` counted in the window, of which `unchanged` found the page unchanged since
    its previous fetch (requests a perfect policy would not have spent)."""

    pages: int
    freshness: float
    age: float
    missing: float
    fetches: int
    unchanged: int


def page_freshness(
    changes: Sequence[float], fetched: Sequence[float], start: float, end: float
) -> PageFreshness:
    """One page's figures over [start, end]. `changes`: its change times, ascending and
    complete up to max(end, the last fetch) (later ones may follow); `fetched`: its fetch
    times, ascending (those after `end` are ignored)."""
    if end < start:
        raise ValueError("the window ends before it starts")
    stop = bisect_right(fetched, end)  # fetches after the window are ignored
    inside = bisect_left(fetched, start)  # the first fetch in the window
    held = max(inside - 1, 0)  # the last before it: its copy is held at start
    versions = [bisect_right(changes, f) for f in fetched[held:stop]]  # what each got
    k = max(inside - held, 1)  # fetches in the window, compared with the one before each
    unchanged = sum(map(eq, versions[k:], versions[k - 1 : -1]))
    missing = (fetched[0] if stop and fetched[0] < end else end) - start
    fresh = age = 0.0
    count = len(changes)
    # Hot loop (millions of fetches in a bench): conditionals, not min() and max().
    for f, upto, version in zip(
        fetched[held:stop], [*fetched[held + 1 : stop], math.inf], versions, strict=True
    ):
        a = f if f > start else start
        b = upto if upto < end else end
        if a >= b:
            continue
        c = changes[version] if version < count else math.inf  # the first change after f
        if c >= b:
            fresh += b - a
        elif c > a:
            fresh += c - a
            age += (b - c) * (b - c) / 2.0
        else:
            age += ((b - c) * (b - c) - (a - c) * (a - c)) / 2.0
    missing = missing if missing > 0.0 else 0.0
    return PageFreshness(fresh, age, missing, stop - inside, unchanged)


def measure_freshness(
    web: ChangingWeb,
    fetched: Iterable[tuple[str, float]],
    start: float,
    end: float,
    pages: Iterable[str] | None = None,
) -> Freshness:
    """Average freshness and age over [start, end] of the copies that `fetched` (URL,
    fetch time) gives, over `pages` (default: every page of the changing web fetched
    by `end`; a KeyError for one that is not). URLs are normalised; fetches of URLs
    not on the changing web (robots.txt, redirects, ...) are ignored."""
    if end <= start:
        raise ValueError("the window must have a length")
    times: dict[str, list[float]] = defaultdict(list)
    for url, t in fetched:
        times[url].append(t)
    by_page: dict[str, list[float]] = defaultdict(list)
    known: dict[str, ChangingPage] = {}
    for url, ts in times.items():
        if (page := web.page(url)) is not None:
            by_page[page.url].extend(ts)
            known[page.url] = page
    if pages is None:
        wanted = [known[url] for url, ts in by_page.items() if min(ts) <= end]
    else:
        wanted = [web.require(url) for url in dict.fromkeys(map(normalize_url, pages))]
    fresh = age = missing = 0.0
    fetches = unchanged = 0
    for page in wanted:
        ts = sorted(by_page.get(page.url, ()))
        # Complete up to `end` is enough: later fetches are ignored.
        one = page_freshness(web.timeline(page, end), ts, start, end)
        fresh += one.fresh
        age += one.age
        missing += one.missing
        fetches += one.fetches
        unchanged += one.unchanged
    span = (end - start) * len(wanted)
    if not span:
        return Freshness(0, 0.0, 0.0, 0.0, 0, 0)
    held = span - missing
    return Freshness(
        pages=len(wanted),
        freshness=fresh / span,
        age=age / held if held > 0 else 0.0,
        missing=missing / span,
        fetches=fetches,
        unchanged=unchanged,
    )


def fetches(log: Iterable[Request]) -> list[tuple[str, float]]:
    """(URL, start) of every complete GET in a request log that was answered 200 or
    304: the copies a crawler took (a 304 confirms the copy it holds)."""
    return [
        (r.url, r.start) for r in log if r.method == "GET" and r.complete and r.status in (200, 304)
    ]
