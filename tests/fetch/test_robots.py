from __future__ import annotations

import math
import subprocess
import sys

import httpx2
import pytest

from ubipy.fetch.fetcher import fetch
from ubipy.fetch.robots import (
    MAX_REDIRECTS,
    ROBOTS_FETCH_BYTES,
    ROBOTS_MAX_BYTES,
    RobotsDecision,
    RobotsFetch,
    RobotsFetchError,
    RobotsOutcome,
    RobotsRules,
    RobotsState,
    retry_delay,
    robots_token,
)

ROBOTS = "http://example.com/robots.txt"


def _decide(status: int, location: str | None = None, body: bytes = b"") -> RobotsDecision:
    decision = RobotsFetch(ROBOTS).on_response(status, location, body)
    assert decision is not None
    return decision


# --- the rules -------------------------------------------------------------


def test_allow_all_and_disallow_all() -> None:
    assert RobotsRules.allow_all().allowed("/anything")
    assert RobotsRules.allow_all().crawl_delay is None
    assert not RobotsRules.disallow_all().allowed("/")
    assert not RobotsRules.disallow_all().allowed("http://example.com/x")


def test_empty_body_allows_everything() -> None:
    rules = RobotsRules.parse(b"")
    assert rules.allowed("/")
    assert rules.crawl_delay is None


def test_wildcards_anchors_and_longest_match() -> None:
    rules = RobotsRules.parse(
        b"User-agent: *\n"
        b"Disallow: /\n"
        b"\n"
        b"User-agent: ubipy\n"
        b"Disallow: /private/\n"
        b"Allow: /private/public/\n"
        b"Disallow: /*.pdf$\n"
        b"Disallow: /search*q=\n"
        b"Allow: /page\n"
        b"Disallow: /page\n"
    )
    assert rules.allowed("/")  # the ubipy group replaces the * group entirely
    assert rules.allowed("/other")
    assert not rules.allowed("/private/secret")
    assert rules.allowed("/private/public/doc")  # longer Allow wins
    assert not rules.allowed("/docs/file.pdf")
    assert rules.allowed("/docs/file.pdf?download=1")  # "$" anchors the end
    assert not rules.allowed("/search?lang=en&q=x")
    assert rules.allowed("/search?lang=en")
    assert rules.allowed("/page")  # equal length: Allow wins (RFC 9309 §2.2.2)
    assert not rules.allowed("http://example.com/private/x")  # full URLs work too
    assert rules.allowed("http://example.com/private/public/")


def test_star_group_applies_when_no_ubipy_group() -> None:
    rules = RobotsRules.parse(
        b"User-agent: otherbot\nDisallow: /\n\nUser-agent: *\nDisallow: /tmp/\nCrawl-delay: 3\n"
    )
    assert rules.allowed("/")
    assert not rules.allowed("/tmp/x")
    assert rules.crawl_delay == 3.0


def test_group_for_another_agent_not_applied() -> None:
    rules = RobotsRules.parse(b"User-agent: googlebot\nDisallow: /\nCrawl-delay: 10\n")
    assert rules.allowed("/anything")
    assert rules.crawl_delay is None


def test_product_token_is_case_insensitive_and_groups_merge() -> None:
    rules = RobotsRules.parse(
        b"User-agent: UbiPy\nDisallow: /a\n\nUser-agent: other\nUser-agent: ubipy\nDisallow: /b\n"
    )
    assert not rules.allowed("/a")
    assert not rules.allowed("/b")
    assert rules.allowed("/c")


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"Crawl-delay: 0.5", 0.5),
        (b"Crawl-delay: 2", 2.0),
        (b"Crawl-delay: -1", None),
        (b"Crawl-delay: nan", None),
        # The slowest crawl there is: kept, for the scheduler's cap (max_crawl_delay).
        (b"Crawl-delay: inf", 1e300),
        (b"Crawl-delay: 1e400", 1e300),
        (b"Crawl delay: Infinity # forever", 1e300),
        (b"Crawl-delay: -inf", None),
        (b"Crawl-delay: soon", None),
    ],
)
def test_crawl_delay(line: bytes, expected: float | None) -> None:
    rules = RobotsRules.parse(b"User-agent: ubipy\n" + line + b"\nDisallow: /x\n")
    assert rules.crawl_delay == expected


