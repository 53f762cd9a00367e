"""robots.txt redirected to another host (hops.py), in the scheduler driven by hand with
explicit times: the hops to one host take turns with that host's delay, wait for its
own slot's request and hold its own slot back while one is in flight, hold no request
while they wait, and a redirect to the host itself (http to https) is no hop."""

from __future__ import annotations

import itertools

import pytest

from ubipy.fetch.politeness import Entry, Job, JobKind, Scheduler

ROBOTS_OK = b"User-agent: *\nAllow: /\n"
CENTRAL = "http://central.test/robots.txt"


def _sched(delay: float = 5.0) -> Scheduler:
    return Scheduler(
        delay=delay, window=64, loader=lambda host, after, limit: [], robots_retry_base=10.0
    )


def _add(s: Scheduler, host: str, n: int = 1, base: int = 0) -> None:
    for i in range(base, base + n):
        s.add(host, Entry(fp=hash((host, i)), seq=i + 1, url=f"http://{host}/p{i}", depth=1))


def _all(s: Scheduler, now: float) -> list[Job]:
    """Every job that may start at ``now``, as the crawler's dispatcher takes them."""
    jobs = []
    while (job := s.next_job(now)) is not None:
        jobs.append(job)
    return jobs


def _redirect(s: Scheduler, host: str, now: float, to: str = CENTRAL) -> None:
    assert s.robots_answer(host, now, status=301, location=to, body=b"") is None


def _ok(s: Scheduler, host: str, now: float, body: bytes = ROBOTS_OK) -> None:
    decision = s.robots_answer(host, now, status=200, location=None, body=body)
    assert decision is not None and not decision.temporary


def test_hops_to_one_host_go_one_at_a_time_with_its_delay() -> None:
    s = _sched(delay=5.0)
    hosts = [f"h{i}.test" for i in range(4)]
    for host in hosts:
        _add(s, host)
    first = _all(s, 0.0)
    assert sorted(j.host for j in first) == hosts  # their own robots.txt: all at once
    for host in hosts:
        _redirect(s, host, 0.1)
    # Each host's delay is over at 5.1: one hop to central.test, the others wait for it
    # without a request (nothing in flight for them, not armed).
    hop = _all(s, 5.1)
    assert [(j.kind, j.url) for j in hop] == [(JobKind.ROBOTS, CENTRAL)]
    assert s.in_flight == 1
    assert s.next_wakeup() is None  # the others wait for the hop's end, not in a loop
    assert _all(s, 100.0) == []
    starts = [5.1]
    now = 5.1
    while len(starts) < len(hosts):
        host = next(j.host for j in hop)
        now += 1.0  # central.test takes a second to answer
        _ok(s, host, now)
        wake = s.next_wakeup()
        assert wake == now + 5.0  # central.test's delay, then the next host's hop
        assert [j for j in _all(s, wake - 0.01) if j.url == CENTRAL] == []
        # The next hop, and the page of the host whose hop ended (its own delay over).
        jobs = _all(s, wake)
        hop = [j for j in jobs if j.url == CENTRAL]
        assert len(hop) == 1 and [j.host for j in jobs if j not in hop] == [host]
        starts.append(wake)
        now = wake
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert gaps == pytest.approx([6.0, 6.0, 6.0])


def test_a_waiting_hop_holds_back_no_other_host() -> None:
    s = _sched(delay=5.0)
    _add(s, "a.test")
    _add(s, "b.test")
    _all(s, 0.0)
    _redirect(s, "a.test", 0.0)
    _redirect(s, "b.test", 0.0)
    [hop] = _all(s, 5.0)
    _add(s, "c.test")
    _add(s, "a.test", 2, base=10)  # new links for a waiting host: it waits on
    jobs = _all(s, 5.0)
    assert [(j.host, j.url) for j in jobs] == [("c.test", "http://c.test/robots.txt")]
    other = "b.test" if hop.host == "a.test" else "a.test"
    _ok(s, hop.host, 6.0)
    assert [j for j in _all(s, 10.9) if j.url == CENTRAL] == []
    assert [(j.host, j.url) for j in _all(s, 11.0) if j.url == CENTRAL] == [(other, CENTRAL)]


