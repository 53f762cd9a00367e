"""The ranked web: Zipf host sizes, in-degrees of exponent about 2.1, PageRank as ground
truth, every page reachable from the seed, served like the ordinary web."""

from __future__ import annotations

import math
import signal
import subprocess
import sys
from collections import Counter, deque
from html.parser import HTMLParser
from urllib.parse import urljoin

import httpx2
import pytest
import trio

from ubipy.synthweb import (
    RankedWeb,
    SyntheticWeb,
    SynthServer,
    SynthTransport,
    WebSpec,
    ground_truth,
    in_process,
    pagerank,
    serve,
)

BIG = WebSpec(ranked=True, hosts=250, pages_per_host=200)


@pytest.fixture(scope="module")
def big() -> SyntheticWeb:
    return SyntheticWeb(BIG)


def ranked(web: SyntheticWeb) -> RankedWeb:
    assert web.ranked is not None
    return web.ranked


def test_the_same_seed_gives_the_same_web_and_another_seed_another() -> None:
    spec = WebSpec(ranked=True, hosts=20, pages_per_host=30, seed=3)
    a, b = SyntheticWeb(spec), SyntheticWeb(spec)
    c = SyntheticWeb(WebSpec(ranked=True, hosts=20, pages_per_host=30, seed=4))
    ra, rb, rc = ranked(a), ranked(b), ranked(c)
    assert (ra.offsets, ra.targets) == (rb.offsets, rb.targets)
    assert ra.pagerank() == rb.pagerank()
    url = ra.url(17)
    assert a.respond("h000.synth.test", "/p17.html") == b.respond("h000.synth.test", "/p17.html")
    assert a.links_of(url) == b.links_of(url)
    assert ra.host_sizes() == rc.host_sizes()  # sizes follow from the spec's size alone
    assert ra.targets != rc.targets and ra.pagerank() != rc.pagerank()


def test_host_sizes_follow_zipf(big: SyntheticWeb) -> None:
    sizes = list(ranked(big).host_sizes().values())
    assert len(sizes) >= 200 and sum(sizes) >= 50_000 == ranked(big).page_count
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] >= 1
    median = sizes[len(sizes) // 2]
    assert sizes[0] >= 20 * median and sizes[0] >= 2000
    # Least squares of log size against log rank: Zipf's slope of -1.
    xs = [math.log(r) for r in range(1, len(sizes) + 1)]
    ys = [math.log(s) for s in sizes]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope /= sum((x - mx) ** 2 for x in xs)
    assert -1.1 <= slope <= -0.9
    assert big.seed_url() == ranked(big).seed_url() == "http://h000.synth.test/"


def power_law_fit(values: list[int]) -> tuple[float, int, int]:
    """Clauset-Shalizi-Newman: the exponent by maximum likelihood (the discrete law's
    continuous approximation, x_min - 1/2) for each x_min, keeping the x_min whose fit is
    closest to the data by Kolmogorov-Smirnov distance. (alpha, x_min, tail size)."""
    counts = Counter(values)
    best: tuple[float, float, int, int] | None = None
    for x_min in range(2, 200):
        tail = sorted((v, c) for v, c in counts.items() if v >= x_min)
        n = sum(c for _, c in tail)
        if n < 200:
            break
        alpha = 1 + n / sum(c * math.log(v / (x_min - 0.5)) for v, c in tail)
        distance, at_least = 0.0, n
        for v, c in tail:
            fitted = ((v - 0.5) / (x_min - 0.5)) ** (1 - alpha)
            distance = max(distance, abs(at_least / n - fitted))
            at_least -= c
        if best is None or distance < best[0]:
            best = (distance, alpha, x_min, n)
    assert best is not None
    return best[1], best[2], best[3]


def test_in_degrees_follow_a_power_law_of_exponent_about_2_1(big: SyntheticWeb) -> None:
    web = ranked(big)
    degrees = list(web.in_degrees().values())
    assert sum(degrees) == len(web.targets)
    alpha, x_min, tail = power_law_fit(degrees)
    assert 2.1 - 0.25 <= alpha <= 2.1 + 0.25, (alpha, x_min)
    assert tail >= 1000 and max(degrees) >= 1000
    assert 6 <= len(web.targets) / web.page_count <= 10  # Broder et al.: about 7 out-links
    local = sum(
        web.host_of[t] == web.host_of[p] for p in range(web.page_count) for t in web.out_links(p)
    )
    assert 0.7 <= local / len(web.targets) <= 0.85


def test_pagerank_sums_to_one_and_is_heavy_tailed(big: SyntheticWeb) -> None:
    web = ranked(big)
    result = web.rank()
    assert result.iterations < 200 and result.change < 1e-10
    scores = web.pagerank()
    assert len(scores) == web.page_count and min(scores.values()) > 0
    assert math.isclose(sum(scores.values()), 1.0, abs_tol=1e-9)
    top = sorted(scores.values(), reverse=True)
    assert sum(top[: len(top) // 100]) >= 0.10
    assert web.rank() is result  # computed once


def brute_force(out_links: list[list[int]], damping: float = 0.85) -> list[float]:
    """PageRank solved exactly: (I - d M - d/N 1 D^T) x = (1 - d)/N 1 by Gaussian
    elimination, with M[v][u] = 1/outdeg(u) per link u -> v and D the dangling pages."""
    n = len(out_links)
    a = [[float(i == j) for j in range(n)] + [(1 - damping) / n] for i in range(n)]
    for u, links in enumerate(out_links):
        targets = set(links)
        for v in range(n):
            if not targets:
                a[v][u] -= damping / n
            elif v in targets:
                a[v][u] -= damping / len(targets)
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col], strict=True)]
    return [a[i][n] / a[i][i] for i in range(n)]


