"""Each scheme of a host has its own robots.txt (RFC 9309 §2.3), in the one politeness
slot http and https of a host share: a crawl that met the host over http first used to
judge its https URLs by the http robots.txt (a site whose https robots.txt disallows a
path was asked for it)."""

from __future__ import annotations

from ubipy.fetch.politeness import Entry, HostRobots, Job, JobKind, Scheduler

ALLOW_ALL = b"User-agent: *\nDisallow:\n"
NO_PRIVATE = b"User-agent: *\nDisallow: /private/\n"


def _sched() -> Scheduler:
    def loader(host: str, after: int, limit: int) -> list[Entry]:
        return []

    return Scheduler(delay=1.0, window=64, loader=loader, robots_retry_base=10.0)


def _next(s: Scheduler, now: float) -> Job:
    job = s.next_job(now)
    assert job is not None
    return job


def _add(s: Scheduler, *urls: str) -> None:
    for i, url in enumerate(urls, start=1):
        s.add("a.test", Entry(i, i, url, 0))


def _crawled_over_http(*urls: str) -> Scheduler:
    """A scheduler of ``urls`` (an http one first) whose http robots.txt (allowing
    all) was read at 0 and the first URL asked at 1."""
    s = _sched()
    _add(s, *urls)
    assert _next(s, 0.0).url == "http://a.test/robots.txt"
    s.robots_answer("a.test", 0.0, status=200, location=None, body=ALLOW_ALL)
    assert _next(s, 1.0).url == urls[0]
    s.finished("a.test", 1.0)
    return s


def _https_robots_failing(
    s: Scheduler, now: float, *, status: int | None, scheme: str = "https"
) -> float:
    """The ``scheme``'s robots.txt asked and failing (``status``; None: no answer) at
    each of its three attempts, from ``now``; the time of the last."""
    for _ in range(3):
        wake = s.next_wakeup()
        assert wake is not None
        now = max(now, wake)
        assert _next(s, now).url == f"{scheme}://a.test/robots.txt"
        s.robots_answer("a.test", now, status=status, location=None, body=b"")
    return now


def test_a_url_of_the_other_scheme_has_that_scheme_s_robots_txt_asked_first() -> None:
    s = _sched()
    _add(
        s,
        "http://a.test/p",
        "https://a.test/private/x",
        "https://a.test/q",
        "http://a.test/private/y",
    )
    asked: list[tuple[JobKind, str]] = []
    now = 0.0
    while (wake := s.next_wakeup()) is not None:
        now = max(now, wake)
        job = _next(s, now)
        asked.append((job.kind, job.url))
        if job.kind is JobKind.ROBOTS:
            body = ALLOW_ALL if job.url.startswith("http:") else NO_PRIVATE
            s.robots_answer("a.test", now, status=200, location=None, body=body)
        elif job.kind is JobKind.PAGE:
            s.finished("a.test", now)
    assert asked == [
        (JobKind.ROBOTS, "http://a.test/robots.txt"),
        (JobKind.PAGE, "http://a.test/p"),
        (JobKind.ROBOTS, "https://a.test/robots.txt"),
        (JobKind.SKIP, "https://a.test/private/x"),  # https's rules, not http's
        (JobKind.PAGE, "https://a.test/q"),
        # http's rules again, kept beside https's: not asked again.
        (JobKind.PAGE, "http://a.test/private/y"),
    ]
    assert s.idle()


def test_the_longer_crawl_delay_of_the_two_schemes_is_the_host_s() -> None:
    s = _sched()
    _add(s, "https://a.test/p", "http://a.test/q", "https://a.test/r")
    assert _next(s, 0.0).url == "https://a.test/robots.txt"
    s.robots_answer(
        "a.test", 0.0, status=200, location=None, body=b"User-agent: *\nCrawl-delay: 5\n"
    )
    assert _next(s, 5.0).url == "https://a.test/p"
    s.finished("a.test", 5.0)
    assert _next(s, 10.0).url == "http://a.test/robots.txt"
    s.robots_answer("a.test", 10.0, status=200, location=None, body=ALLOW_ALL)
    # http's robots.txt asks no delay, https's 5 s: the host keeps 5 s.
    assert s.next_job(14.9) is None
    assert _next(s, 15.0).url == "http://a.test/q"
    s.finished("a.test", 15.0)
    assert s.next_job(19.9) is None
    assert _next(s, 20.0).url == "https://a.test/r"


