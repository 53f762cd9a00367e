"""The politeness scheduler, driven by hand with explicit times."""

from __future__ import annotations

import pytest

from ubipy.fetch import SITEMAP_DEPTH
from ubipy.fetch.politeness import Entry, HostRobots, Job, JobKind, Scheduler

ROBOTS_OK = b"User-agent: *\nDisallow: /private/\n"


def _entries(host: str, n: int, start: int = 1) -> list[Entry]:
    return [
        Entry(fp=start + i, seq=start + i, url=f"http://{host}/p{i}", depth=0) for i in range(n)
    ]


def _sched(
    delay: float = 1.0, window: int = 64, disk: dict[str, list[Entry]] | None = None
) -> Scheduler:
    store = disk or {}

    def loader(host: str, after: int, limit: int) -> list[Entry]:
        return [e for e in store.get(host, []) if e.seq > after][:limit]

    return Scheduler(delay=delay, window=window, loader=loader, robots_retry_base=10.0)


def _resolve_robots(s: Scheduler, host: str, now: float, body: bytes = ROBOTS_OK) -> None:
    job = s.next_job(now)
    assert job is not None and job.kind is JobKind.ROBOTS
    assert job.url == f"http://{host}/robots.txt"
    s.robots_answer(host, now, status=200, location=None, body=body)


def test_robots_first_then_pages_one_at_a_time_with_the_delay() -> None:
    s = _sched(delay=1.0)
    for e in _entries("a.test", 3):
        s.add("a.test", e)
    _resolve_robots(s, "a.test", 0.0)
    assert s.next_job(0.5) is None  # robots.txt was a request: the delay applies
    assert s.next_wakeup() == 1.0
    job = s.next_job(1.0)
    assert job is not None and job.url == "http://a.test/p0"
    # In flight: nothing else for this host, however late it is.
    assert s.next_job(100.0) is None
    s.finished("a.test", 1.2)
    assert s.next_job(2.1) is None
    job = s.next_job(2.2)
    assert job is not None and job.url == "http://a.test/p1"


def test_hosts_do_not_wait_for_each_other() -> None:
    s = _sched(delay=5.0)
    s.add("a.test", _entries("a.test", 1)[0])
    s.add("b.test", _entries("b.test", 1, start=10)[0])
    first = s.next_job(0.0)
    second = s.next_job(0.0)
    assert first is not None and second is not None
    assert {first.host, second.host} == {"a.test", "b.test"}
    assert s.in_flight == 2


def test_disallowed_urls_are_closed_without_a_request() -> None:
    s = _sched(delay=1.0)
    s.add("a.test", Entry(1, 1, "http://a.test/private/x", 0))
    s.add("a.test", Entry(2, 2, "http://a.test/public", 0))
    _resolve_robots(s, "a.test", 0.0)
    job = s.next_job(1.0)
    assert job is not None and job.kind is JobKind.SKIP
    job = s.next_job(1.0)
    assert job is not None and job.kind is JobKind.PAGE and job.url == "http://a.test/public"


def test_crawl_delay_raises_the_hosts_delay() -> None:
    s = _sched(delay=0.5)
    for e in _entries("a.test", 2):
        s.add("a.test", e)
    _resolve_robots(s, "a.test", 0.0, b"User-agent: *\nCrawl-delay: 3\n")
    assert s.next_job(2.9) is None
    assert s.next_job(3.0) is not None


@pytest.mark.parametrize("asked", [b"1e300", b"inf", b"1e400"])
def test_the_slowest_crawl_delay_asked_for_is_capped_not_ignored(asked: bytes) -> None:
    s = _sched(delay=0.5)
    for e in _entries("a.test", 2):
        s.add("a.test", e)
    _resolve_robots(s, "a.test", 0.0, b"User-agent: *\nCrawl-delay: " + asked + b"\n")
    assert s.next_wakeup() == 60.0  # max_crawl_delay, not the default delay


def test_robots_redirect_hops_are_requests_through_the_slot() -> None:
    s = _sched(delay=1.0)
    s.add("a.test", _entries("a.test", 1)[0])
    job = s.next_job(0.0)
    assert job is not None
    assert s.robots_answer("a.test", 0.0, status=301, location="/r.txt", body=b"") is None
    assert s.next_job(0.5) is None
    hop = s.next_job(1.0)
    assert hop is not None and hop.kind is JobKind.ROBOTS and hop.url == "http://a.test/r.txt"


