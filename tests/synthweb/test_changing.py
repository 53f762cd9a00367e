"""The changing web: rates spread over orders of magnitude and correlated within a host,
Poisson change times drawn deterministically, each change visible in the body, ETag and
Last-Modified, 304s for conditional GETs, hosts without validators, the exact freshness
and age of a crawl's copies, the server's flag and the in-process transport's clock."""

from __future__ import annotations

import itertools
import math
import random
import signal
import statistics
import subprocess
import sys
from email.utils import formatdate

import httpx2
import pytest
import trio

from ubipy.synthweb import (
    ChangingWeb,
    SyntheticWeb,
    SynthTransport,
    WebSpec,
    fetches,
    in_process,
    measure_freshness,
    page_freshness,
)
from ubipy.synthweb.changing import EPOCH, STATIC_SHARE

DAY = 86400.0
RANKED = WebSpec(ranked=True, hosts=100, pages_per_host=50, changing=True)


def changes_of(spec: WebSpec) -> ChangingWeb:
    changes = SyntheticWeb(spec).changes
    assert changes is not None
    return changes


@pytest.fixture(scope="module")
def ranked() -> ChangingWeb:
    return changes_of(RANKED)


def a_page(changes: ChangingWeb, *, validators: bool, min_rate: float = 0.0) -> str:
    """The first page whose host does (or does not) send validators, changing at least
    at `min_rate` (per second)."""
    for url in changes.urls():
        page = changes.page(url)
        assert page is not None
        if page.validators == validators and page.rate > min_rate:
            return url
    raise AssertionError("no such page")


def test_the_same_seed_gives_the_same_changes_and_another_seed_others() -> None:
    a, b = changes_of(RANKED), changes_of(RANKED)
    other = changes_of(WebSpec(ranked=True, hosts=100, pages_per_host=50, changing=True, seed=1))
    urls = a.urls()[:300]
    assert [a.rate(u) for u in urls] == [b.rate(u) for u in urls]
    # Asked in another order and to other horizons, the times are the same.
    for u in reversed(urls):
        b.version(u, 3 * DAY)
    assert [a.change_times(u, DAY) for u in urls] == [b.change_times(u, DAY) for u in urls]
    assert [a.rate(u) for u in urls] != [other.rate(u) for u in urls]


def test_the_default_web_does_not_change() -> None:
    web = SyntheticWeb(WebSpec())
    assert web.changes is None
    early = web.respond("h020.synth.test", "/s1/p1.html", now=0.0)
    late = web.respond("h020.synth.test", "/s1/p1.html", now=30 * DAY)
    assert early == late and b'id="version"' not in early.body
    assert not any(name == "ETag" for name, _ in early.headers)


def test_rates_spread_over_orders_of_magnitude_and_a_fifth_never_change(
    ranked: ChangingWeb,
) -> None:
    rates = [ranked.rate(u) for u in ranked.urls()]
    static = sum(r == 0.0 for r in rates) / len(rates)
    assert abs(static - STATIC_SHARE) < 0.03
    intervals = sorted(1 / r for r in rates if r > 0)
    assert intervals[0] < 600  # some change every few minutes
    assert intervals[-1] > 28 * DAY  # some every month or more rarely
    assert intervals[-1] / intervals[0] > 1e4
    # Most pages change rarely: less often than daily (or never).
    assert sum(1 / r > DAY for r in rates if r > 0) + rates.count(0.0) > len(rates) / 2


def test_rates_are_closer_within_a_host_than_across_hosts(ranked: ChangingWeb) -> None:
    by_host: dict[str, list[float]] = {}
    for url in ranked.urls():
        if (rate := ranked.rate(url)) > 0:
            by_host.setdefault(ranked.group(url), []).append(math.log(rate))
    within = statistics.mean(statistics.pvariance(x) for x in by_host.values() if len(x) > 5)
    overall = statistics.pvariance([x for xs in by_host.values() for x in xs])
    assert within < 0.1 * overall
    # A host's sampled pages predict its other pages: its mean log rate from 5 pages is
    # within a factor of 3 of the rest's, for almost every host.
    close = [
        abs(statistics.mean(x[:5]) - statistics.mean(x[5:])) < math.log(3)
        for x in by_host.values()
        if len(x) > 10
    ]
    assert sum(close) / len(close) > 0.9


def test_a_page_changes_as_often_as_its_rate_says(ranked: ChangingWeb) -> None:
    window = 28 * DAY
    checked = 0
    for url in ranked.urls():
        expected = ranked.rate(url) * window
        if 50 < expected < 5000:
            seen = ranked.version(url, window)
            assert abs(seen - expected) < 5 * math.sqrt(expected), url  # Poisson: sd sqrt
            checked += 1
        if checked == 200:
            break
    assert checked == 200


