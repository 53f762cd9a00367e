"""Pages due again (--recrawl) in the politeness scheduler, driven by hand: a page is
asked again when it is due and never sooner than the host's delay allows, refreshes
take their share of requests while new URLs wait, and a new plan can bring a host
forward."""

from __future__ import annotations

import gc
import itertools

import pytest

from ubipy.config import CrawlOrder
from ubipy.fetch.politeness import Entry, Job, JobKind, Scheduler


def _new(n: int) -> Entry:
    return Entry(fp=n, seq=n, url=f"http://a.test/new{n}", depth=1)


def _old(n: int) -> Entry:
    return Entry(fp=1000 + n, seq=1000 + n, url=f"http://a.test/old{n}", depth=1, refresh=True)


def _ready(s: Scheduler) -> None:
    """a.test's robots.txt answered at 0 (allow all)."""
    s.add("a.test", _new(0))
    job = s.next_job(0.0)
    assert job is not None and job.kind is JobKind.ROBOTS
    s.robots_answer("a.test", 0.0, status=404, location=None, body=b"")
    job = s.next_job(1.0)
    assert job is not None and job.url == "http://a.test/new0"
    s.finished("a.test", 1.0)


def test_a_page_due_again_is_asked_when_due_not_before() -> None:
    s = Scheduler(delay=1.0, window=8, loader=lambda h, a, n: [])
    _ready(s)
    s.refreshes("a.test", [(50.0, _old(1)), (30.0, _old(2))])
    assert s.next_job(29.0) is None
    assert s.next_wakeup() == 30.0
    job = s.next_job(30.0)
    assert job is not None and job.kind is JobKind.PAGE
    assert job.entry is not None and job.entry.refresh and job.url == "http://a.test/old2"
    s.finished("a.test", 30.5)
    # Due at 50, asked at 50; never before the delay after the last request.
    s.refreshes("a.test", [(31.0, _old(1))])
    assert s.next_job(31.0) is None and s.next_wakeup() == 31.5
    job = s.next_job(31.5)
    assert job is not None and job.url == "http://a.test/old1"


def test_a_new_plan_brings_a_waiting_host_forward() -> None:
    s = Scheduler(delay=1.0, window=8, loader=lambda h, a, n: [])
    _ready(s)
    s.refreshes("a.test", [(1000.0, _old(1))])
    assert s.next_wakeup() == 1000.0
    s.refreshes("a.test", [(20.0, _old(1))])
    job = s.next_job(20.0)
    assert job is not None and job.url == "http://a.test/old1"
    # The old heap entry is stale: nothing more at 1000.
    s.finished("a.test", 20.0)
    assert s.next_job(1000.0) is None and s.idle()


def _kinds(s: Scheduler, now: float, n: int) -> tuple[list[bool], float]:
    """Whether each of a.test's next ``n`` requests, a second apart from ``now``, is a
    refresh; and the time after them."""
    kinds = []
    for _ in range(n):
        job = s.next_job(now)
        assert job is not None and job.entry is not None
        kinds.append(job.entry.refresh)
        s.finished("a.test", now)
        now += 1.0
    return kinds, now


def test_refreshes_take_their_share_while_new_urls_wait() -> None:
    s = Scheduler(delay=1.0, window=64, loader=lambda h, a, n: [], refresh_share=0.25)
    _ready(s)
    for n in range(1, 41):
        s.add("a.test", _new(n))
    s.refreshes("a.test", [(0.0, _old(n)) for n in range(40)])
    kinds, _ = _kinds(s, 2.0, 40)
    assert 8 <= sum(kinds) <= 12  # a quarter of 40
    # Refreshes do not count against the host's page budget.
    assert s.slot("a.test").pages == 1 + kinds.count(False)  # type: ignore[union-attr]


def test_a_host_waiting_to_be_chosen_is_not_handed_out_twice_when_brought_forward() -> None:
    """Under a ranked order, hosts whose time has come wait to be chosen by urgency.
    A new plan that brings one of them forward must not give it a second place in
    the line: it would be handed out again while its first request is in flight."""
    s = Scheduler(delay=1.0, window=8, loader=lambda h, a, n: [], order=CrawlOrder.OPIC)
    hosts = ("a.test", "b.test")
    for host in hosts:
        s.add(host, Entry(fp=hash(host), seq=1, url=f"http://{host}/", depth=1))
    for _ in hosts:
        job = s.next_job(0.0)
        assert job is not None and job.kind is JobKind.ROBOTS
        s.robots_answer(job.host, 0.0, status=404, location=None, body=b"")
    for _ in hosts:  # each host's one new URL
        job = s.next_job(1.0)
        assert job is not None and job.kind is JobKind.PAGE
        s.finished(job.host, 1.0)
    for host in hosts:
        old = Entry(fp=hash(host) + 1, seq=2, url=f"http://{host}/old", depth=1, refresh=True)
        s.refreshes(host, [(5.0, old)])
    # At 5 both hosts are due; one is handed out, the other waits to be chosen.
    first = s.next_job(5.0)
    assert first is not None
    waiting = next(h for h in hosts if h != first.host)
    # A new plan brings the waiting host's page forward (it is due at once).
    due = [
        (
            4.0,
            Entry(fp=hash(waiting) + n, seq=n, url=f"http://{waiting}/{n}", depth=1, refresh=True),
        )
        for n in (2, 3)
    ]
    s.refreshes(waiting, due)
    jobs = [j for j in iter(lambda: s.next_job(5.0), None)]
    assert [j.host for j in jobs] == [waiting]