def test_a_scheme_whose_robots_txt_cannot_be_had_leaves_the_host_s_other_urls_crawled() -> None:
    """https's certificate refused on a host crawled over http: its https URLs are
    disallowed; the host is not given up."""
    s = _crawled_over_http("http://a.test/p", "https://a.test/q", "http://a.test/r")
    assert _next(s, 2.0).url == "https://a.test/robots.txt"
    s.robots_answer("a.test", 2.0, status=None, location=None, body=b"", final=True)
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is HostRobots.KNOWN
    skipped = _next(s, 3.0)
    assert (skipped.kind, skipped.url) == (JobKind.SKIP, "https://a.test/q")
    page = _next(s, 3.0)
    assert (page.kind, page.url) == (JobKind.PAGE, "http://a.test/r")


def test_a_scheme_whose_robots_txt_fails_for_now_is_read_by_the_other_s_and_asked_again() -> None:
    """https's robots.txt answering 503 past its attempts, on a host crawled over http:
    its URLs were closed as disallowed, lost for good. The http rules stand in (the
    old way), and https's robots.txt is asked again after the back-off."""
    s = _crawled_over_http("http://a.test/p", "https://a.test/q", "https://a.test/r")
    now = _https_robots_failing(s, 1.0, status=503)
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is HostRobots.KNOWN
    page = _next(s, now + 1.0)
    assert (page.kind, page.url) == (JobKind.PAGE, "https://a.test/q")
    s.finished("a.test", now + 1.0)
    # Asked again once the back-off is over, before the next https URL.
    assert _next(s, now + 2.0).url == "https://a.test/r"
    s.finished("a.test", now + 2.0)
    s.add("a.test", Entry(7, 7, "https://a.test/late", 0))
    assert _next(s, now + 1000.0).url == "https://a.test/robots.txt"


def _drain(s: Scheduler, now: float) -> list[tuple[JobKind, str, str]]:
    """Every job the host has from ``now`` on, pages answered at once, robots.txt
    (of either scheme) allowing all: (kind, URL, reason)."""
    jobs: list[tuple[JobKind, str, str]] = []
    while (wake := s.next_wakeup()) is not None:
        now = max(now, wake)
        job = _next(s, now)
        jobs.append((job.kind, job.url, job.reason))
        if job.kind is JobKind.ROBOTS:
            s.robots_answer("a.test", now, status=200, location=None, body=ALLOW_ALL)
        elif job.kind is JobKind.PAGE:
            s.finished("a.test", now)
    return jobs


def test_a_first_scheme_whose_robots_txt_cannot_be_had_leaves_the_other_scheme_crawled() -> None:
    """An http site whose port 443 serves another's certificate, met first by an https
    link: the host was given up, its http URLs closed unasked (RFC 9309 §2.3: each
    scheme has its own robots.txt). Now only https's URLs are closed, with the reason."""
    s = _sched()
    _add(s, "https://a.test/p", "http://a.test/q", "https://a.test/r")
    assert _next(s, 0.0).url == "https://a.test/robots.txt"
    why = "certificate error: self-signed certificate"
    s.robots_answer("a.test", 0.0, status=None, location=None, body=b"", final=True, reason=why)
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is not HostRobots.GIVEN_UP
    assert _drain(s, 0.0) == [
        (JobKind.SKIP, "https://a.test/p", why),
        (JobKind.ROBOTS, "http://a.test/robots.txt", ""),
        (JobKind.PAGE, "http://a.test/q", ""),
        (JobKind.SKIP, "https://a.test/r", why),
    ]
    # https's closed rules are kept beside http's: a later https URL is closed at once.
    s.add("a.test", Entry(8, 8, "https://a.test/late", 0))
    assert _drain(s, 10.0) == [(JobKind.SKIP, "https://a.test/late", why)]


def test_a_scheme_unreachable_for_now_past_its_attempts_leaves_the_other_scheme_crawled() -> None:
    s = _sched()
    _add(s, "https://a.test/p", "http://a.test/q")
    now = _https_robots_failing(s, 0.0, status=None)
    assert _drain(s, now) == [
        (JobKind.SKIP, "https://a.test/p", "robots.txt unreachable"),
        (JobKind.ROBOTS, "http://a.test/robots.txt", ""),
        (JobKind.PAGE, "http://a.test/q", ""),
    ]


