"""The scheduler's delay listens to the server: times passed in by hand."""

from __future__ import annotations

from ubipy.fetch.politeness import Entry, JobKind, Scheduler
from ubipy.fetch.throttle import SLOWEST_REFRESH, ThrottleRules

CENTRAL = "http://central.test/robots.txt"

RULES = ThrottleRules(delay_factor=2.0, max_delay=30.0, backoff_base=1.0)


def _sched(delay: float = 0.1, throttle: ThrottleRules | None = RULES) -> Scheduler:
    return Scheduler(delay=delay, window=64, loader=lambda h, a, n: [], throttle=throttle)


def _ready(s: Scheduler, host: str, pages: int, now: float = 0.0, robots: bytes = b"") -> None:
    for i in range(pages):
        s.add(host, Entry(fp=hash((host, i)), seq=i + 1, url=f"http://{host}/p{i}", depth=0))
    job = s.next_job(now)
    assert job is not None and job.kind is JobKind.ROBOTS
    s.robots_answer(host, now, status=200, location=None, body=robots or b"User-agent: *\n")


def _page(s: Scheduler, now: float) -> Entry:
    job = s.next_job(now)
    assert job is not None and job.kind is JobKind.PAGE and job.entry is not None, (now, job)
    return job.entry


def _gaps(s: Scheduler, host: str, latency: float, pages: int) -> list[float]:
    """Fetch ``pages`` pages of ``host``, each answering after ``latency``; the gaps
    between the end of one and the start of the next."""
    gaps = []
    now = s.next_wakeup() or 0.0
    for _ in range(pages):
        _page(s, now)
        now += latency
        s.heard(host, latency, 200)
        s.finished(host, now)
        wake = s.next_wakeup()
        assert wake is not None
        gaps.append(round(wake - now, 9))
        now = wake
    return gaps


def test_a_slow_host_waits_longer_than_a_fast_one() -> None:
    s, other = _sched(delay=0.1), _sched(delay=0.1)
    _ready(other, "fast.test", 6)
    fast = _gaps(other, "fast.test", 0.005, 5)
    _ready(s, "slow.test", 6)
    slow = _gaps(s, "slow.test", 0.4, 5)
    assert fast == [0.1] * 5  # --delay, the minimum
    assert slow == [0.8] * 5  # 2 × 0.4 s
    slot = s.slot("slow.test")
    assert slot is not None and slot.delay == 0.1  # the floor itself is unchanged


def test_without_rules_the_delay_is_fixed() -> None:
    s = _sched(delay=0.1, throttle=None)
    _ready(s, "slow.test", 4)
    assert _gaps(s, "slow.test", 0.4, 3) == [0.1] * 3
    assert s.slowest(5) == []


def test_crawl_delay_is_still_obeyed_the_larger_wins() -> None:
    s = _sched(delay=0.1)
    _ready(s, "a.test", 6, robots=b"User-agent: *\nCrawl-delay: 2\n")
    assert _gaps(s, "a.test", 0.3, 2) == [2.0, 2.0]  # Crawl-delay over 2 × 0.3
    assert _gaps(s, "a.test", 1.5, 3)[-1] > 2.0  # the pace over Crawl-delay


def test_retry_after_is_still_obeyed_the_larger_wins() -> None:
    s = _sched(delay=0.1)
    _ready(s, "a.test", 3)
    _gaps(s, "a.test", 1.0, 1)  # delay now 2 s
    entry = _page(s, 10.0)
    s.heard("a.test", 1.0, 503, asked=5.0)
    s.retry("a.test", entry, 11.0, wait=5.0)
    assert s.next_wakeup() == 16.0  # Retry-After: 5 over 2
    entry = _page(s, 16.0)
    s.heard("a.test", 1.0, 429, asked=0.5)
    s.retry("a.test", entry, 17.0, wait=0.5)
    assert s.next_wakeup() == 19.0  # its pace: 2 over Retry-After 0.5


def test_503_without_retry_after_backs_off_then_recovers() -> None:
    s = _sched(delay=0.1)
    _ready(s, "down.test", 4)
    now, gaps = 1.0, []
    for _ in range(6):
        entry = _page(s, now)
        s.heard("down.test", 0.01, 503)
        # The crawler's own retry wait (retry_delay) may be shorter: the host's wins.
        s.retry("down.test", entry, now, wait=0.0)
        wake = s.next_wakeup()
        assert wake is not None
        gaps.append(wake - now)
        now = wake
    assert gaps == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
    slowest = s.slowest(1)
    assert slowest[0].host == "down.test" and slowest[0].strikes == 6
    _page(s, now)
    s.heard("down.test", 0.01, 200)
    s.finished("down.test", now)
    assert s.next_wakeup() == now + 0.1  # recovered: back to --delay at once


def test_slowest_hosts_longest_delay_first() -> None:
    s = _sched(delay=0.1)
    for host, latency in (("a.test", 0.01), ("b.test", 0.9), ("c.test", 0.3)):
        _ready(s, host, 2, now=0.0)
        s.heard(host, latency, 200)
    ranked = s.slowest(2)
    assert [h.host for h in ranked] == ["b.test", "c.test"]
    assert ranked[0].latency == 0.9 and round(ranked[0].delay, 6) == 1.8
    assert ranked[1].strikes == 0
    assert [h.host for h in s.slowest(10)] == ["b.test", "c.test", "a.test"]