def test_new_urls_for_a_host_waiting_for_a_page_due_again_go_at_its_delay() -> None:
    """A host with only pages due later waits in the heap for then; URLs admitted for
    it meanwhile are asked at the end of its delay, not when the old page is due."""
    s = Scheduler(delay=1.0, window=8, loader=lambda h, a, n: [])
    _ready(s)
    s.refreshes("a.test", [(1000.0, _old(1))])
    assert s.next_wakeup() == 1000.0
    s.add("a.test", _new(1))
    assert s.next_wakeup() == 2.0
    job = s.next_job(2.0)
    assert job is not None and job.url == "http://a.test/new1"
    s.finished("a.test", 2.0)
    assert s.next_job(999.0) is None
    job = s.next_job(1000.0)
    assert job is not None and job.url == "http://a.test/old1"
    s.finished("a.test", 1000.0)
    assert s.next_job(2000.0) is None and s.idle()


def test_a_held_host_given_urls_is_asked_once_released_and_once_at_a_time() -> None:
    s = Scheduler(delay=1.0, window=8, loader=lambda h, a, n: [])
    _ready(s)
    held = {"a.test"}
    s.hold(lambda host: host in held)
    s.refreshes("a.test", [(10.0, _old(1))])
    assert s.next_job(10.0) is None
    s.add("a.test", _new(1))
    s.add("a.test", _new(2))
    assert s.next_job(11.0) is None
    held.clear()
    s.release()
    # One request (the page due, or a new URL: the share decides), not one a place.
    assert len(list(iter(lambda: s.next_job(12.0), None))) == 1


def test_a_host_brought_forward_again_and_again_leaves_no_pile_of_entries() -> None:
    """New URLs, one at a time, for a host that waits for a page due in a day: each is
    asked at the host's delay, and at the day the page is asked once. Each bringing
    forward leaves the old entry stale for good: they do not pile up in the heap, and
    none comes back to life when the host is armed for that time again."""
    # robots.txt's answer outlives the day here: a refetch is not what this is about.
    s = Scheduler(
        delay=1.0,
        window=8,
        loader=lambda h, a, n: [],
        order=CrawlOrder.OPIC,
        robots_ttl=2 * 86_400.0,
    )
    _ready(s)
    s.refreshes("a.test", [(86_400.0, _old(1))])
    now = 2.0
    for n in range(1, 3001):
        s.add("a.test", _new(n))
        job = s.next_job(now)
        assert job is not None and job.url == f"http://a.test/new{n}"
        s.finished("a.test", now)
        now += 10.0
    assert s._due.places <= 2 * s.hosts + 1024  # stale entries are shed
    assert s.next_job(86_399.0) is None
    assert [j.url for j in iter(lambda: s.next_job(86_400.0), None)] == ["http://a.test/old1"]


def test_a_host_given_up_asks_none_of_its_pages_due_again() -> None:
    """Back from a restart under --recrawl, a host with only pages due again asks its
    robots.txt first; once that fails for good the host is given up, its pages due
    again with it (no page goes before its host's rules are known), and later plans
    for it are ignored: the crawl goes on, where the dispatcher used to die of an
    assertion."""
    s = Scheduler(
        delay=1.0, window=8, loader=lambda h, a, n: [], robots_retry_base=1.0, robots_max_attempts=2
    )
    s.refreshes("a.test", [(0.0, _old(1))])
    now = 0.0
    for _ in range(2):
        job = s.next_job(now)
        assert job is not None and job.kind is JobKind.ROBOTS
        s.robots_answer("a.test", now, status=503, location=None, body=b"")
        now = s.next_wakeup() or now
    assert s.next_job(now) is None and s.next_wakeup() is None
    s.refreshes("a.test", [(now, _old(2))])
    s.due_again("a.test", now, _old(3))
    assert s.next_job(now + 100) is None and s.next_wakeup() is None


