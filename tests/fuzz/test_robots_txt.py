"""robots.txt from hostile hosts: any bytes, and files in the format's own words
with odd values (wildcards, regex characters, escapes, numbers no float holds,
BOMs, every line ending), plus any sequence of responses to the fetch. Nothing
raises but a caller's own bug (RobotsFetchError), and the answers are sane: a
crawl delay is a finite number of seconds or none, every URL gets a yes or a no,
and a fetch follows at most five redirects, each to a crawlable URL."""

from __future__ import annotations

import math

from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.common import fuzz, mutated_bytes
from ubipy.fetch.robots import (
    MAX_REDIRECTS,
    ROBOTS_MAX_BYTES,
    RobotsDecision,
    RobotsFetch,
    RobotsFetchError,
    RobotsOutcome,
    RobotsRules,
    RobotsState,
)
from ubipy.fetch.urls import BadURL, normalize, path_and_query

# --------------------------------------------------------------------------- rules

_FIELDS = ["User-agent", "user-AGENT", "Allow", "Disallow", "Crawl-delay", "Request-rate",
           "Sitemap", "Host", "Visit-time", "Noindex", "Clean-param", "", "#"]  # fmt: skip
_AGENTS = ["*", "ubipy", "UbiPy/1.0", "ubipy-bot", "googlebot", "", "*ubipy*"]
_VALUES = ["/", "", "/private", "/*", "/*.php$", "/a$b", "$", "*", "/%2F", "/%zz", "/%", "/é",
           "/%C3%A9", "/(", "/[a-z]+", "/\\", "/?q=1", "/a*b*c*d*e*f*g*h*i*j*k*", "1", "0",
           "-1", "1e999", "nan", "inf", "0.5", "10/1m", "1/0", "0/0", "1/0s", "9" * 400,
           "1_000", "١", "http://a.test/sitemap.xml"]  # fmt: skip
_ENDINGS = ["\n", "\r\n", "\r"]

_line = st.one_of(
    st.builds(
        "{}{}{}".format,
        st.sampled_from(_FIELDS),
        st.sampled_from([":", ": ", " : ", ":\t", ""]),
        st.sampled_from(_AGENTS + _VALUES) | st.text(max_size=30),
    ),
    st.text(max_size=40),
)


@st.composite
def robots_files(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(_line, max_size=20))
    text = "".join(line + draw(st.sampled_from(_ENDINGS)) for line in lines)
    bom = draw(st.sampled_from(["", "\ufeff"]))
    raw = (bom + text).encode(draw(st.sampled_from(["utf-8", "utf-16", "latin-1"])), "replace")
    return draw(mutated_bytes(raw)) if draw(st.booleans()) else raw


# URLs as the scheduler asks about them: normalised, from any path text.
_paths = st.sampled_from(["", "private", "a.php", "é", "%2F", "%zz", "a b", "(", "?q=1", "//x"])
urls = st.lists(_paths | st.text(max_size=20), min_size=1, max_size=4).map(
    lambda parts: "http://h.test/" + "/".join(parts)
)

_BIG = b"User-agent: *\nDisallow: /private\n" * (ROBOTS_MAX_BYTES // 32 + 100)


@fuzz(60)
@given(body=st.binary(max_size=2000) | robots_files(), asked=st.lists(urls, max_size=4))
@example(body=b"User-agent: ubipy\nCrawl-delay: 1e999\n", asked=[])
@example(body=b"User-agent: ubipy\nCrawl-delay: " + b"9" * 400 + b"\n", asked=[])
@example(body=b"User-agent: *\nDisallow: /[a-z]+(\nAllow: /*$*$\n", asked=["http://h.test/x"])
@example(body=_BIG + b"Allow: /priv", asked=["http://h.test/private"])
def test_any_robots_txt_gives_a_yes_or_no_and_a_sane_delay(body: bytes, asked: list[str]) -> None:
    rules = RobotsRules.parse(body)
    delay = rules.crawl_delay
    assert delay is None or (type(delay) is float and math.isfinite(delay) and delay >= 0)
    for raw in asked:
        try:
            url = normalize(raw)
        except BadURL:
            continue
        assert rules.allowed(url) in (True, False)
        assert rules.allowed(path_and_query(url)) in (True, False)
    repr(rules)


# --------------------------------------------------------------------------- the fetch

_statuses = st.sampled_from([200, 204, 299, 301, 302, 307, 308, 399, 404, 451, 500, 503, 599]) | (
    st.integers(-(2**31), 2**31)
)
_locations = st.none() | st.sampled_from(
    ["/robots.txt", "http://other.test/robots.txt", "https://h.test/r", "//x.test/",
     "ftp://h.test/", "mailto:x", "javascript:0", "http://", " ", "\x00", "http://[::1/",
     "http://user:pw@h.test/robots.txt", "../../r", "?x", "#f", "http://h.test/" + "a" * 9000]
) | st.text(max_size=40)  # fmt: skip
_responses = st.lists(
    st.tuples(st.booleans(), _statuses, _locations, st.binary(max_size=200) | robots_files()),
    min_size=1,
    max_size=MAX_REDIRECTS + 3,
)


@fuzz(40)
@given(_responses)
def test_any_responses_lead_to_one_decision_and_only_crawlable_redirects(
    responses: list[tuple[bool, int, str | None, bytes]],
) -> None:
    fetch = RobotsFetch("http://h.test/robots.txt")
    decision: RobotsDecision | None = None
    for failed, status, location, body in responses:
        if decision is not None:
            # Fed after its decision: the caller's bug, and the only error.
            try:
                fetch.on_error() if failed else fetch.on_response(status, location, body)
            except RobotsFetchError:
                continue
            raise AssertionError("an event after the decision was taken")
        decision = fetch.on_error() if failed else fetch.on_response(status, location, body)
        assert fetch.redirects <= MAX_REDIRECTS
        assert fetch.url.startswith(("http://", "https://")) and normalize(fetch.url) == fetch.url
        if decision is None:
            assert fetch.state is RobotsState.AWAITING_RESPONSE
            assert 300 <= status < 400 and not failed
        else:
            assert fetch.state is RobotsState.DONE and fetch.decision is decision
            # Only an unreachable server is retried, and meanwhile nothing is fetched.
            assert decision.temporary == (decision.outcome is RobotsOutcome.UNREACHABLE)
            if decision.temporary:
                assert not decision.rules.allowed("http://h.test/")