def test_etag_and_last_modified_change_exactly_when_the_version_does(
    ranked: ChangingWeb,
) -> None:
    url = a_page(ranked, validators=True, min_rate=1 / DAY)
    web = SyntheticWeb(RANKED)
    host, path = url.removeprefix("http://").split("/", 1)
    c1 = ranked.next_change(url, 0.0)
    c2 = ranked.next_change(url, c1)
    c3 = ranked.next_change(url, c2)
    assert ranked.change_times(url, c3) == [c1, c2, c3]
    moments = [0.0, c1 - 1e-6, c1, (c1 + c2) / 2, c2, c3 - 1e-3, c3, c3 + 1.0]
    seen = []
    for t in moments:
        r = web.respond(host, "/" + path, now=t)
        headers = dict(r.headers)
        version = ranked.version(url, t)
        assert f'<p id="version">version {version}</p>'.encode() in r.body
        assert headers["Last-Modified"] == formatdate(
            EPOCH + (ranked.last_change(url, t) or 0.0), usegmt=True
        )
        seen.append((version, headers["ETag"], r.body))
    for (v1, etag1, body1), (v2, etag2, body2) in itertools.pairwise(seen):
        assert (v1 == v2) == (etag1 == etag2) == (body1 == body2)
    assert [v for v, _, _ in seen] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_a_conditional_get_is_answered_304_until_the_page_changes(ranked: ChangingWeb) -> None:
    web = SyntheticWeb(RANKED)
    url = a_page(ranked, validators=True, min_rate=1 / DAY)
    host, path = url.removeprefix("http://").split("/", 1)
    path = "/" + path
    change = ranked.next_change(url, 10.0)
    first = dict(web.respond(host, path, now=10.0).headers)
    for conditions in (
        {"if-none-match": first["ETag"]},
        {"if-none-match": f'"other", W/{first["ETag"]}'},
        {"if-modified-since": first["Last-Modified"]},
        {"if-modified-since": formatdate(EPOCH + change - 2, usegmt=True)},
    ):
        r = web.respond(host, path, now=change - 1.5, conditions=conditions)
        assert (r.status, r.body) == (304, b""), conditions
        assert dict(r.headers)["ETag"] == first["ETag"]
        after = web.respond(host, path, now=change + 1.5, conditions=conditions)
        assert after.status == 200 and dict(after.headers)["ETag"] != first["ETag"]
    # If-None-Match decides alone when both are sent; a bad date is ignored.
    both = {"if-none-match": '"other"', "if-modified-since": first["Last-Modified"]}
    assert web.respond(host, path, now=change - 1.5, conditions=both).status == 200
    bad = {"if-modified-since": "yesterday"}
    assert web.respond(host, path, now=change - 1.5, conditions=bad).status == 200


def test_hosts_without_validators_never_send_them_nor_a_304(ranked: ChangingWeb) -> None:
    hosts = {ranked.group(u) for u in ranked.urls()}
    without = [h for h in hosts if not ranked.validators(h)]
    assert 0.1 < len(without) / len(hosts) < 0.3
    web = SyntheticWeb(RANKED)
    url = a_page(ranked, validators=False, min_rate=1 / DAY)
    host, path = url.removeprefix("http://").split("/", 1)
    change = ranked.next_change(url, 0.0)
    for now in (change - 1, change + 1):
        conditions = {"if-none-match": "*", "if-modified-since": formatdate(EPOCH + now + 1e6)}
        r = web.respond(host, "/" + path, now=now, conditions=conditions)
        names = {name.lower() for name, _ in r.headers}
        assert r.status == 200 and not names & {"etag", "last-modified"}
    bodies = {web.respond(host, "/" + path, now=t).body for t in (change - 1, change + 1)}
    assert len(bodies) == 2  # the change is still in the body


def test_the_ordinary_web_changes_too_but_not_its_special_pages() -> None:
    web = SyntheticWeb(WebSpec(changing=True))
    changes = web.changes
    assert changes is not None
    urls = changes.urls()
    assert len(urls) >= 12 * 20 - 5 and "http://h020.synth.test/s1/p1.html" not in urls
    assert changes.page("http://h001.synth.test/s1/p1.html") is not None
    assert changes.page("http://h001.synth.test/robots.txt") is None
    assert changes.page("http://h008.synth.test/old/page.html") is None  # a redirect
    with pytest.raises(KeyError):
        changes.rate("http://h001.synth.test/robots.txt")
    robots = web.respond("h001.synth.test", "/robots.txt", now=30 * DAY)
    assert robots == SyntheticWeb(WebSpec()).respond("h001.synth.test", "/robots.txt")