@pytest.mark.parametrize("order", list(CrawlOrder))
def test_a_host_with_only_pages_due_again_gets_its_share_under_every_order(
    order: CrawlOrder,
) -> None:
    """Two hundred hosts with new URLs (each page finding one more), four requests at
    once, and old.test with five pages due at 0: under a ranked order old.test was
    ranked by its new URLs alone, none, and never chosen (found by a review)."""
    s = Scheduler(delay=1.0, window=64, loader=lambda h, a, n: [], order=order)
    fps = itertools.count(1)

    def add(host: str, score: float) -> None:
        n = next(fps)
        s.add(host, Entry(fp=n, seq=n, url=f"http://{host}/{n}", depth=1, score=score))

    for h in range(200):
        for _ in range(20):
            add(f"new{h}.test", 1.0)
    old = [(0.0, Entry(10**9 + i, 0, f"http://old.test/{i}", 1, refresh=True)) for i in range(5)]
    s.refreshes("old.test", old)
    now = 0.0
    running: list[tuple[float, Job]] = []
    refreshed: list[float] = []
    for _ in range(5_000):
        while len(running) < 4 and (job := s.next_job(now)) is not None:
            running.append((now + 0.05, job))
        if not running:
            wake = s.next_wakeup()
            assert wake is not None
            now = max(now, wake)
            continue
        running.sort(key=lambda r: r[0])
        end, job = running.pop(0)
        now = max(now, end)
        if job.kind is JobKind.ROBOTS:
            s.robots_answer(job.host, now, status=404, location=None, body=b"")
            continue
        s.finished(job.host, now)
        assert job.entry is not None
        if job.entry.refresh:
            refreshed.append(now)
        else:
            add(job.host, 0.5)
    # About as bfs serves them (5 s to the first, 2.5 s apart): not kept waiting.
    assert len(refreshed) == 5 and refreshed[-1] <= 20.0


@pytest.mark.parametrize("order", [CrawlOrder.BFS, CrawlOrder.OPIC])
def test_a_big_site_still_crawled_gets_its_share_beside_hosts_with_only_refreshes(
    order: CrawlOrder,
) -> None:
    """Late in a continuous crawl most hosts have only pages due again: counted with
    theirs, the refreshes were over their share for good, and big.test, still full of
    new URLs, got a new URL at every turn (1 refresh in 55; found by a review)."""
    s = Scheduler(
        delay=1.0, window=10_000, loader=lambda h, a, n: [], order=order, refresh_share=0.5
    )
    fps = itertools.count(1)
    hosts = ["big.test"] + [f"r{i}.test" for i in range(20)]
    for h in hosts:
        n = next(fps)
        s.add(h, Entry(fp=n, seq=n, url=f"http://{h}/", depth=1))
    for t in range(3):
        while (job := s.next_job(float(t))) is not None:
            if job.kind is JobKind.ROBOTS:
                s.robots_answer(job.host, float(t), status=404, location=None, body=b"")
            else:
                s.finished(job.host, float(t))
    for n in range(5_000):
        s.add("big.test", Entry(fp=next(fps), seq=n + 10, url=f"http://big.test/{n}", depth=1))
    for h in hosts:
        due = [(5.0, Entry(next(fps), 0, f"http://{h}/old{k}", 1, refresh=True)) for k in range(50)]
        s.refreshes(h, due)
    big = []
    for t in range(5, 60):
        while (job := s.next_job(float(t))) is not None:
            assert job.entry is not None
            if job.host == "big.test":
                big.append(job.entry.refresh)
            s.finished(job.host, float(t))
    assert len(big) == 55 and 25 <= sum(big) <= 30  # half of its turns


def test_refreshes_keep_their_share_after_hours_of_new_urls_alone() -> None:
    """The share holds over the recent requests: after 200 requests of new URLs alone,
    the refreshes took the next 100 turns (they were counted as owed since the start)."""
    s = Scheduler(delay=1.0, window=5_000, loader=lambda h, a, n: [], refresh_share=0.5)
    _ready(s)
    for n in range(1, 1_000):
        s.add("a.test", _new(n))
    kinds, now = _kinds(s, 2.0, 200)
    assert not any(kinds)
    s.refreshes("a.test", [(now, _old(n)) for n in range(150)])
    kinds, _ = _kinds(s, now, 100)
    assert sum(kinds) == 50
    assert all(a != b for a, b in itertools.pairwise(kinds))  # in turn


def test_pages_due_again_are_no_work_for_the_garbage_collectors_full_passes() -> None:
    """A peer refreshing a million pages keeps a million of them due here: held as
    objects the cyclic collector tracks, each full collection went through them all
    (0.5 s, bench/refresh_memory.py). Once a collection has seen them, none is tracked,
    and each comes out as the entry it went in as."""
    s = Scheduler(delay=1.0, window=8, loader=lambda h, a, n: [])
    _ready(s)
    due = [(float(n), _old(n)._replace(score=n / 7)) for n in range(50)]
    s.refreshes("a.test", due[:40])
    s.due_again("a.test", 45.0, due[45][1])
    gc.collect()
    slot = s.slot("a.test")
    assert slot is not None and len(slot.refresh) == 41
    assert not any(gc.is_tracked(item) for item in slot.refresh)
    assert slot.first_due() == due[0][1]
    popped = [slot.pop_due() for _ in range(41)]
    assert popped == [e for _, e in due[:40]] + [due[45][1]]
