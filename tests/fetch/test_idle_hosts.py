"""Hosts with nothing to ask are forgotten beyond a bound, and owe what they owed when
they come back (ubipy/fetch/idlehosts.py)."""

from __future__ import annotations

from collections.abc import Callable

from ubipy.fetch.idlehosts import FORGET_AFTER
from ubipy.fetch.politeness import Entry, JobKind, Scheduler
from ubipy.fetch.slots import Recall

ROBOTS = b"User-agent: *\nDisallow: /private/\n"


def _entry(host: str, i: int) -> Entry:
    return Entry(fp=i, seq=i, url=f"http://{host}/p{i}", depth=0)


def _sched(
    idle_hosts: int,
    recall: Recall | None = None,
    budget: int | None = None,
    resolve: Callable[[str], bool] | None = None,
) -> Scheduler:
    return Scheduler(
        delay=1.0,
        window=64,
        loader=lambda host, after, limit: [],
        idle_hosts=idle_hosts,
        recall=recall,
        max_pages_per_host=budget,
        resolve=resolve,
    )


def _crawl_host(s: Scheduler, host: str, i: int, now: float) -> float:
    """robots.txt then one page of ``host``, from ``now``; the time the page ended."""
    s.add(host, _entry(host, i))
    job = s.next_job(now)
    assert job is not None and job.kind is JobKind.ROBOTS and job.host == host
    s.robots_answer(host, now, status=200, location=None, body=ROBOTS)
    job = s.next_job(now + 1.0)
    assert job is not None and job.kind is JobKind.PAGE and job.host == host
    s.finished(host, now + 1.0)
    return now + 1.0


def test_idle_hosts_beyond_the_bound_are_forgotten_the_longest_idle_first() -> None:
    s = _sched(idle_hosts=2)
    now = 0.0
    for i, host in enumerate(["a.test", "b.test", "c.test", "d.test"]):
        now = _crawl_host(s, host, i, now + 2.0)
    # Four idle, but none a minute past its last request: all kept.
    assert s.hosts == 4 and s.idle_hosts.forgotten == 0
    now = _crawl_host(s, "e.test", 9, now + FORGET_AFTER)
    # Five idle now, and the three longest idle a minute past their last request: they
    # go, leaving two.
    assert s.idle_hosts.forgotten == 3
    assert [s.slot(h) is None for h in ("a.test", "b.test", "c.test")] == [True] * 3
    assert s.slot("d.test") is not None and s.slot("e.test") is not None
    assert s.hosts == 2


def test_hosts_with_something_to_ask_are_never_forgotten() -> None:
    s = _sched(idle_hosts=0)
    now = _crawl_host(s, "a.test", 1, 0.0)
    s.add("a.test", _entry("a.test", 2))  # work again: not idle
    s.due_again("b.test", 500.0, _entry("b.test", 3))  # a page due again: not idle
    job = s.next_job(now + 1.0)
    assert job is not None and job.url == "http://a.test/p2"
    # a.test in flight, b.test waiting for its page: the forgetting leaves both.
    _crawl_host(s, "c.test", 4, now + 2 * FORGET_AFTER)
    assert s.slot("a.test") is not None and s.slot("b.test") is not None
    assert s.slot("c.test") is not None  # its request just ended


def test_a_forgotten_host_owes_its_wait_and_budget_and_asks_robots_txt_again() -> None:
    owed: dict[str, tuple[float, int, int]] = {}
    s = _sched(idle_hosts=0, recall=owed.get, budget=2)
    end = _crawl_host(s, "a.test", 1, 0.0)
    # What the crawler's shard holds of a.test: its next request not before 500, one
    # page of its budget spent.
    owed["a.test"] = (500.0, 1, 0)
    _crawl_host(s, "b.test", 2, end + FORGET_AFTER)
    assert s.slot("a.test") is None
    for i in (3, 4):
        s.add("a.test", _entry("a.test", i))
    assert s.next_job(499.0) is None  # the wait recalled holds it
    job = s.next_job(500.0)
    assert job is not None and job.kind is JobKind.ROBOTS  # its rules were forgotten
    s.robots_answer("a.test", 500.0, status=200, location=None, body=ROBOTS)
    job = s.next_job(501.0)
    assert job is not None and job.kind is JobKind.PAGE and job.url == "http://a.test/p3"
    s.finished("a.test", 501.0)
    # The budget of 2 counts the page before it was forgotten: the next is skipped.
    job = s.next_job(502.0)
    assert job is not None and job.kind is JobKind.SKIP and job.reason == "host page budget"


def test_a_host_recalled_at_its_first_slot_waits_before_its_robots_txt() -> None:
    """A restart: every host's slot is new, and owes what the last run's mark says."""
    s = _sched(idle_hosts=10, recall={"a.test": (30.0, 0, 0)}.get)
    s.add("a.test", _entry("a.test", 1))
    s.add("b.test", _entry("b.test", 2))
    job = s.next_job(0.0)
    assert job is not None and job.host == "b.test"
    assert s.next_job(29.0) is None
    job = s.next_job(30.0)
    assert job is not None and job.host == "a.test" and job.kind is JobKind.ROBOTS


def test_hosts_given_up_or_left_with_nothing_are_forgotten_too() -> None:
    """A name that does not resolve, and a host whose URLs were all closed before its
    robots.txt was asked (a restart's refilter): idle, so forgotten like the rest."""
    s = _sched(idle_hosts=0, resolve=lambda host: host == "dead.test")
    s.add("dead.test", _entry("dead.test", 1))
    job = s.next_job(0.0)
    assert job is not None and job.kind is JobKind.RESOLVE
    assert s.lookup_failed("dead.test", 0.0, final=True)
    s.restore("gone.test", 1)  # on disk, says the shard; the loader finds none
    assert s.next_job(0.0) is None
    _crawl_host(s, "a.test", 2, 2 * FORGET_AFTER)
    assert s.slot("dead.test") is None and s.slot("gone.test") is None


def test_a_host_owing_a_long_wait_does_not_hold_up_the_forgetting() -> None:
    s = _sched(idle_hosts=0)
    _crawl_host(s, "slow.test", 1, 0.0)
    s.add("slow.test", _entry("slow.test", 2))
    job = s.next_job(2.0)
    assert job is not None and job.host == "slow.test"
    s.finished("slow.test", 2.0, asked=3600.0)  # its last answer: Retry-After an hour
    now = 2.0
    for i in range(20):
        now = _crawl_host(s, f"h{i}.test", 10 + i, now + 2.0)
    _crawl_host(s, "last.test", 99, now + 2 * FORGET_AFTER)
    assert s.idle_hosts.forgotten >= 20 and s.slot("slow.test") is not None


def test_a_robots_txt_redirect_to_a_host_not_in_memory_waits_what_that_host_owes() -> None:
    """sub.test's robots.txt is redirected to www.test, which a restart (or the
    forgetting) left without a slot: the hop waits the wait www.test's mark owes."""
    s = _sched(idle_hosts=10, recall={"www.test": (30.0, 0, 0)}.get)
    s.add("sub.test", _entry("sub.test", 1))
    job = s.next_job(0.0)
    assert job is not None and job.kind is JobKind.ROBOTS
    s.robots_answer("sub.test", 0.0, status=301, location="http://www.test/robots.txt", body=b"")
    assert s.next_job(29.0) is None
    job = s.next_job(30.0)
    assert job is not None and job.url == "http://www.test/robots.txt"