def test_unreachable_robots_blocks_the_host_then_gives_up() -> None:
    s = _sched(delay=1.0)
    s.add("a.test", _entries("a.test", 1)[0])
    times = []
    now = 0.0
    for _ in range(3):
        wake = s.next_wakeup()
        assert wake is not None
        now = max(now, wake)
        job = s.next_job(now)
        assert job is not None and job.kind is JobKind.ROBOTS
        times.append(now)
        decision = s.robots_answer("a.test", now, status=503, location=None, body=b"")
        assert decision is not None and decision.temporary
    assert times[1] - times[0] >= 10.0  # back-off, not the plain delay
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is HostRobots.GIVEN_UP
    assert s.idle()
    assert s.add("a.test", Entry(99, 99, "http://a.test/late", 0)) is False


@pytest.mark.parametrize(
    ("asked", "times"), [(600.0, [0.0, 600.0, 1200.0]), (5.0, [0.0, 10.0, 30.0])]
)
def test_a_robots_txt_retry_after_is_waited_out_before_the_host_is_given_up(
    asked: float, times: list[float]
) -> None:
    s = _sched(delay=1.0)  # robots.txt retried after 10 s, then 20 s; 3 attempts
    s.add("a.test", _entries("a.test", 1)[0])
    asked_at = []
    while (wake := s.next_wakeup()) is not None:
        job = s.next_job(wake)
        assert job is not None and job.kind is JobKind.ROBOTS
        asked_at.append(wake)
        s.robots_answer("a.test", wake, status=429, location=None, body=b"", asked=asked)
    # Before: 0, 10 and 30 s whatever the server asked, the host given up at 30 s.
    # A shorter Retry-After does not cut the back-off.
    assert asked_at == times
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is HostRobots.GIVEN_UP


def test_a_window_refills_from_disk_in_admission_order() -> None:
    entries = _entries("a.test", 10)
    s = _sched(delay=0.0, window=3, disk={"a.test": entries})
    for e in entries:
        s.add("a.test", e)
    slot = s.slot("a.test")
    assert slot is not None and len(slot.queue) == 3 and slot.on_disk == 7
    _resolve_robots(s, "a.test", 0.0)
    got: list[str] = []
    now = 0.0
    while (job := s.next_job(now)) is not None:
        got.append(job.url)
        s.finished(job.host, now)
        now += 0.001
    assert got == [e.url for e in entries]
    assert s.idle()


def test_restored_hosts_load_from_disk() -> None:
    entries = _entries("a.test", 2)
    s = _sched(delay=0.0, disk={"a.test": entries})
    s.restore("a.test", 2)
    _resolve_robots(s, "a.test", 0.0)
    job = s.next_job(0.0)
    assert isinstance(job, Job) and job.url == "http://a.test/p0"


def test_a_retried_entry_goes_first_after_its_wait_and_keeps_the_budget() -> None:
    s = Scheduler(delay=1.0, window=8, loader=lambda h, a, n: [], max_pages_per_host=2)
    for e in _entries("a.test", 3):
        s.add("a.test", e)
    _resolve_robots(s, "a.test", 0.0)
    job = s.next_job(1.0)
    assert job is not None and job.entry is not None and job.url == "http://a.test/p0"
    s.retry("a.test", job.entry, 1.5, wait=10.0)
    assert s.next_job(11.4) is None  # the host waits the back-off, not just its delay
    again = s.next_job(11.5)
    assert again is not None and again.url == "http://a.test/p0"
    assert again.entry is not None and again.entry.attempt == 1
    s.finished("a.test", 11.6)
    second = s.next_job(12.6)
    assert second is not None and second.kind is JobKind.PAGE and second.url.endswith("/p1")
    s.finished("a.test", 12.7)
    # The budget of 2 pages is spent (a retry is not a new page): the rest is skipped.
    over = s.next_job(20.0)
    assert over is not None and over.kind is JobKind.SKIP and over.reason == "host page budget"


