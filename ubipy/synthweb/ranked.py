"""The ranked web: Zipf host sizes and heavy-tailed links, so that crawl order matters.

`WebSpec(ranked=True)` (or `python -m ubipy.synthweb --ranked`) replaces the uniform hosts
and links of the ordinary web with the graph built here; the server, the in-process
transport, the request log, the truth and the referee are unchanged. The parameters are
fixed from the literature, before any crawl order was measured on it:

* Host sizes follow Zipf's law with exponent 1 (Adamic & Huberman, "Zipf's law and the
  Internet", Glottometrics 3, 2002: pages per site are power-law distributed, rank-size
  slope about -1). The spec's hosts x pages_per_host pages are split by rank r as
  1/r (each host at least one page), largest first: at 250 x 200, h000 has 8,156 pages,
  the median host 66 and the smallest 34.
* In-degrees follow a power law of exponent 2.1 (Broder et al., "Graph structure in the
  web", WWW 2000). Chung-Lu style: each page draws a weight from a Pareto law and a link
  picks its target with probability proportional to weight, so a page's expected
  in-degree is proportional to its weight and in-degrees inherit the weights' tail. The
  weights' density exponent is 1.95, not 2.1: links that stay on their host, and a page
  linking each target once, cap the in-degree of a heavy page on a small host (at most
  its host's pages, plus links from other hosts), which steepens the in-degree tail;
  weights of exponent 2.1 gave in-degrees of 2.27 to 2.29 (seeds 0 to 2, fitted as
  below), weights of 1.95 give 2.12 to 2.13 (1.9 gives 2.07); the largest in-degree
  is then 5,000 to 9,000. Fitted by maximum likelihood (Clauset, Shalizi & Newman,
  "Power-law distributions in empirical data", SIAM Review 2009), x_min chosen by the
  Kolmogorov-Smirnov distance (7 to 12 here).
  A host's home page takes the largest weight of its host (a site's most linked page is
  its home page, as on the real web); this permutes weights, so the law is unchanged.
* Out-degree about 7 (Broder et al.: 7.2 links per page on average): each page has
  3 to 11 weighted links (uniformly; mean 7), plus its navigation links below. Three
  quarters of the weighted links stay on their host, picked by weight within it; the rest
  pick by weight over the whole web, another host's page. Repeated targets and links to
  the page itself are dropped, so a page links each target once: at 250 x 200, 7.0 to
  7.2 links per page, 75 to 76% of them within the host (seeds 0 to 2).
* Every page is reachable from the seed, the home page of h000 (the largest host): page
  k > 0 of a host is linked from an earlier page of its host, chosen uniformly (a random
  recursive tree, shallow: depth about ln k), and the home page of every host h > 0 from a
  page of a host before it, chosen uniformly.

The ground truth's PageRank (`pagerank.py`: damping 0.85, dangling pages spread
uniformly, power iteration to an L1 change under 1e-10) is computed once, on demand, over
the whole graph: at 250 x 200, 54 to 56 steps, 4 to 5 s on a shared 2-core machine (the
graph is built in under 1 s); the top 1% of pages hold 36 to 41% of the PageRank, the
home pages 14 to 17%. URLs: `http://hNNN.synth.test/` for a home page, `/pK.html` for page K of
its host; robots.txt and /sitemap.xml are 404s on every host (nothing disallowed, no
sitemap). Links are written root-relative within a host and absolute across hosts.

Everything is drawn from one RNG seeded with the spec's seed and size, so the same spec
gives the same web in every process.
"""

from __future__ import annotations

import random
import re
from bisect import bisect_right
from itertools import accumulate

from ubipy.synthweb.pagerank import PageRank, pagerank
from ubipy.synthweb.render import Link
from ubipy.synthweb.spec import WebSpec
from ubipy.synthweb.urls import normalize_url, split_url

HOST_SIZE_EXPONENT = 1.0  # Zipf: a host's size is proportional to rank ** -1
IN_DEGREE_EXPONENT = 2.1  # the in-degrees' tail, which the weights are chosen to give
WEIGHT_EXPONENT = 1.95  # the weights' density exponent (see the docstring for why not 2.1)
WEIGHTED_LINKS = (3, 11)  # weighted links per page, uniform in this range (inclusive)
LOCAL_SHARE = 0.75  # the chance that a weighted link stays on its host
_PATH = re.compile(r"^/p([1-9]\d*)\.html$")
_CROSS_TRIES = 16  # draws of a cross-host target before the link is given up


def host_names(spec: WebSpec) -> list[str]:
    """hNNN.<domain>, as the ordinary web names its hosts."""
    width = max(3, len(str(spec.hosts - 1)))
    return [f"h{i:0{width}d}.{spec.domain}" for i in range(spec.hosts)]


def zipf_sizes(pages: int, hosts: int, exponent: float = HOST_SIZE_EXPONENT) -> list[int]:
    """`pages` split over `hosts` in proportion to rank ** -exponent, largest first,
    each at least 1 (rounded by largest remainder, so that they sum to `pages`)."""
    if hosts < 1 or pages < hosts:
        raise ValueError("need at least one page per host")
    shares = [r**-exponent for r in range(1, hosts + 1)]
    spare = pages - hosts  # one page each first, the rest by share
    ideal = [spare * s / sum(shares) for s in shares]
    sizes = [1 + int(x) for x in ideal]
    by_remainder = sorted(range(hosts), key=lambda i: (int(ideal[i]) - ideal[i], i))
    for i in by_remainder[: pages - sum(sizes)]:
        sizes[i] += 1
    return sizes


