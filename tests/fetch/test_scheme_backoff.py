"""A request of one scheme of a host that made no connection (a port shut, TLS spoken
to a plain-HTTP port) backs off that scheme, not the host: its other scheme goes on
at the host's delay. One https link on a plain-HTTP site stalled the site's crawl for
minutes (QA: 3 min 40 s for 3 links). What the server answers still backs the whole
host off, as does a host that answers over neither scheme."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from tests.crawling import crawl_until_idle
from ubipy.config import BoundsConfig, CrawlConfig, CrawlOrder, FetchConfig, PolitenessConfig
from ubipy.fetch.politeness import Entry, HostRobots, JobKind, Scheduler
from ubipy.store import Shard
from ubipy.store_config import StoreConfig

ALLOW_ALL = b"User-agent: *\nDisallow:\n"

# How a request of a URL goes: "ok", "refused" (no connection), "503".
Answer = Callable[[str], str]


def _sched(urls: list[str], *, window: int = 64, order: CrawlOrder = CrawlOrder.BFS) -> Scheduler:
    """A scheduler with ``urls`` of a.test admitted, in order (the window's overflow
    loaded from a frontier on disk, as the shard does: the next after a sequence)."""
    entries = [Entry(i, i, url, 0) for i, url in enumerate(urls, start=1)]

    def loader(host: str, after: int, limit: int) -> list[Entry]:
        return [e for e in entries if e.seq > after][:limit]

    s = Scheduler(delay=1.0, window=window, loader=loader, robots_retry_base=30.0, order=order)
    for entry in entries:
        s.add("a.test", entry)
    return s


def _crawl(s: Scheduler, answer: Answer, *, until: float = 10_000.0) -> list[tuple[float, str]]:
    """Every request the host gets, answered as ``answer`` says, a page that made no
    connection retried twice (2 s, then 4 s): (when, URL), SKIP jobs as "skip URL"."""
    asked: list[tuple[float, str]] = []
    now = 0.0
    while (wake := s.next_wakeup()) is not None and now <= until:
        now = max(now, wake)
        job = s.next_job(now)
        if job is None:
            continue
        how = answer(job.url)
        if job.kind is JobKind.SKIP:
            asked.append((now, f"skip {job.url}"))
            continue
        asked.append((now, job.url))
        if job.kind is JobKind.ROBOTS:
            status = {"ok": 200, "503": 503}.get(how)
            body = ALLOW_ALL if status == 200 else b""
            s.robots_answer(
                "a.test", now, status=status, location=None, body=body,
                no_connection=how == "refused",
            )  # fmt: skip
        elif how == "ok" or (entry := job.entry) is None or entry.attempt >= 2:
            s.finished("a.test", now)
        else:
            wait = 2.0 * 2**entry.attempt
            s.retry("a.test", entry, now, wait=wait, no_connection=how == "refused")
    assert s.idle()
    assert s.in_memory == 0
    return asked


def _https_refused(url: str) -> str:
    return "refused" if url.startswith("https:") else "ok"


def test_https_refused_on_an_http_site_leaves_its_http_pages_crawled_meanwhile() -> None:
    http = [f"http://a.test/p{i}" for i in range(1, 8)]
    https = [f"https://a.test/s{i}" for i in range(3)]
    asked = _crawl(_sched(["http://a.test/", *https, *http]), _https_refused)
    # http's pages go on at the host's delay while https's robots.txt backs off (before:
    # each waited for its three tries, 30 and 60 s apart: until 93 s).
    assert [(t, u) for t, u in asked if u in http] == [(3.0 + i, u) for i, u in enumerate(http)]
    # Its tries are as many, as far apart, counted on while the host went on over http.
    robots = [t for t, u in asked if u == "https://a.test/robots.txt"]
    assert robots == [2.0, 32.0, 92.0]
    # Then its URLs are closed saying why, as when the host was first met over https
    # (a port that made no connection three times would not for its pages either).
    assert [(t, u) for t, u in asked if "/s" in u] == [(93.0, f"skip {u}") for u in https]


def test_a_host_first_met_over_its_refused_scheme_is_crawled_over_the_other() -> None:
    asked = _crawl(
        _sched(["https://a.test/", "http://a.test/a", "http://a.test/b"]), _https_refused
    )
    assert asked[:5] == [
        (0.0, "https://a.test/robots.txt"),
        (1.0, "http://a.test/robots.txt"),  # not 30 s later
        (2.0, "http://a.test/a"),
        (3.0, "http://a.test/b"),
        (30.0, "https://a.test/robots.txt"),
    ]
    # Its third try fails too: https's URL is closed saying why.
    assert asked[5:] == [(90.0, "https://a.test/robots.txt"), (91.0, "skip https://a.test/")]


def test_a_page_that_made_no_connection_backs_off_its_scheme_only() -> None:
    s = _sched(["http://a.test/", "https://a.test/s", "http://a.test/a", "http://a.test/b"])
    tries = iter(["refused", "ok"])
    asked = _crawl(s, lambda url: next(tries) if url == "https://a.test/s" else "ok")
    assert asked == [
        (0.0, "http://a.test/robots.txt"),
        (1.0, "http://a.test/"),
        (2.0, "https://a.test/robots.txt"),
        (3.0, "https://a.test/s"),  # refused: asked again 2 s later, http's go on
        (4.0, "http://a.test/a"),
        (5.0, "https://a.test/s"),
        (6.0, "http://a.test/b"),
    ]


def test_a_host_that_answers_over_neither_scheme_waits_each_url_s_back_off() -> None:
    """Each scheme is tried at its own back-off (the first refused backs off alone, the
    second the whole host): each URL as often, and no sooner, than before."""
    s = _sched(["http://a.test/", "https://a.test/s", "http://a.test/a", "http://a.test/b"])
    down = {"https://a.test/s": iter(["refused"] * 3), "http://a.test/a": iter(["refused"] * 3)}
    asked = _crawl(s, lambda url: next(down[url]) if url in down else "ok")
    for url in down:
        tries = [t for t, u in asked if u == url]
        assert len(tries) == 3
        assert tries[1] - tries[0] >= 2.0 and tries[2] - tries[1] >= 4.0
    assert asked[3:5] == [(3.0, "https://a.test/s"), (4.0, "http://a.test/a")]
    # Both refused: nothing until https's back-off ends (5 s) and the host's (6 s).
    assert asked[5][0] == 6.0


def test_an_answer_of_the_server_backs_the_whole_host_off_as_before() -> None:
    http = ["http://a.test/a", "http://a.test/b"]
    asked = _crawl(
        _sched(["http://a.test/", "https://a.test/s", *http]),
        lambda url: "503" if url == "https://a.test/robots.txt" else "ok",
    )
    # A 503 says the server is there and busy: the host waits out https's back-off
    # (three tries, 30 and 60 s apart: until 92 s).
    assert [t for t, u in asked if u in http] == [94.0, 95.0]


def test_under_a_ranked_order_too() -> None:
    s = _sched(["http://a.test/", "https://a.test/s", "http://a.test/a"], order=CrawlOrder.OPIC)
    asked = _crawl(s, _https_refused)
    assert [t for t, u in asked if u == "http://a.test/a"] == [3.0]


def test_urls_set_aside_past_a_window_are_each_asked_once() -> None:
    """More https URLs than a window holds, on disk too: at most a window of them set
    aside, none lost or asked twice, and memory counted back to nothing; the rest wait,
    the host with them."""
    http = [f"http://a.test/p{i}" for i in range(6)]
    https = [f"https://a.test/s{i}" for i in range(9)]
    urls = ["http://a.test/", *https[:5], *http[:3], *https[5:], *http[3:]]
    asked = _crawl(_sched(urls, window=4), _https_refused)
    # Past the room aside, the host waits for the back-off's end as a whole, as before.
    robots = [t for t, u in asked if u == "https://a.test/robots.txt"]
    assert robots == [2.0, 32.0, 92.0]
    pages = [u for _, u in asked if not u.endswith("robots.txt")]
    assert sorted(pages) == sorted(["http://a.test/", *http, *(f"skip {u}" for u in https)])


@pytest.mark.parametrize(
    ("order", "window", "pages"),
    [(CrawlOrder.OPIC, 64, 6), (CrawlOrder.OPIC, 4, 12), (CrawlOrder.BFS, 4, 12)],
)
async def test_a_crawl_goes_on_over_http_while_https_makes_no_connection(
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
    order: CrawlOrder,
    window: int,
    pages: int,
) -> None:
    """A site served over http alone whose pages link to https URLs of it (a TLS
    handshake to its port fails: httpx2's ConnectError), crawled on the autojump clock:
    its http pages are all fetched at the host's delay, not after https's back-offs,
    and once each, whatever a window holds (the URLs set aside are not loaded again,
    under a ranked order either)."""
    http = [f"/p{i}" for i in range(pages)]
    links = "".join(f'<a href="{p}">x</a>' for p in http)
    secure = "".join(f'<a href="https://a.test/s{i}">x</a>' for i in range(3))
    asked: list[tuple[float, str]] = []

    async def serve(request: httpx2.Request) -> httpx2.Response:
        url = str(request.url)
        asked.append((trio.current_time(), url))
        if url.startswith("https:"):
            raise httpx2.ConnectError("[SSL: WRONG_VERSION_NUMBER] wrong version number")
        if request.url.path == "/robots.txt":
            return httpx2.Response(200, text="User-agent: *\nDisallow:\n")
        if request.url.path == "/sitemap.xml":
            return httpx2.Response(404)
        body = f"<html><body>{secure}{links}</body></html>"
        return httpx2.Response(200, headers={"content-type": "text/html"}, text=body)

    config = CrawlConfig(
        data_dir=tmp_path,
        politeness=PolitenessConfig(delay=1.0),  # robots.txt's back-off: 30 s, then 60
        fetch=FetchConfig(max_retries=2, retry_base=2.0),
        bounds=BoundsConfig(order=order),
        store=StoreConfig(host_window=window),
    )
    shard = Shard.open(tmp_path)
    try:
        async with httpx2.AsyncClient(transport=httpx2.MockTransport(serve)) as client:
            await crawl_until_idle(config, shard, client, ["http://a.test/"], patience=900)
        stored = {row["url"]: row["error"] for row in shard.iter_pages()}
        rows = shard._conn.execute("SELECT url, reason FROM frontier WHERE reason IS NOT NULL")
        closed = {str(url): reason for url, reason in rows}
    finally:
        shard.close()
    start = asked[0][0]
    fetched = [(t - start, url) for t, url in asked if url.startswith("http://a.test/p")]
    assert sorted(url for _, url in fetched) == sorted(f"http://a.test{p}" for p in http)
    assert max(t for t, _ in fetched) < 30.0  # before: past 90 s, behind https's tries
    robots = [t - start for t, url in asked if url == "https://a.test/robots.txt"]
    assert len(robots) == 3 and robots[1] - robots[0] >= 30.0 and robots[2] - robots[1] >= 60.0
    # Its URLs were closed without a request, saying why (the frontier's reason).
    assert not [u for _, u in asked if u.startswith("https://a.test/s")]
    assert closed == {f"https://a.test/s{i}": "robots.txt unreachable" for i in range(3)}
    assert all(stored[f"http://a.test{p}"] is None for p in http)


@pytest.mark.parametrize(("aside", "window"), [(a, w) for a in (1, 2, 3, 5) for w in (1, 2, 4)])
def test_every_url_is_asked_whatever_the_disk_holds_past_the_window(
    aside: int, window: int
) -> None:
    """A window's load asks for as many more rows as are set aside (a ranked order
    finds them again): cut back to the window, the rows cut were taken for none left
    on disk, and never asked (a review: 1 of 6 http URLs)."""
    https = [f"https://a.test/s{i}" for i in range(aside)]
    http = [f"http://a.test/p{i}" for i in range(6)]
    asked = _crawl(_sched(["http://a.test/", *https, *http], window=window), _https_refused)
    pages = sorted(u for _, u in asked if not u.endswith("robots.txt"))
    assert pages == sorted(["http://a.test/", *http, *(f"skip {u}" for u in https)])


def test_a_page_due_again_set_aside_is_not_given_again_by_a_plan() -> None:
    """A page due again left its heap for the back-off's list without being handed
    out, and the refresher's next plan (which leaves out only those handed out) put it
    back in the heap: asked twice (a review)."""
    s = _sched(["http://a.test/p1", "http://a.test/p2", "http://a.test/p3"], window=8)
    r0 = Entry(100, 0, "https://a.test/r0", 0, refresh=True)
    r1 = Entry(101, 0, "https://a.test/r1", 0, refresh=True)
    s.refreshes("a.test", [(0.0, r0), (0.5, r1)])
    replanned = False
    tries = iter(["refused", "ok"])

    def answer(url: str) -> str:
        nonlocal replanned
        if not replanned and url == "http://a.test/p2":  # r1 is aside by now
            replanned = True
            s.refreshes("a.test", [(0.5, r1)])  # r0 handed out: left out of the plan
        return next(tries) if url == r0.url else "ok"

    asked = [u for _, u in _crawl(s, answer)]
    assert replanned and asked.count(r1.url) == 1 and asked.count(r0.url) == 2


def test_each_scheme_s_robots_txt_is_tried_as_often_when_both_fail() -> None:
    """https's port refused, http's robots.txt answering 503: the one count of tries
    the slot keeps went from one scheme to the other, and http's robots.txt was asked
    6 times, not 3 (a review). Each is asked 3 times, then closed, the host given up."""
    s = _sched(["https://a.test/", "http://a.test/a", "http://a.test/b"])
    asked = _crawl(s, lambda url: "refused" if url.startswith("https:") else "503")
    robots = [(t, u) for t, u in asked if u.endswith("robots.txt")]
    assert [t for t, u in robots if u.startswith("https:")] == [0.0, 31.0, 91.0]
    assert [t for t, u in robots if u.startswith("http:")] == [1.0, 92.0, 152.0]
    assert ("skip https://a.test/") in [u for _, u in asked]
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is HostRobots.GIVEN_UP
