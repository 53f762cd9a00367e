"""robots.txt answers age (RFC 9309 §2.4: not used for more than a day, unless
unreachable): past the TTL a host's next request asks robots.txt again first, through
the same slot, and the answer replaces the rules; a refetch that fails keeps the old
rules and is tried again after the back-off, and the host is never given up for it.
The politeness scheduler driven by hand with explicit times."""

from __future__ import annotations

import itertools

import pytest

from ubipy.config import PolitenessConfig
from ubipy.errors import ConfigError
from ubipy.fetch.politeness import Entry, HostRobots, JobKind, Scheduler

TTL = 100.0
OLD = b"User-agent: *\nDisallow: /private/\nCrawl-delay: 3\n"
NEW = b"User-agent: *\nDisallow: /\nCrawl-delay: 7\n"
_SEQ = itertools.count(1)


def _sched() -> Scheduler:
    return Scheduler(
        delay=1.0,
        window=64,
        loader=lambda host, after, limit: [],
        robots_retry_base=10.0,
        robots_max_attempts=2,
        robots_ttl=TTL,
    )


def _add(s: Scheduler, *paths: str) -> None:
    for path in paths:
        n = next(_SEQ)
        s.add("a.test", Entry(fp=n, seq=n, url=f"http://a.test{path}", depth=1))


def _known(s: Scheduler, now: float = 0.0) -> None:
    """a.test's robots.txt answered OLD at ``now``."""
    job = s.next_job(now)
    assert job is not None and job.kind is JobKind.ROBOTS
    assert job.url == "http://a.test/robots.txt"
    s.robots_answer("a.test", now, status=200, location=None, body=OLD)


def _page(s: Scheduler, now: float, path: str) -> None:
    job = s.next_job(now)
    assert job is not None and job.kind is JobKind.PAGE and job.url == f"http://a.test{path}"
    s.finished("a.test", now)


def test_the_option_has_a_days_default_and_must_be_positive() -> None:
    assert PolitenessConfig().robots_ttl == 86_400.0
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ConfigError, match="robots_ttl"):
            PolitenessConfig(robots_ttl=bad)


def test_past_the_ttl_the_next_request_asks_robots_txt_again_and_its_rules_apply() -> None:
    s = _sched()
    _add(s, "/a", "/b", "/c", "/d")
    _known(s)
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_at == 0.0 and s.delay_of(slot) == 3.0
    _page(s, 3.0, "/a")
    # Not yet old: the rules stand, whatever is waiting.
    _page(s, 99.0, "/b")
    # Old now: robots.txt first, and only after the host's delay (3 s after /b).
    assert s.next_job(101.0) is None and s.next_wakeup() == 102.0
    job = s.next_job(102.0)
    assert job is not None and job.kind is JobKind.ROBOTS
    assert job.url == "http://a.test/robots.txt"
    # One request in flight per host: the refetch is one.
    assert s.next_job(500.0) is None
    s.robots_answer("a.test", 103.0, status=200, location=None, body=NEW)
    assert slot.robots_at == 103.0 and slot.robots_state is HostRobots.KNOWN
    # Its Crawl-delay applies, and its rules: the pages left are closed, not asked.
    assert s.delay_of(slot) == 7.0
    assert s.next_job(109.0) is None and s.next_wakeup() == 110.0
    skipped = [s.next_job(110.0), s.next_job(110.0)]
    assert all(j is not None and j.kind is JobKind.SKIP and j.reason == "robots" for j in skipped)
    assert s.next_job(110.0) is None and s.idle()


def _refetch_due(*paths: str) -> Scheduler:
    """A host with ``paths`` whose robots.txt, fetched at 0, is past its TTL at 100 s,
    after /a was fetched at 3 s: its refetch is the next job."""
    s = _sched()
    _add(s, *paths)
    _known(s)
    _page(s, 3.0, "/a")
    job = s.next_job(100.0)
    assert job is not None and job.kind is JobKind.ROBOTS
    return s


def test_a_refetch_answered_without_crawl_delay_drops_the_old_one() -> None:
    s = _refetch_due("/a", "/b")
    s.robots_answer("a.test", 100.0, status=404, location=None, body=b"")  # allow all
    slot = s.slot("a.test")
    assert slot is not None and s.delay_of(slot) == 1.0
    _page(s, 101.0, "/b")