class RankedWeb:
    """The ranked web's graph. Pages have ids 0..page_count-1, host by host (h000's
    first, its home page id 0); `url(i)` and `page_id(url)` convert. Read-only data:
    `names` (host names by index), `sizes` (pages per host), `starts` (host h's ids
    run from starts[h] to starts[h + 1] - 1), `host_of` (a page's host index) and the
    flat out-links `offsets`/`targets` (see `out_links`)."""

    def __init__(self, spec: WebSpec) -> None:
        self.spec = spec
        self.names = host_names(spec)
        self._index = {name: i for i, name in enumerate(self.names)}
        self.sizes = zipf_sizes(spec.hosts * spec.pages_per_host, spec.hosts)
        self.starts = [0, *accumulate(self.sizes)]  # host h's pages: starts[h]..starts[h+1]-1
        self.page_count = self.starts[-1]
        self.host_of = [h for h, size in enumerate(self.sizes) for _ in range(size)]
        links = self._generate(random.Random(f"synthweb-ranked:{spec.seed}:{self.page_count}"))
        # Flat out-links: page i links targets[offsets[i]:offsets[i + 1]].
        self.offsets = [0, *accumulate(map(len, links))]
        self.targets = [t for page in links for t in page]
        self._rank: PageRank | None = None

    def _generate(self, rng: random.Random) -> list[list[int]]:
        n, starts = self.page_count, self.starts
        weights = [rng.paretovariate(WEIGHT_EXPONENT - 1.0) for _ in range(n)]
        for h in range(len(self.sizes)):  # the home page takes its host's largest weight
            first, end = starts[h], starts[h + 1]
            top = max(range(first, end), key=weights.__getitem__)
            weights[first], weights[top] = weights[top], weights[first]
        cumulative = list(accumulate(weights))
        total = cumulative[-1]
        links: list[list[int]] = [[] for _ in range(n)]
        for h, size in enumerate(self.sizes):
            first = starts[h]
            for k in range(1, size):  # the navigation tree
                links[first + rng.randrange(k)].append(first + k)
            if h:  # reachable from an earlier host, hence from h000's home page
                links[rng.randrange(first)].append(first)
        low, high = WEIGHTED_LINKS
        for h, size in enumerate(self.sizes):
            first, end = starts[h], starts[h + 1]
            below = cumulative[first - 1] if first else 0.0
            mass = cumulative[end - 1] - below
            for page in range(first, end):
                out = links[page]
                for _ in range(rng.randint(low, high)):
                    if size > 1 and rng.random() < LOCAL_SHARE:
                        x = below + rng.random() * mass
                        out.append(min(bisect_right(cumulative, x, first, end), end - 1))
                        continue
                    for _ in range(_CROSS_TRIES):
                        target = min(bisect_right(cumulative, rng.random() * total), n - 1)
                        if not first <= target < end:
                            out.append(target)
                            break
        return [[t for t in dict.fromkeys(out) if t != page] for page, out in enumerate(links)]

    # -- pages and URLs ------------------------------------------------------------------
    def seed_url(self) -> str:
        """The crawl's seed: h000's home page (h000 is the largest host)."""
        return self.url(0)

    def url(self, page: int) -> str:
        host = self.host_of[page]
        return f"http://{self.names[host]}{self.path(page)}"

    def path(self, page: int) -> str:
        number = page - self.starts[self.host_of[page]]
        return "/" if number == 0 else f"/p{number}.html"

    def page_urls(self) -> list[str]:
        """Every page's URL (normalised), by page id."""
        return [self.url(i) for i in range(self.page_count)]

    def page_id(self, url: str) -> int | None:
        """The page at `url` (normalised here), None if there is none."""
        host, target = split_url(normalize_url(url))
        index = self._index.get(host)
        return None if index is None else self.locate(index, target)

    def locate(self, host: int, target: str) -> int | None:
        """The page at path `target` of host number `host`, None if there is none."""
        if target == "/":
            return self.starts[host]
        m = _PATH.match(target)
        if m is None or int(m.group(1)) >= self.sizes[host]:
            return None
        return self.starts[host] + int(m.group(1))

    def out_links(self, page: int) -> list[int]:
        """The ids `page` links, in document order, each once."""
        return self.targets[self.offsets[page] : self.offsets[page + 1]]

    def links(self, page: int) -> tuple[Link, ...]:
        """`page`'s anchors: root-relative within its host, absolute to other hosts."""
        host = self.host_of[page]
        result = []
        for target in self.out_links(page):
            url, path = self.url(target), self.path(target)
            href = path if self.host_of[target] == host else url
            result.append(Link("a", href, url, text=f"{self.title(target)}"))
        return tuple(result)

    def title(self, page: int) -> str:
        host = self.host_of[page]
        return f"{self.names[host]} page {page - self.starts[host]}"

    # -- ground truth --------------------------------------------------------------------
    def host_sizes(self) -> dict[str, int]:
        """Pages per host, by host name (largest first)."""
        return dict(zip(self.names, self.sizes, strict=True))

    def in_degrees(self) -> dict[str, int]:
        """How many distinct pages link each page, by URL."""
        counts = [0] * self.page_count
        for target in self.targets:
            counts[target] += 1
        return dict(zip(self.page_urls(), counts, strict=True))

    def rank(self) -> PageRank:
        """PageRank over the whole graph, by page id, with its iterations and time
        (computed on the first call, a few seconds at 50,000 pages)."""
        if self._rank is None:
            self._rank = pagerank([self.out_links(i) for i in range(self.page_count)])
        return self._rank

    def pagerank(self) -> dict[str, float]:
        """Each page's true PageRank by URL, summing to 1."""
        return dict(zip(self.page_urls(), self.rank().scores, strict=True))
