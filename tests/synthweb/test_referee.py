"""The referee: each check catches its violation in a hand-made log, a clean log passes, and
a perfect crawler (BFS driven by the model, polite, through the proxy) is judged clean."""

from __future__ import annotations

from collections import deque

import httpx2
import trio

from ubipy.synthweb import Referee, Request, SyntheticWeb, SynthServer, WebSpec, ground_truth, serve
from ubipy.synthweb.urls import registered_domain, resolve, split_url

WEB = SyntheticWeb()
H0, H2, H4, H6, H7 = (f"h00{i}.synth.test" for i in (0, 2, 4, 6, 7))


def req(start: float, host: str, path: str, status: int = 200, took: float = 0.01) -> Request:
    return Request(start, start + took, host, path, status, "ua; peer=p1", "p1", 100)


def clean_log() -> list[Request]:
    return [
        req(0.0, H0, "/robots.txt"),
        req(0.1, H0, "/"),
        req(0.2, H0, "/s1/p1.html"),
        req(0.0, H7, "/robots.txt", 301),
        req(0.1, H7, "/robots-real.txt"),
        req(0.2, H7, "/"),
        req(0.0, H6, "/robots.txt", 500),
        req(0.1, H6, "/robots.txt", 500),  # robots retries are never duplicates
        req(0.0, H2, "/robots.txt"),
        req(0.1, H2, "/s2/p2.html", 503),
        req(0.2, H2, "/s2/p2.html"),  # a retry after a 5xx is not a duplicate
    ]


def test_a_clean_log_passes() -> None:
    referee = Referee(clean_log(), WEB)
    assert referee.problems(delay=0.05) == {}
    referee.assert_clean(delay=0.05)
    summary = referee.summary(delay=0.05)
    assert summary["requests"] == 11 and summary["hosts"] == 4 and summary["duplicates"] == 0


def test_duplicate() -> None:
    log = [*clean_log(), req(0.3, H0, "/s1/p1.html")]
    assert Referee(log, WEB).duplicates() == [log[-1]]
    # the same URL spelt differently is the same URL
    log = [*clean_log(), req(0.3, H0, "/s1/./p1.html")]
    assert Referee(log, WEB).duplicates() == [log[-1]]
    assert Referee(log, WEB).unnormalized() == [log[-1]]


def test_overlap() -> None:
    log = [*clean_log(), req(0.205, H0, "/s2/p2.html", took=0.01)]
    [overlap] = Referee(log, WEB).overlaps()
    assert overlap.second == log[-1] and overlap.first.target_path == "/s1/p1.html"


def test_short_gap_uses_the_larger_of_delay_and_crawl_delay() -> None:
    log = [*clean_log(), req(0.25, H0, "/s2/p5.html")]
    [gap] = Referee(log, WEB).short_gaps(0.05)
    assert gap.next == log[-1] and gap.required == 0.05
    assert Referee(log, WEB).short_gaps(0.02) == []
    slow = [req(0.0, H4, "/robots.txt"), req(0.2, H4, "/")]  # Crawl-delay: 0.3
    [gap] = Referee(slow, WEB).short_gaps(0.05)
    assert gap.required == 0.3
    assert Referee([slow[0], req(0.32, H4, "/")], WEB).short_gaps(0.05) == []


def test_robots_violations() -> None:
    disallowed = req(0.3, H2, "/private/secret.html")
    early = req(0.0, H0, "/s2/p2.html", took=0.001)  # before h000's robots.txt ended
    broken = req(0.3, H6, "/")  # h006's robots.txt never succeeded
    log = [*clean_log(), disallowed, broken]
    found = {(v.request, v.reason) for v in Referee([*log, early], WEB).robots_violations()}
    assert found == {
        (disallowed, "disallowed"),
        (broken, "before-robots"),
        (early, "before-robots"),
    }


def test_missing_and_unexpected() -> None:
    log = clean_log()
    referee = Referee(log, WEB)
    truth = referee.requested()
    assert referee.missing(truth) == referee.unexpected(truth) == set()
    extra = "http://h000.synth.test/s2/p2.html"
    assert Referee(log[:-1], WEB).missing(truth) == set()  # p2.html was asked twice
    assert Referee(log[1:], WEB).missing(truth) == {"http://h000.synth.test/robots.txt"}
    assert referee.unexpected(truth - {extra}) == set()
    assert referee.unexpected(truth - {"http://h002.synth.test/s2/p2.html"}) == {
        "http://h002.synth.test/s2/p2.html"
    }


async def perfect_crawl(server: SynthServer, web: SyntheticWeb, delay: float) -> None:
    """One request at a time per host (in fact one at a time overall), each host's robots.txt
    first, links from the model, redirects from the server's Location headers."""
    seed = web.seed_url()
    domain = registered_domain(split_url(seed)[0])
    queues: dict[str, deque[str]] = {}
    robots: dict[str, bool] = {}  # host -> robots usable (False: 5xx three times)
    ready: dict[str, float] = {}
    seen: set[str] = set()

    def admit(url: str) -> None:
        host = split_url(url)[0]
        if url not in seen and registered_domain(host) == domain:
            seen.add(url)
            queues.setdefault(host, deque()).append(url)

    async def fetch(client: httpx2.AsyncClient, url: str) -> httpx2.Response:
        host = split_url(url)[0]
        await trio.sleep_until(ready.get(host, 0.0))
        response = await client.get(url)
        ready[host] = trio.current_time() + max(delay, web.crawl_delay(host) or 0.0)
        return response

    async def fetch_robots(client: httpx2.AsyncClient, host: str) -> bool:
        url = f"http://{host}/robots.txt"
        for _ in range(6):
            for _attempt in range(3):
                response = await fetch(client, url)
                if response.status_code < 500:
                    break
            else:
                return False
            if not response.is_redirect:
                return True
            url = resolve(url, response.headers["location"]) or url
        return True

    ua = {"User-Agent": "perfect/1.0 (peer=perfect1)"}
    async with httpx2.AsyncClient(proxy=server.proxy_url, trust_env=False, headers=ua) as client:
        admit(seed)
        while any(queues.values()):
            host = min((h for h, q in queues.items() if q), key=lambda h: ready.get(h, 0.0))
            if host not in robots:
                robots[host] = await fetch_robots(client, host)
            url = queues[host].popleft()
            if not robots[host] or not web.robots_allows(host, split_url(url)[1]):
                continue
            response = await fetch(client, url)
            if response.is_redirect:
                admit(resolve(url, response.headers["location"]) or url)
            elif response.status_code == 200:
                for link in web.links_of(url):
                    admit(link)


async def test_a_perfect_crawler_is_judged_clean(nursery: trio.Nursery) -> None:
    web = SyntheticWeb(WebSpec(crawl_delay=0.03, page_bytes=500))
    server: SynthServer = await nursery.start(serve, web)
    delay = 0.01
    with trio.fail_after(30):
        await perfect_crawl(server, web, delay)
        await server.wait_idle()
    referee = Referee(server.log, web)
    truth = ground_truth(web, [web.seed_url()], sitemaps=False)  # it reads none
    assert referee.missing(truth) == set()
    assert referee.unexpected(truth) == set()
    referee.assert_clean(truth, delay)
    assert referee.unnormalized() == []
    assert referee.summary(truth, delay)["peers"] == 1