def test_a_failed_refetch_keeps_the_old_rules_and_is_tried_again_after_the_back_off() -> None:
    s = _refetch_due("/a", "/b", "/private/x", "/c", "/d", "/e", "/f", "/g")
    decision = s.robots_answer("a.test", 100.0, status=503, location=None, body=b"")
    assert decision is not None and decision.temporary
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is HostRobots.KNOWN
    # The old rules stand (not "disallow all", as for a host never answered), at the
    # old delay: its pages go on, what the old rules forbid is still closed.
    assert s.delay_of(slot) == 3.0
    _page(s, 103.0, "/b")
    job = s.next_job(106.0)
    assert job is not None and job.kind is JobKind.SKIP and job.url == "http://a.test/private/x"
    _page(s, 106.0, "/c")
    # The back-off's time (10 s after the failure): robots.txt again first.
    job = s.next_job(110.0)
    assert job is not None and job.kind is JobKind.ROBOTS
    # A network error, the last of robots_max_attempts: a host with rules is not
    # given up for it, and the back-off doubles.
    s.robots_answer("a.test", 110.0, status=None, location=None, body=b"")
    assert slot.robots_state is HostRobots.KNOWN and slot.robots_at == 0.0
    _page(s, 113.0, "/d")
    _page(s, 116.0, "/e")
    _page(s, 129.0, "/f")  # the next attempt is due at 130
    job = s.next_job(132.0)
    assert job is not None and job.kind is JobKind.ROBOTS
    s.robots_answer("a.test", 132.0, status=200, location=None, body=NEW)
    assert slot.robots_at == 132.0 and s.delay_of(slot) == 7.0
    job = s.next_job(139.0)
    assert job is not None and job.kind is JobKind.SKIP and job.url == "http://a.test/g"
    # Fresh again for a TTL: no request for robots.txt before 232.
    _add(s, "/h")
    job = s.next_job(231.0)
    assert job is not None and job.kind is JobKind.SKIP and job.url == "http://a.test/h"


def test_a_refetch_answered_with_retry_after_leaves_the_host_alone_that_long() -> None:
    s = _refetch_due("/a", "/b")
    s.robots_answer("a.test", 100.0, status=429, location=None, body=b"", asked=300.0)
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is HostRobots.KNOWN
    # The server asked to be left alone, not only its robots.txt: no page meanwhile,
    # then robots.txt first.
    assert s.next_wakeup() == 400.0
    job = s.next_job(400.0)
    assert job is not None and job.kind is JobKind.ROBOTS


def test_a_refetch_that_cannot_verify_the_certificate_keeps_the_host() -> None:
    s = _sched()
    _add(s, "/a", "/b")
    _known(s)
    job = s.next_job(100.0)
    assert job is not None and job.kind is JobKind.ROBOTS
    s.robots_answer("a.test", 100.0, status=None, location=None, body=b"", final=True)
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is HostRobots.KNOWN
    _page(s, 103.0, "/a")


def test_a_redirected_refetch_follows_its_hops_then_pages_go_on() -> None:
    s = _sched()
    _add(s, "/a", "/b")
    _known(s)
    job = s.next_job(100.0)
    assert job is not None and job.kind is JobKind.ROBOTS
    location = "http://b.test/robots.txt"
    assert s.robots_answer("a.test", 100.0, status=301, location=location, body=b"") is None
    # The hop is the host's next request, after its delay, before any page.
    assert s.next_job(102.0) is None
    job = s.next_job(103.0)
    assert job is not None and job.kind is JobKind.ROBOTS and job.url == location
    s.robots_answer("a.test", 103.5, status=200, location=None, body=b"User-agent: *\n")
    _page(s, 104.5, "/a")


def test_a_refetch_abandoned_by_the_crawler_is_asked_again() -> None:
    s = _sched()
    _add(s, "/a")
    _known(s)
    job = s.next_job(100.0)
    assert job is not None and job.kind is JobKind.ROBOTS
    s.abandoned("a.test", None, 100.0)
    job = s.next_job(103.0)
    assert job is not None and job.kind is JobKind.ROBOTS


def test_a_host_idle_past_the_ttl_asks_robots_txt_before_its_next_url() -> None:
    s = _sched()
    _add(s, "/a")
    _known(s)
    _page(s, 3.0, "/a")
    assert s.idle()
    _add(s, "/b")
    job = s.next_job(1000.0)
    assert job is not None and job.kind is JobKind.ROBOTS
    s.robots_answer("a.test", 1000.0, status=200, location=None, body=OLD)
    _page(s, 1003.0, "/b")
