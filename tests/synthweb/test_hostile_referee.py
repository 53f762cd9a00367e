"""The referee on the hostile web: hand-made logs with each violation are caught, clean ones
pass, and a real crawl of the fault hosts (time-outs, retries, Retry-After) is judged."""

from __future__ import annotations

import dataclasses
import email.utils
import json
import time
from pathlib import Path

import httpx2
import trio

from ubipy.synthweb import Referee, Request, RequestLog, SyntheticWeb, SynthServer, serve
from ubipy.synthweb.log import ABANDONED, COMPLETE, CUT, RESET

from .test_hostile import SMALL, WEB, x


def req(
    start: float,
    url: str,
    status: int = 200,
    took: float = 0.01,
    outcome: str = COMPLETE,
    retry_after: str = "",
    clock_offset: float = 0.0,
) -> Request:
    host, path = url[7:].split("/", 1)
    return Request(
        start, start + took, host, "/" + path, status, "ua", "p1", 100, "GET",
        outcome, retry_after, clock_offset,
    )  # fmt: skip


def test_retry_after_in_seconds() -> None:
    robots, page = x("ratelimit", "/robots.txt"), x("ratelimit", "/limited.html")
    log = [req(0.0, robots, 404), req(0.1, page, 429, retry_after="2")]  # ends at 0.11
    early = req(2.0, x("ratelimit", "/other.html"))
    [v] = Referee([*log, early], WEB).retry_after_violations()
    assert (v.response, v.next, v.not_before) == (log[1], early, 2.11)
    clean = [*log, req(2.11, page), req(2.2, x("ratelimit", "/other.html"))]
    assert Referee(clean, WEB).problems(max_retries=1) == {}


def test_retry_after_as_an_http_date_uses_the_logged_clock_offset() -> None:
    date = email.utils.formatdate(1003.0, usegmt=True)  # wall = trio + 1000: trio 3.0
    busy = req(0.1, x("unavailable", "/unavailable.html"), 503, retry_after=date, clock_offset=1000)
    early = req(2.9, x("unavailable", "/other.html"))
    assert [v.next for v in Referee([busy, early], WEB).retry_after_violations()] == [early]
    on_time = req(2.9995, x("unavailable", "/other.html"))  # within epsilon
    assert Referee([busy, on_time], WEB).retry_after_violations() == []
    nonsense = req(0.1, x("unavailable", "/unavailable.html"), 503, retry_after="soon")
    assert Referee([nonsense, early], WEB).retry_after_violations() == []


def test_retries_after_incomplete_or_refused_answers_are_not_duplicates() -> None:
    hang, always = x("hang", "/hang.html"), x("hang-always", "/hang.html")
    slow, flaky = x("slow", "/slow.html"), x("flaky", "/flaky.html")
    log = [
        req(0.0, hang, 0, outcome=ABANDONED),
        req(1.0, hang, 0, outcome=ABANDONED),
        req(2.0, hang),
        req(0.0, slow, 200, outcome=CUT),
        req(1.0, slow),
        req(0.0, flaky, 500),
        req(1.0, flaky),
        req(0.0, always, 0, outcome=RESET),
        req(1.0, always, 0, outcome=ABANDONED),
        req(2.0, always, 0, outcome=ABANDONED),
    ]
    referee = Referee(log, WEB)
    assert referee.duplicates() == [] and referee.hammering(2) == []
    [hammered, hammered_always] = sorted(referee.hammering(1), key=lambda h: h.url)
    assert (hammered.url, hammered.requests, hammered.allowed) == (always, 3, 2)
    assert hammered_always.url == hang
    assert referee.unfinished({hang, always, slow, flaky}) == {always}
    again = req(3.0, hang)
    assert Referee([*log, again], WEB).duplicates() == [again]
    # A huge body the client cut at its cap: asking again is a retry, bounded by hammering.
    huge = [req(0.0, x("huge", "/huge.html"), 200, outcome=ABANDONED)] * 2
    assert Referee(huge, WEB).duplicates() == [] and len(Referee(huge, WEB).hammering(0)) == 1