def test_bom_does_not_hide_first_group() -> None:
    rules = RobotsRules.parse(b"\xef\xbb\xbfUser-agent: *\nDisallow: /\n")
    assert not rules.allowed("/x")


@pytest.mark.parametrize(
    "body",
    [
        bytes(range(256)) * 50,
        b"\x00\xff\xfe" * 1000,
        b"User-agent: *\nDisallow: /\xff\xfe\n",
        b"Disallow: /\nAllow:\n:::\nUser-agent\n",
        b"\r\r\n\n\x0b\x0c" * 100,
    ],
)
def test_garbage_body_does_not_raise(body: bytes) -> None:
    rules = RobotsRules.parse(body)
    rules.allowed("/")
    rules.allowed("//double/slash")
    _ = rules.crawl_delay


def test_body_truncated_at_500_kib() -> None:
    head = b"User-agent: *\nDisallow: /before\n"
    filler = b"# " + b"x" * 98 + b"\n"
    body = head + filler * ((ROBOTS_MAX_BYTES - len(head)) // len(filler) + 1)
    assert len(body) > ROBOTS_MAX_BYTES
    body += b"Disallow: /after\n"
    rules = RobotsRules.parse(body)
    assert not rules.allowed("/before")
    assert rules.allowed("/after")


def test_rule_split_by_the_cut_is_dropped() -> None:
    # "Allow: /public-area" cut after "Allow: /p" must not allow all of /p*.
    prefix = b"User-agent: *\nDisallow: /\n"
    padding = b"#" * (ROBOTS_MAX_BYTES - len(prefix) - len(b"Allow: /p") - 1) + b"\n"
    body = prefix + padding + b"Allow: /public-area\n"
    assert body.index(b"ublic") == ROBOTS_MAX_BYTES
    rules = RobotsRules.parse(body)
    assert not rules.allowed("/pizza")
    assert not rules.allowed("/public-area")


def test_rule_ending_exactly_at_the_cut_is_kept() -> None:
    prefix = b"User-agent: *\nDisallow: /\n"
    rule = b"Allow: /open"
    padding = b"#" * (ROBOTS_MAX_BYTES - len(prefix) - len(rule) - 1) + b"\n"
    body = prefix + padding + rule + b"\nAllow: /later\n"
    assert len(prefix + padding + rule) == ROBOTS_MAX_BYTES
    rules = RobotsRules.parse(body)
    assert rules.allowed("/open")
    assert not rules.allowed("/later")


def test_robots_txt_itself_always_allowed() -> None:
    rules = RobotsRules.parse(b"User-agent: *\nDisallow: /\n")
    assert rules.allowed("/robots.txt")
    assert not rules.allowed("/robots.txt.bak")


# --- the fetch state machine -----------------------------------------------


@pytest.mark.parametrize("status", [200, 203, 299])
def test_success_parses_body(status: int) -> None:
    decision = _decide(status, body=b"User-agent: *\nDisallow: /no\n")
    assert decision.outcome is RobotsOutcome.PARSED
    assert not decision.temporary
    assert not decision.rules.allowed("/no")
    assert decision.rules.allowed("/yes")


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 499])
def test_client_errors_mean_unavailable(status: int) -> None:
    decision = _decide(status, body=b"User-agent: *\nDisallow: /\n")
    assert decision.outcome is RobotsOutcome.UNAVAILABLE
    assert not decision.temporary
    assert decision.rules.allowed("/anything")


# 429, "too many requests", is a server there that says "not now": crawl nothing yet,
# as after a 5xx (Google's reading of RFC 9309), not everything at once.
@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 599, 600, 100])
def test_server_errors_mean_unreachable(status: int) -> None:
    decision = _decide(status)
    assert decision.outcome is RobotsOutcome.UNREACHABLE
    assert decision.temporary
    assert not decision.rules.allowed("/anything")


def test_network_error_means_unreachable() -> None:
    fetch = RobotsFetch(ROBOTS)
    decision = fetch.on_error()
    assert decision is not None
    assert decision.outcome is RobotsOutcome.UNREACHABLE
    assert decision.temporary
    assert not decision.rules.allowed("/")
    assert fetch.state is RobotsState.DONE
    assert fetch.decision is decision


