"""A restart takes the robots.txt rules an earlier run kept (RobotsRule.cache), if
younger than the TTL: every restart asked every host's robots.txt again (QA)."""

from __future__ import annotations

from collections.abc import Mapping

from ubipy.fetch.politeness import Entry, JobKind, Scheduler
from ubipy.fetch.robots import LARGE_ROBOTS

TTL = 86_400.0
RULES = b"User-agent: *\nDisallow: /private/\n"


def _scheduler(kept: Mapping[tuple[str, str], tuple[float, bytes | None]]) -> Scheduler:
    s = Scheduler(delay=1.0, window=8, loader=lambda h, a, n: [], robots_ttl=TTL)
    s.robots.cache = lambda host, scheme: kept.get((host, scheme))
    return s


def _add(s: Scheduler, *urls: str) -> None:
    for i, url in enumerate(urls, 1):
        s.add("a.test", Entry(fp=i, seq=i, url=url, depth=1))


def test_rules_kept_younger_than_the_ttl_are_taken_and_asked_again_when_due() -> None:
    s = _scheduler({("a.test", "http:"): (TTL - 100.0, RULES)})
    _add(s, "http://a.test/private/x", "http://a.test/p")
    first = s.next_job(0.0)
    assert first is not None and (first.kind, first.url) == (
        JobKind.SKIP,
        "http://a.test/private/x",
    )
    page = s.next_job(0.0)
    assert page is not None and (page.kind, page.url) == (JobKind.PAGE, "http://a.test/p")
    s.finished("a.test", 1.0)
    # They are a day old 100 s from now: robots.txt is asked again then, as it would
    # have been had the peer not stopped.
    _add(s, "http://a.test/q")
    again = s.next_job(101.0)
    assert again is not None and (again.kind, again.url) == (
        JobKind.ROBOTS,
        "http://a.test/robots.txt",
    )


def test_rules_kept_past_the_ttl_or_of_the_other_scheme_are_not_taken() -> None:
    for kept in (
        {("a.test", "http:"): (TTL + 1.0, RULES)},
        {("a.test", "https:"): (10.0, RULES)},
        {},
    ):
        s = _scheduler(kept)
        _add(s, "http://a.test/p")
        job = s.next_job(0.0)
        assert job is not None and job.kind is JobKind.ROBOTS, kept


def test_a_large_robots_txt_kept_is_asked_again_rather_than_parsed_on_the_loop() -> None:
    """Its parse would hold the event loop (a quarter of a second for 500 KiB of
    rules, QA); asked again, the answer is parsed by a thread."""
    large = RULES + b"".join(b"Disallow: /p%d/*x\n" % i for i in range(5000))
    assert len(large) >= LARGE_ROBOTS
    s = _scheduler({("a.test", "http:"): (10.0, large)})
    _add(s, "http://a.test/p")
    job = s.next_job(0.0)
    assert job is not None and (job.kind, job.url) == (JobKind.ROBOTS, "http://a.test/robots.txt")


def test_an_answer_that_restricts_nothing_is_kept_as_none() -> None:
    s = _scheduler({("a.test", "http:"): (5.0, None)})
    _add(s, "http://a.test/private/x")
    job = s.next_job(0.0)
    assert job is not None and (job.kind, job.url) == (JobKind.PAGE, "http://a.test/private/x")