def test_traps_budget_repeats_and_ignored_hosts() -> None:
    deep = [x("deep", p) for p in ("/", "/deep/a/", "/deep/a/a/", "/deep/a/a/a/a/")]
    cal = [x("calendar", f"/cal/2026/{m:02d}/") for m in range(1, 13)]
    # A host's /sitemap.xml spends none of its budget (the crawler's Entry.fresh).
    sitemap = x("calendar", "/sitemap.xml")
    log = [req(float(i), u) for i, u in enumerate([x("deep", "/robots.txt"), *deep, *cal, sitemap])]
    referee = Referee(log, WEB)
    assert referee.over_budget(10) == {"x-calendar.synth.test": 12}
    assert referee.over_budget(12) == {}
    assert [r.target_path for r in referee.repeated_segments(3)] == ["/deep/a/a/a/a/"]
    truth = {x("deep", "/robots.txt"), x("deep"), x("deep", "/deep/a/")}
    assert referee.unexpected(truth, ignore_hosts=WEB.trap_hosts()) == set()
    assert len(referee.unexpected(truth)) == 15  # the sitemap too
    found = referee.problems(
        truth, ignore_hosts=WEB.trap_hosts(), max_pages_per_host=10, max_path_repeats=3
    )
    assert set(found) == {"over_budget", "repeated_segments", "robots_violations"}


def test_robots_that_hang_or_are_huge() -> None:
    robots = x("robots-hang", "/robots.txt")
    log = [req(float(i), robots, 0, outcome=ABANDONED) for i in range(3)]
    page = req(4.0, x("robots-hang", "/page.html"))
    assert Referee(log, WEB).problems() == {}
    [v] = Referee([*log, page], WEB).robots_violations()
    assert (v.request, v.reason) == (page, "before-robots")
    big = req(0.0, x("bigrobots", "/robots.txt"), 200, outcome=ABANDONED)  # cut at 500 KiB
    late, early = req(1.0, x("bigrobots", "/late/page.html")), req(2, x("bigrobots", "/early/x"))
    [v] = Referee([big, late, early], WEB).robots_violations()
    assert (v.request, v.reason) == (early, "disallowed")


def test_jsonl_round_trip_with_the_new_fields(tmp_path: Path) -> None:
    log = RequestLog([req(0.0, x("ratelimit", "/limited.html"), 429, retry_after="2")])
    log.append(req(1.0, x("reset", "/reset.html"), 0, outcome=RESET, clock_offset=12.5))
    path = tmp_path / "log.jsonl"
    log.to_jsonl(path)
    assert RequestLog.from_jsonl(path).entries == log.entries
    old = {k: v for k, v in json.loads(path.read_text().splitlines()[0]).items()}
    for new_field in ("outcome", "retry_after", "clock_offset"):
        del old[new_field]
    path.write_text(json.dumps(old) + "\n")  # a log written before these fields existed
    [entry] = RequestLog.from_jsonl(path).entries
    assert entry.complete and entry.retry_after == ""


async def test_a_crawl_of_the_fault_hosts_with_retries_is_judged_clean(
    nursery: trio.Nursery,
) -> None:
    """Per host, one request at a time: time-out 0.3 s, up to 2 retries, 0.05 s back-off or
    Retry-After; immediately after a time-out the next request goes out. No overlaps: an
    abandoned request's interval ends when the server saw the client go."""
    web = SyntheticWeb(dataclasses.replace(SMALL, retry_after=1))
    server: SynthServer = await nursery.start(serve, web)
    cases = ("hang", "hang-always", "reset", "slow", "ratelimit", "unavailable", "flaky")
    timeout = httpx2.Timeout(0.3)

    async def crawl_host(client: httpx2.AsyncClient, case: str) -> None:
        await client.get(x(case, "/robots.txt"))
        home = await client.get(x(case))
        for url in [link for link in web.links_of(x(case)) if link != x(case)]:
            for _attempt in range(3):
                try:
                    r = await client.get(url)
                except httpx2.TransportError:
                    continue  # no back-off after a time-out: the next request goes now
                if r.status_code < 500 and r.status_code != 429:
                    break
                retry_after = r.headers.get("retry-after", "0")
                if not retry_after.isdigit():
                    when = email.utils.parsedate_to_datetime(retry_after).timestamp()
                    retry_after = str(max(0.0, when - trio.current_time() - offset))
                await trio.sleep(float(retry_after) + 0.05)
        assert home.status_code == 200

    offset = time.time() - trio.current_time()
    with trio.fail_after(10):
        async with (
            httpx2.AsyncClient(proxy=server.proxy_url, trust_env=False, timeout=timeout) as c,
            trio.open_nursery() as crawl,
        ):
            for case in cases:
                crawl.start_soon(crawl_host, c, case)
        await server.wait_idle()
    referee = Referee(server.log, web)
    assert referee.problems(max_retries=2) == {}
    assert web.hostile is not None
    hosts = {f"x-{c}.synth.test" for c in cases}
    recovering = {u for u in web.hostile.recovering_urls() if u.split("/")[2] in hosts}
    assert referee.unfinished(recovering) == set()
    assert x("hang-always", "/hang.html") in referee.unfinished(web.hostile.failing_urls())
    assert referee.summary()["incomplete"] == 2 + 3 + 2 + 2  # hang, hang-always, reset, slow