def test_pagerank_matches_a_brute_force_solution() -> None:
    web = RankedWeb(WebSpec(ranked=True, hosts=4, pages_per_host=6, seed=5))
    graph = [web.out_links(i) for i in range(web.page_count)]
    exact = brute_force(graph)
    assert list(web.rank().scores) == pytest.approx(exact, abs=1e-9)
    # With a dangling page (2), a repeated link and a page nobody links (3).
    graph = [[1, 2, 2], [0, 2], [], [0, 1]]
    assert list(pagerank(graph).scores) == pytest.approx(brute_force(graph), abs=1e-9)


def test_every_page_is_reachable_from_the_seed_and_is_in_the_truth(big: SyntheticWeb) -> None:
    web = ranked(big)
    seen, queue = {0}, deque([0])
    while queue:
        for target in web.out_links(queue.popleft()):
            if target not in seen:
                seen.add(target)
                queue.append(target)
    assert len(seen) == web.page_count
    # A correct crawl: every page, and each host's robots.txt and /sitemap.xml (404s).
    extra = [f"http://{h}/{name}" for h in web.names for name in ("robots.txt", "sitemap.xml")]
    assert ground_truth(big, [big.seed_url()]) == set(web.page_urls()) | set(extra)


def test_the_hostile_and_paced_hosts_hang_off_the_seed() -> None:
    web = SyntheticWeb(WebSpec(ranked=True, hosts=3, pages_per_host=4, paced=True))
    truth = ground_truth(web, [web.seed_url()])
    assert "http://pace-busy.synth.test/" in truth
    assert set(ranked(web).page_urls()) <= truth


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        href = dict(attrs).get("href")
        if tag == "a" and href is not None:
            self.hrefs.append(href)


async def test_the_server_serves_pages_whose_links_parse_to_the_model_s() -> None:
    web = SyntheticWeb(WebSpec(ranked=True, hosts=30, pages_per_host=20))
    async with trio.open_nursery() as nursery:
        server: SynthServer = await nursery.start(serve, web)
        async with httpx2.AsyncClient(proxy=server.proxy_url, trust_env=False) as client:
            for url in (web.seed_url(), "http://h000.synth.test/p7.html", ranked(web).url(400)):
                r = await client.get(url)
                assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
                parser = _Anchors()
                parser.feed(r.text)
                assert [urljoin(url, h) for h in parser.hrefs] == web.links_of(url)
                assert len(parser.hrefs) >= 1
            for missing in ("/robots.txt", "/sitemap.xml", "/p9999.html", "/s1/p1.html"):
                assert (await client.get(f"http://h001.synth.test{missing}")).status_code == 404
        await server.wait_idle()
        assert len(server.log) == 7
        nursery.cancel_scope.cancel()


async def test_the_in_process_transport_answers_and_logs_the_ranked_web() -> None:
    web = SyntheticWeb(WebSpec(ranked=True, hosts=10, pages_per_host=10))
    server = in_process(web)
    async with httpx2.AsyncClient(transport=SynthTransport(server)) as client:
        r = await client.get("http://h000.synth.test/p3.html")
    assert r.status_code == 200 and "h000.synth.test page 3" in r.text
    [entry] = server.log.entries
    assert (entry.host, entry.target_path, entry.status) == ("h000.synth.test", "/p3.html", 200)


async def test_the_command_line_serves_the_ranked_web() -> None:
    cmd = [sys.executable, "-m", "ubipy.synthweb", "--ranked", "--hosts", "5", "--pages", "8"]
    proc = await trio.lowlevel.open_process(cmd, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    try:
        with trio.fail_after(20):
            out = b""
            while b"seed " not in out:
                chunk = await proc.stdout.receive_some()
                assert chunk, out
                out += chunk
            proxy = out.split(b"proxy ", 1)[1].split(b"\n", 1)[0].decode()
            async with httpx2.AsyncClient(proxy=proxy, trust_env=False) as c:
                r = await c.get("http://h000.synth.test/p12.html")  # h000 has 16 pages
                assert r.status_code == 200 and "h000.synth.test page 12" in r.text
            proc.send_signal(signal.SIGINT)
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await proc.stdout.aclose()