def test_redirect_chain_then_success() -> None:
    fetch = RobotsFetch(ROBOTS)
    assert fetch.on_response(301, "https://example.com/robots.txt", b"") is None
    assert fetch.url == "https://example.com/robots.txt"
    assert fetch.decision is None
    assert fetch.on_response(302, "/real/robots.txt#x", b"") is None
    assert fetch.url == "https://example.com/real/robots.txt"
    assert fetch.redirects == 2
    decision = fetch.on_response(200, None, b"User-agent: ubipy\nDisallow: /z\n")
    assert decision is not None
    assert decision.outcome is RobotsOutcome.PARSED
    assert not decision.rules.allowed("/z")
    assert fetch.state is RobotsState.DONE


def test_five_redirects_are_followed_the_sixth_is_not() -> None:
    fetch = RobotsFetch(ROBOTS)
    for i in range(MAX_REDIRECTS):
        assert fetch.on_response(307, f"/r{i}", b"") is None
    assert fetch.url == "http://example.com/r4"
    decision = fetch.on_response(307, "/r5", b"")
    assert decision is not None
    assert decision.outcome is RobotsOutcome.TOO_MANY_REDIRECTS
    assert not decision.temporary
    assert decision.rules.allowed("/anything")


def test_five_redirects_then_success() -> None:
    fetch = RobotsFetch(ROBOTS)
    for i in range(MAX_REDIRECTS):
        assert fetch.on_response(308, f"/r{i}", b"") is None
    decision = fetch.on_response(200, None, b"User-agent: *\nDisallow: /\n")
    assert decision is not None
    assert decision.outcome is RobotsOutcome.PARSED


@pytest.mark.parametrize("location", [None, "", "mailto:x@example.com", "http://", "  "])
def test_redirect_without_usable_location_is_unavailable(location: str | None) -> None:
    decision = _decide(302, location)
    assert decision.outcome is RobotsOutcome.UNAVAILABLE
    assert decision.rules.allowed("/")


def test_events_after_the_decision_are_refused() -> None:
    fetch = RobotsFetch(ROBOTS)
    fetch.on_response(404, None, b"")
    with pytest.raises(RobotsFetchError):
        fetch.on_response(200, None, b"")
    with pytest.raises(RobotsFetchError):
        fetch.on_error()
    with pytest.raises(RobotsFetchError):
        fetch.on_response(301, "/x", b"")


def test_retry_delay() -> None:
    assert retry_delay(1, 10.0) == 10.0
    assert retry_delay(2, 10.0) == 20.0
    assert retry_delay(3, 10.0) == 40.0
    assert retry_delay(0, 10.0) == 10.0
    assert retry_delay(100, 10.0) == 3600.0
    assert retry_delay(10**9, 10.0, cap=60.0) == 60.0
    assert math.isfinite(retry_delay(10**9, 1e300, cap=1e308))


async def test_a_rule_cut_by_the_fetch_s_cap_is_dropped_not_read_short() -> None:
    """A robots.txt past 500 KiB, fetched as the crawler fetches it: the fetcher cut it
    at exactly the cap, so its parse could not tell a cut line from a whole one, and
    'Allow: /public-area' read as 'Allow: /' tied 'Disallow: /' and opened the whole
    site (found by a review). The fetch reads a byte more: the cut line is dropped."""
    prefix = b"User-agent: *\nDisallow: /\n"
    cut = b"Allow: /"  # of "Allow: /public-area"
    padding = b"#" * (ROBOTS_MAX_BYTES - len(prefix) - len(cut) - 1) + b"\n"
    body = prefix + padding + b"Allow: /public-area\n"
    transport = httpx2.MockTransport(
        lambda _: httpx2.Response(200, headers=[("Content-Type", "text/plain")], content=body)
    )
    async with httpx2.AsyncClient(transport=transport) as client:
        result = await fetch(client, "http://a.test/robots.txt", max_bytes=ROBOTS_FETCH_BYTES)
    assert result.status == 200
    decision = RobotsFetch("http://a.test/robots.txt").on_response(
        result.status, result.location, result.body
    )
    assert decision is not None
    assert not decision.rules.allowed("http://a.test/private/x")
    assert not decision.rules.allowed("http://a.test/public-area")  # past the cap