def test_freshness_and_age_of_a_hand_made_history() -> None:
    # Changes at 10, 30, 50; copies taken at 0, 20, 60; window [0, 100]:
    # [0, 20): fresh until 10, then age 0..10 (area 50); [20, 60): fresh until 30, then
    # age 0..30 (area 450); [60, 100): fresh (no change after 50).
    one = page_freshness([10.0, 30.0, 50.0], [0.0, 20.0, 60.0], 0.0, 100.0)
    assert (one.fresh, one.age, one.missing, one.fetches, one.unchanged) == (60, 500, 0, 3, 0)
    # A window inside: [15, 40] holds [15, 20) stale with age 5..10 (37.5), [20, 30)
    # fresh, [30, 40] stale with age 0..10 (50).
    inner = page_freshness([10.0, 30.0, 50.0], [0.0, 20.0, 60.0], 15.0, 40.0)
    assert (inner.fresh, inner.age, inner.fetches) == (10, 87.5, 1)
    # No copy before the first fetch: missing; a second fetch of an unchanged page.
    late = page_freshness([], [8.0, 9.0], 5.0, 25.0)
    assert (late.fresh, late.age, late.missing, late.unchanged) == (17, 0, 3, 1)
    # A fetch at the window's start is compared with the one before it.
    edge = page_freshness([3.0], [1.0, 5.0, 7.0], 5.0, 10.0)
    assert (edge.fresh, edge.fetches, edge.unchanged) == (5, 2, 1)


def test_measured_freshness_matches_a_fine_sampling_of_the_truth(ranked: ChangingWeb) -> None:
    rng = random.Random(5)
    urls = [u for u in ranked.urls() if 1 / (2 * DAY) < ranked.rate(u) < 1 / 600][:20]
    start, end = DAY, 2 * DAY
    fetched = [(u, rng.uniform(0, end)) for u in urls for _ in range(rng.randint(1, 12))]
    result = measure_freshness(ranked, fetched, start, end, pages=urls)
    assert result.pages == len(urls)
    # Sampled: at each moment, a page's copy is its last fetch, fresh if no change since.
    steps = 2000
    fresh = held = age = 0.0
    for url in urls:
        mine = sorted(t for u, t in fetched if u == url)
        for k in range(steps):
            t = start + (k + 0.5) * (end - start) / steps
            taken = [f for f in mine if f <= t]
            if not taken:
                continue
            held += 1
            c = ranked.next_change(url, taken[-1])
            fresh += c > t
            age += max(0.0, t - c)
    assert result.freshness == pytest.approx(fresh / (steps * len(urls)), abs=0.01)
    assert result.age == pytest.approx(age / held, rel=0.02)
    assert result.missing == pytest.approx(1 - held / (steps * len(urls)), abs=0.01)


async def test_in_process_changes_follow_virtual_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    web = SyntheticWeb(RANKED)
    assert web.changes is not None
    url = a_page(web.changes, validators=True, min_rate=1 / DAY)
    server = in_process(web)
    async with httpx2.AsyncClient(transport=SynthTransport(server)) as client:
        first = await client.get(url)
        etag = first.headers["etag"]
        again = await client.get(url, headers={"If-None-Match": etag})
        assert (again.status_code, again.content) == (304, b"")
        assert "content-length" not in again.headers
        await trio.sleep(web.changes.next_change(url, trio.current_time()) - trio.current_time())
        changed = await client.get(url, headers={"If-None-Match": etag})
        assert changed.status_code == 200 and changed.headers["etag"] != etag
        assert changed.content != first.content
    statuses = [r.status for r in server.log]
    assert statuses == [200, 304, 200]
    # The log's fetches, measured: the copy was fresh until the change, then current.
    result = measure_freshness(web.changes, fetches(server.log), 0.0, trio.current_time() + 1)
    assert (result.pages, result.fetches, result.unchanged) == (1, 3, 1)
    assert result.freshness == 1.0 and result.age == 0.0


async def test_the_server_flag_serves_a_changing_web_on_its_own_clock() -> None:
    cmd = [sys.executable, "-m", "ubipy.synthweb", "--ranked", "--changing"]
    cmd += ["--hosts", "40", "--pages", "5"]
    proc = await trio.lowlevel.open_process(cmd, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    changes = changes_of(WebSpec(ranked=True, hosts=40, pages_per_host=5, changing=True))
    # A page that first changes between 1 minute and 10,000 s: on trio's own clock
    # (an origin 10,000 to 200,000 s back) it would have changed already.
    url = next(
        u
        for u in changes.urls()
        if 60 < changes.next_change(u, 0.0) < 10_000 and changes.validators(changes.group(u))
    )
    page = changes.page(url)
    assert page is not None
    try:
        with trio.fail_after(20):
            out = b""
            while b"seed " not in out:
                chunk = await proc.stdout.receive_some()
                assert chunk, out
                out += chunk
            proxy = out.split(b"proxy ", 1)[1].split(b"\n", 1)[0].decode()
            async with httpx2.AsyncClient(proxy=proxy, trust_env=False) as c:
                r = await c.get(url)
                assert b'<p id="version">version 0</p>' in r.content
                assert r.headers["etag"] == f'"{page.number}-0"'
                again = await c.get(url, headers={"If-None-Match": r.headers["etag"]})
                assert again.status_code == 304
            proc.send_signal(signal.SIGINT)
            assert await proc.wait() == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await proc.stdout.aclose()