def test_a_hop_and_the_targets_own_slot_never_overlap() -> None:
    s = _sched(delay=5.0)
    _add(s, "central.test", 3)
    _add(s, "a.test")
    jobs = _all(s, 0.0)
    assert {j.url for j in jobs} == {CENTRAL, "http://a.test/robots.txt"}
    # central.test says Crawl-delay 8: hops to it wait 8 s too.
    _ok(s, "central.test", 0.5, b"User-agent: *\nCrawl-delay: 8\n")
    _redirect(s, "a.test", 0.5)
    assert _all(s, 5.5) == []  # a.test's delay is over, central.test's is not
    assert s.next_wakeup() == 8.5
    jobs = _all(s, 8.5)
    assert len(jobs) == 1  # central.test's page or a.test's hop: one of them
    if jobs[0].host == "central.test":
        s.finished("central.test", 9.0)
        assert _all(s, 16.9) == []
        [hop] = _all(s, 17.0)
        assert (hop.host, hop.url) == ("a.test", CENTRAL)
        _ok(s, "a.test", 18.0)
        assert [j for j in _all(s, 25.9) if j.host == "central.test"] == []
        [page] = [j for j in _all(s, 26.0) if j.host == "central.test"]
        assert page.host == "central.test"
    else:
        assert (jobs[0].host, jobs[0].url) == ("a.test", CENTRAL)
        assert _all(s, 100.0) == []  # central.test's own slot waits for the hop
        _ok(s, "a.test", 9.0)
        assert _all(s, 16.9) == []
        [page] = _all(s, 17.0)
        assert page.host == "central.test" and page.kind is JobKind.PAGE


def test_the_targets_own_request_in_flight_holds_the_hop_until_it_ends() -> None:
    s = _sched(delay=2.0)
    _add(s, "central.test", 2)
    _add(s, "a.test")
    _all(s, 0.0)  # both robots.txt
    _redirect(s, "a.test", 0.0)
    # a.test's delay is over at 2.0; central.test's robots.txt is still in flight.
    assert _all(s, 2.0) == [] and s.next_wakeup() is None
    _ok(s, "central.test", 3.0)
    assert _all(s, 4.9) == []
    # central.test's page and a.test's hop are both due at 5.0: the hop has the turn.
    jobs = _all(s, 5.0)
    assert [(j.host, j.url) for j in jobs] == [("a.test", CENTRAL)]
    _ok(s, "a.test", 5.5)
    assert [j for j in _all(s, 7.4) if j.host == "central.test"] == []
    [page] = [j for j in _all(s, 7.5) if j.host == "central.test"]
    assert page.kind is JobKind.PAGE


def test_an_abandoned_hop_frees_its_target() -> None:
    s = _sched(delay=1.0)
    _add(s, "a.test")
    _add(s, "b.test")
    _all(s, 0.0)
    _redirect(s, "a.test", 0.0)
    _redirect(s, "b.test", 0.0)
    [hop] = _all(s, 1.0)
    s.abandoned(hop.host, None, 1.5)  # a pause: asked again later, from the start
    other = "b.test" if hop.host == "a.test" else "a.test"
    assert [(j.host, j.url) for j in _all(s, 2.5)] == [
        (other, CENTRAL),
        (hop.host, f"http://{hop.host}/robots.txt"),
    ]


def test_a_redirect_to_the_host_itself_is_no_hop() -> None:
    s = _sched(delay=1.0)
    _add(s, "a.test")
    _add(s, "b.test")
    _all(s, 0.0)
    _redirect(s, "a.test", 0.0, "https://a.test/robots.txt")
    _redirect(s, "b.test", 0.0, "https://b.test/robots.txt")
    jobs = _all(s, 1.0)  # each its own host's: both at once, as before
    assert sorted(j.url for j in jobs) == ["https://a.test/robots.txt", "https://b.test/robots.txt"]
    assert len(s._hops) == 0