def test_a_host_whose_only_scheme_s_robots_txt_cannot_be_had_is_given_up() -> None:
    s = _sched()
    _add(s, "https://a.test/p", "https://a.test/q")
    assert _next(s, 0.0).url == "https://a.test/robots.txt"
    s.robots_answer("a.test", 0.0, status=None, location=None, body=b"", final=True)
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is HostRobots.GIVEN_UP
    assert s.idle()
    # More of the scheme given up are refused (the caller closes them)...
    assert not s.add("a.test", Entry(5, 5, "https://a.test/more", 0))
    # ...but a URL of the other scheme, never tried, has its robots.txt asked.
    assert s.add("a.test", Entry(6, 6, "http://a.test/plain", 0))
    assert _drain(s, 1.0) == [
        (JobKind.ROBOTS, "http://a.test/robots.txt", ""),
        (JobKind.PAGE, "http://a.test/plain", ""),
    ]


def test_a_host_both_of_whose_schemes_cannot_be_had_is_given_up() -> None:
    s = _sched()
    _add(s, "https://a.test/p", "http://a.test/q", "http://a.test/r")
    assert _next(s, 0.0).url == "https://a.test/robots.txt"
    s.robots_answer("a.test", 0.0, status=None, location=None, body=b"", final=True)
    assert _next(s, 1.0).kind is JobKind.SKIP
    assert _next(s, 1.0).url == "http://a.test/robots.txt"
    s.robots_answer("a.test", 1.0, status=None, location=None, body=b"", final=True)
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is HostRobots.GIVEN_UP
    assert s.idle()
    for i, url in enumerate(["https://a.test/x", "http://a.test/y"], start=10):
        assert not s.add("a.test", Entry(i, i, url, 0))


def test_the_other_scheme_s_rules_past_their_time_are_asked_again_before_its_url() -> None:
    s = Scheduler(delay=1.0, window=64, loader=lambda h, a, n: [], robots_ttl=100.0)
    _add(s, "http://a.test/p")
    s.add("a.test", Entry(2, 2, "https://a.test/q", 0))
    for now, url in [(0.0, "http://a.test/robots.txt"), (60.0, "https://a.test/robots.txt")]:
        job = _next(s, now)
        assert job.url == url
        s.robots_answer("a.test", now, status=200, location=None, body=ALLOW_ALL)
        page = _next(s, now + 1.0)
        assert page.kind is JobKind.PAGE
        s.finished("a.test", now + 1.0)
    # The host's one URL is http's, whose rules (kept since 0.0 as the spare) are past
    # their 100 s; https's, held, are not.
    s.add("a.test", Entry(9, 9, "http://a.test/late", 0))
    assert _next(s, 120.0).url == "http://a.test/robots.txt"


def test_a_scheme_past_its_window_survives_the_other_s_robots_txt_given_up() -> None:
    """http's robots.txt failing past its attempts on a host whose https URL waited
    on disk, behind a window of http URLs: the host was given up, and the https page
    closed unasked with them (a review's fuzzer). Now the http URLs are closed as they
    are met, and the https one is asked, after its own robots.txt. (Rows a start
    restored are not known by scheme: such a host is given up, as one of http alone
    is, and tried again a --robots-ttl later.)"""
    disk = [Entry(i, i, f"http://a.test/x{i}", 0) for i in range(1, 6)]
    disk.append(Entry(6, 6, "https://a.test/y", 0))

    def loader(host: str, after: int, limit: int) -> list[Entry]:
        return [e for e in disk if e.seq > after][:limit]

    s = Scheduler(delay=1.0, window=2, loader=loader, robots_retry_base=10.0)
    for entry in disk:
        s.add("a.test", entry)
    now = _https_robots_failing(s, 0.0, status=500, scheme="http")
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is not HostRobots.GIVEN_UP
    unreachable = "robots.txt unreachable"
    assert _drain(s, now) == [
        *((JobKind.SKIP, f"http://a.test/x{i}", unreachable) for i in range(1, 6)),
        (JobKind.ROBOTS, "https://a.test/robots.txt", ""),
        (JobKind.PAGE, "https://a.test/y", ""),
    ]


def test_a_scheme_given_up_with_only_its_own_urls_on_disk_gives_the_host_up() -> None:
    """The host is given up whole, as before (its rows closed in one go, and tried
    again later): nothing of the other scheme waits."""
    disk = [Entry(i, i, f"http://a.test/x{i}", 0) for i in range(1, 6)]
    s = Scheduler(delay=1.0, window=2, loader=lambda *_: disk[2:], robots_retry_base=10.0)
    for entry in disk:
        s.add("a.test", entry)
    _https_robots_failing(s, 0.0, status=500, scheme="http")
    slot = s.slot("a.test")
    assert slot is not None and slot.robots_state is HostRobots.GIVEN_UP
    assert s.idle()