def test_a_sitemap_spends_none_of_the_host_page_budget() -> None:
    s = Scheduler(delay=0.0, window=8, loader=lambda h, a, n: [], max_pages_per_host=2)
    s.add("a.test", Entry(fp=99, seq=0, url="http://a.test/sitemap.xml", depth=SITEMAP_DEPTH))
    for e in _entries("a.test", 3):
        s.add("a.test", e)
    _resolve_robots(s, "a.test", 0.0)
    asked = []
    for t in range(1, 5):
        job = s.next_job(float(t))
        assert job is not None
        asked.append((job.kind, job.url.rsplit("/", 1)[1]))
        s.finished("a.test", t + 0.1)
    # The sitemap and 2 pages asked; the budget's end closes the third page.
    assert asked == [
        (JobKind.SITEMAP, "sitemap.xml"),
        (JobKind.PAGE, "p0"),
        (JobKind.PAGE, "p1"),
        (JobKind.SKIP, "p2"),
    ]


def test_a_server_asking_for_quiet_holds_the_host() -> None:
    s = _sched(delay=1.0)
    for e in _entries("a.test", 2):
        s.add("a.test", e)
    _resolve_robots(s, "a.test", 0.0)
    assert s.next_job(1.0) is not None
    s.finished("a.test", 1.0, wait=30.0)
    assert s.next_job(30.9) is None
    assert s.next_job(31.0) is not None


def test_restored_hosts_keep_their_budget_and_their_quiet() -> None:
    s = Scheduler(delay=1.0, window=8, loader=lambda h, a, n: [], max_pages_per_host=1)
    s.restore_host("a.test", not_before=5.0, pages=1)
    s.add("a.test", _entries("a.test", 1)[0])
    assert s.next_job(4.9) is None
    _resolve_robots(s, "a.test", 5.0)
    job = s.next_job(6.0)
    assert job is not None and job.kind is JobKind.SKIP


def test_quiet_learnt_after_a_host_is_queued_still_holds_it() -> None:
    # A host taken over from another peer is queued first and told its quiet after.
    s = _sched(delay=1.0, disk={"a.test": _entries("a.test", 2)})
    s.restore("a.test", 2)
    s.restore_host("a.test", not_before=30.0, pages=0)
    assert s.next_job(29.9) is None
    assert s.next_wakeup() == 30.0
    job = s.next_job(30.0)
    assert job is not None and job.kind is JobKind.ROBOTS


def test_memory_is_bounded_over_all_hosts_and_every_entry_still_goes_out() -> None:
    disk = {h: _entries(h, 5, start=100 * i + 1) for i, h in enumerate(("a.test", "b.test"))}
    s = Scheduler(
        delay=0.0,
        window=4,
        max_in_memory=3,
        loader=lambda h, after, n: [e for e in disk[h] if e.seq > after][:n],
    )
    for h, entries in disk.items():
        for e in entries:
            s.add(h, e)
    assert s.in_memory == 3  # the rest waits on disk
    for h in disk:
        _resolve_robots(s, h, 0.0)
    got: list[str] = []
    now = 1.0
    while (job := s.next_job(now)) is not None or not s.idle():
        if job is None:
            now += 1.0
            continue
        got.append(job.url)
        assert s.in_memory <= 3 + 1  # one entry a host beyond the budget, to keep moving
        s.finished(job.host, now)
    assert sorted(got) == sorted(e.url for es in disk.values() for e in es)
    for h, es in disk.items():
        assert [u for u in got if h in u] == [e.url for e in es]  # each host in order


def test_a_request_abandoned_before_it_was_made_does_not_spend_the_host_budget() -> None:
    """A stop or a pause gives the URL back (asked again later, as if never asked): a
    host with a budget of one page still gets that page asked."""
    s = Scheduler(
        delay=1.0,
        window=8,
        loader=lambda h, a, n: [],
        robots_retry_base=10.0,
        max_pages_per_host=1,
    )
    for e in _entries("a.test", 2):
        s.add("a.test", e)
    _resolve_robots(s, "a.test", 0.0)
    job = s.next_job(1.0)
    assert job is not None and job.kind is JobKind.PAGE and job.url == "http://a.test/p0"
    s.abandoned("a.test", job.entry, 1.0)
    again = s.next_job(2.0)
    assert again is not None and again.kind is JobKind.PAGE and again.url == job.url
    s.finished("a.test", 2.0)
    over = s.next_job(3.0)  # the budget is spent now: the second page is skipped
    assert over is not None and over.kind is JobKind.SKIP and over.reason == "host page budget"
