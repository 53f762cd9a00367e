"""bench/speed.py's report of what HTTPS costs over HTTP, on made-up runs."""

from __future__ import annotations

from typing import Any

import pytest

from bench.speed import LABELS, LogVerdict, Run, Usage, ratio_lines, schedule, thread_cpu_timed


def run(name: str, cpu: float, crawl_cpu: float, pages: int = 1000, **own: Any) -> Run:
    usage = Usage(wall=10.0, cpu=cpu, user=cpu, sys=0.0, max_rss_mb=60.0, status=0)
    verdict = LogVerdict(
        requests=pages, robots=0, pages=pages, urls=pages, duplicates=0,
        robots_violations=0, overlaps=0, missing=0, unexpected=0, connections=None,
    )  # fmt: skip
    return Run(name, usage, usage, verdict, {"crawl_cpu": crawl_cpu, **own})


def test_https_is_reported_over_http_with_openssls_share_of_the_difference() -> None:
    https = run(
        LABELS["ubipy-https"], cpu=2.4, crawl_cpu=1.9, tls_handshakes=200, tls_resumed=180,
        openssl_handshake_cpu=0.15, openssl_read_cpu=0.03, openssl_write_cpu=0.02,
    )  # fmt: skip
    plain = run(LABELS["ubipy"], cpu=2.0, crawl_cpu=1.6)
    lines = ratio_lines([plain, https])
    assert lines[0].startswith("ubipy CPU per page over HTTPS / over HTTP = 1.20 (2.40 / 2.00")
    assert "TLS handshakes: 200, 180 of them resumed" in lines
    assert lines[-1] == (
        "OpenSSL's own CPU a page over HTTPS: 0.20 ms (handshakes 0.15, reads 0.03, "
        "writes 0.02), of the 0.30 ms HTTPS's crawl costs a page over HTTP's"
    )


def test_a_result_from_before_openssl_was_timed_says_nothing_of_it() -> None:
    https = run(LABELS["ubipy-https"], cpu=2.4, crawl_cpu=2.0, tls_handshakes=200, tls_resumed=0)
    lines = ratio_lines([run(LABELS["ubipy"], cpu=2.0, crawl_cpu=1.6), https])
    assert lines[-1] == "TLS handshakes: 200, 0 of them resumed"


def test_a_timed_call_counts_itself_and_its_time_and_keeps_its_answer_and_its_errors() -> None:
    tally = [0, 0.0]

    def work(n: int, *, fail: bool = False) -> int:
        total = sum(range(n))
        if fail:
            raise ValueError("no")
        return total

    timed = thread_cpu_timed(work, tally)
    assert timed(200_000) == sum(range(200_000))
    assert tally[0] == 1 and tally[1] > 0
    before = tally[1]
    with pytest.raises(ValueError, match="no"):
        timed(200_000, fail=True)
    assert tally[0] == 2 and tally[1] > before


def test_repeated_rounds_take_turns_at_going_first() -> None:
    order = schedule(["http", "https"], 4)
    assert [name for _, name in order] == [
        "http", "https", "https", "http", "http", "https", "https", "http",
    ]  # fmt: skip
    assert [round_ for round_, _ in order] == [0, 0, 1, 1, 2, 2, 3, 3]