@pytest.mark.parametrize(
    ("group", "ours"),
    [
        ("ubipy", True),
        ("UBIPY", True),
        ("ubipy/1.0", True),  # a version after the product token, as Google reads it
        ("ubipy # us", True),
        ("ubi", False),  # a prefix of ubipy is another crawler's name
        ("u", False),
        ("ubipy-extra", False),
        ("Googlebot", False),
    ],
)
def test_a_group_is_ubipy_s_when_its_product_token_is_ubipy(group: str, ours: bool) -> None:
    """RFC 9309 2.2.1: the group whose user-agent matches the product token, without
    case. protego finds the group's value inside the crawler's name: 'ubi' was taken
    for ubipy's group and 'ubipy/1.0' was not (found by a review)."""
    text = f"User-agent: {group}\nDisallow: /\n\nUser-agent: *\nAllow: /\n"
    rules = RobotsRules.parse(text.encode())
    assert rules.allowed("http://x.test/page") is not ours


@pytest.mark.parametrize(
    "text",
    [
        "Useragent: ubipy\nDisallow: /\n\nUser-agent: *\nAllow: /\n",
        "User agent: ubipy\nDisallow: /\n\nUser-agent: *\nAllow: /\n",
        "User-agent ubipy/2\nDisallow: /\n\nUser-agent: *\nAllow: /\n",
        # CR alone ends a line too (RFC 9309 2.2): the second group used to be read
        # with 'ubipy/1.0', not ubipy, as its agent, and the * group applied.
        "User-agent: *\rAllow: /\r\rUser-agent: ubipy/1.0\rDisallow: /\r",
        "User-agent: ubi\r\nUser-agent: ubipy\r\nDisallow: /\r\n",
    ],
)
def test_ubipy_s_group_is_found_however_protego_reads_its_lines(text: str) -> None:
    assert not RobotsRules.parse(text.encode()).allowed("http://x.test/page")


def test_a_group_of_thousands_of_agents_is_one_agent_to_protego() -> None:
    """protego gives each rule of a group to every agent the group names: a 64 KB file
    of distinct agents and rules took 3 s and 317 MB to parse (found by a review).
    Every agent but ubipy and * is one agent here, and the verdicts stay."""
    names = ["bot" + "".join(chr(97 + (i // 26**k) % 26) for k in range(3)) for i in range(2000)]
    text = "".join(f"User-agent: {name}\n" for name in names)
    text += "".join(f"Disallow: /{i}\n" for i in range(2000)) + "\nUser-agent: *\nDisallow: /1\n"
    rules = RobotsRules.parse(text.encode())
    assert rules._parser is not None and len(rules._parser._user_agents) == 2
    assert not rules.allowed("http://x.test/1") and rules.allowed("http://x.test/2")


@pytest.mark.parametrize(
    ("user_agent", "token"),
    [
        ("ubipy/0.1 (+https://example.org)", "ubipy"),
        ("acmebot/1.0 (+https://acme.example/bot)", "acmebot"),
        ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", "googlebot"),
        ("MyCrawler", "mycrawler"),
        ("", "ubipy"),
    ],
)
def test_the_robots_token_is_the_user_agents_product(user_agent: str, token: str) -> None:
    assert robots_token(user_agent) == token
    # Its group is the one obeyed, whatever the token.
    rules = RobotsRules.parse(f"User-agent: {token}\nDisallow: /x\n".encode(), token)
    assert not rules.allowed("http://a.test/x") and rules.allowed("http://a.test/y")


def test_a_robots_txt_is_read_with_no_file_descriptor_left() -> None:
    """Its codec was imported at the first robots.txt: a cluster peer out of file
    descriptors (ulimit -n 40) died of that import (QA). Read in a process that can open
    no file: nothing to import at that moment."""
    code = (
        "import os, resource\n"
        "from ubipy.fetch.robots import RobotsRules\n"
        "n = len(os.listdir('/proc/self/fd')) - 1\n"
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))\n"
        "rules = RobotsRules.parse(b'\\xef\\xbb\\xbfUser-agent: *\\nDisallow: /x\\n')\n"
        "assert not rules.allowed('/x/1') and rules.allowed('/y')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