def test_a_host_held_by_a_retry_after_is_among_the_slowest_with_its_time_left() -> None:
    """A Retry-After of 10 minutes was obeyed and said nowhere: the host showed "waits
    50 ms", with the crawl seemingly stuck (QA)."""
    s = _sched(delay=0.05)
    for host in ("held.test", "fast.test"):
        _ready(s, host, 2)
    _page(s, 1.0)
    s.heard("held.test", 0.002, 429, asked=600.0)
    s.finished("held.test", 1.0, asked=600.0)
    [held] = [h for h in s.slowest(5, now=61.0) if h.host == "held.test"]
    assert (held.latency, held.delay, held.strikes) == (0.002, 540.0, 0)
    assert s.slowest(1, now=61.0 + SLOWEST_REFRESH)[0].host == "held.test"
    # Not heard from in this run (a restart), it is left out: so are the many held
    # for want of their name or robots.txt, which would fill the list.
    s = _sched(delay=0.05)
    s.restore_host("held.test", not_before=300.0, pages=1)
    assert s.slowest(5, now=100.0) == []


def test_a_host_whose_robots_txt_failed_is_among_the_slowest_saying_so() -> None:
    """Its pages wait for its robots.txt, tried again after a back-off: the wait was said
    nowhere until the host was given up, minutes later (QA)."""
    s = _sched(delay=0.05)
    _ready(s, "fast.test", 2)
    s.heard("fast.test", 0.002, 200)
    for host in ("down.test", "busy.test"):
        s.add(host, Entry(fp=hash(host), seq=1, url=f"http://{host}/", depth=0))
        job = s.next_job(1.0)
        assert job is not None and job.kind is JobKind.ROBOTS
    s.robots_answer("down.test", 1.0, status=None, location=None, body=b"")  # refused
    s.heard("busy.test", 0.003, 503)
    s.robots_answer("busy.test", 1.0, status=503, location=None, body=b"")
    busy, down, fast = s.slowest(5, now=2.0)
    assert (down.host, down.latency, down.delay, down.robots_tries) == ("down.test", -1, 29, 1)
    assert (busy.host, busy.robots_tries, busy.strikes) == ("busy.test", 1, 1)
    assert fast.robots_tries == 0
    # Rules come: its pages go on, and it is no longer said to wait for them.
    jobs = [s.next_job(40.0) for _ in range(3)]
    assert any(j and j.kind is JobKind.ROBOTS and j.host == "busy.test" for j in jobs)
    s.robots_answer("busy.test", 40.0, status=200, location=None, body=b"User-agent: *\n")
    tries = {h.host: h.robots_tries for h in s.slowest(5)}
    assert tries == {"down.test": 1, "busy.test": 0, "fast.test": 0}


def test_a_status_every_second_walks_the_hosts_once_in_ten_seconds() -> None:
    s = _sched(delay=0.1)
    _ready(s, "a.test", 2)
    s.heard("a.test", 0.5, 200)
    assert [h.host for h in s.slowest(5, now=100.0)] == ["a.test"]
    _ready(s, "b.test", 2)
    s.heard("b.test", 0.9, 200)
    # Within SLOWEST_REFRESH of the walk, the walk's answer; after it, a new walk.
    assert [h.host for h in s.slowest(5, now=100.0 + SLOWEST_REFRESH - 0.5)] == ["a.test"]
    assert [h.host for h in s.slowest(5, now=100.0 + SLOWEST_REFRESH)] == ["b.test", "a.test"]
    # Asked for another number, or without a time (a test, a one-off): walked now.
    _ready(s, "c.test", 2)
    s.heard("c.test", 2.0, 200)
    assert [h.host for h in s.slowest(1, now=100.0 + SLOWEST_REFRESH)] == ["c.test"]
    assert len(s.slowest(5)) == 3


def test_a_host_handed_away_forgets_its_pace() -> None:
    s = _sched(delay=0.1)
    _ready(s, "a.test", 1)
    s.heard("a.test", 2.0, 200)
    assert s.drop_host("a.test")
    s.heard("a.test", 2.0, 200)  # a late answer for a host no longer here: ignored
    assert s.slowest(5) == []


def test_a_503_to_a_redirected_robots_txt_slows_the_host_that_said_it() -> None:
    """a.test's robots.txt is redirected to central.test's, which answers 503: it is
    central.test that asked to be left alone, so its own next page waits its back-off
    (1 s), not its delay (0.1 s), and a.test's pace is untouched."""
    s = _sched(delay=0.1)
    _ready(s, "central.test", 1)
    _page(s, 0.1)
    s.heard("central.test", 0.01, 200)
    s.finished("central.test", 0.1)
    s.add("a.test", Entry(fp=1, seq=1, url="http://a.test/p", depth=0))
    job = s.next_job(0.1)
    assert job is not None and job.kind is JobKind.ROBOTS and job.host == "a.test"
    assert s.robots_answer("a.test", 0.1, status=301, location=CENTRAL, body=b"") is None
    hop = s.next_job(0.2)  # a.test's delay over: its robots.txt asked of central.test
    assert hop is not None and hop.host == "a.test" and hop.url == CENTRAL
    # As the crawler hears a robots.txt's answer: through the slot that asked it.
    s.heard("a.test", 0.1, 503)
    s.robots_answer("a.test", 0.3, status=503, location=None, body=b"")
    central, a = s.slot("central.test"), s.slot("a.test")
    assert central is not None and central.pace is not None and central.pace.strikes == 1
    assert a is not None and (a.pace is None or a.pace.strikes == 0)
    s.add("central.test", Entry(fp=2, seq=2, url="http://central.test/p1", depth=0))
    assert s.next_job(1.29) is None
    page = s.next_job(1.3)
    assert page is not None and page.url == "http://central.test/p1", page
