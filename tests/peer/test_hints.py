"""Sitemap lastmod trusted per host only as far as visits bear it out: the rule, on
hosts whose sitemaps tell the truth, say "now" for every page, or never change."""

from __future__ import annotations

import calendar
import dataclasses
import gc
import random
import time
from pathlib import Path

import pytest

from ubipy.fetch import parse_w3c
from ubipy.peer.hints import TRUST_MIN_CHECKS, LastmodHints
from ubipy.store import RefreshRow, Shard


def _w3c(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(t)))


@pytest.mark.parametrize(
    ("text", "start", "span"),
    [
        ("2024-05-01", calendar.timegm((2024, 5, 1, 0, 0, 0)), 86400.0),
        ("2024-02", calendar.timegm((2024, 2, 1, 0, 0, 0)), 29 * 86400.0),
        ("2023", calendar.timegm((2023, 1, 1, 0, 0, 0)), 365 * 86400.0),
        ("2024-06-30T12:00+02:00", calendar.timegm((2024, 6, 30, 10, 0, 0)), 60.0),
        ("2025-01-02T03:04:05Z", calendar.timegm((2025, 1, 2, 3, 4, 5)), 1.0),
        ("2025-01-02T03:04:05.25-01:00", calendar.timegm((2025, 1, 2, 4, 4, 5)) + 0.25, 0.01),
        # Forms sites write: a space for the T, a zone without its colon, no zone (the
        # time in any zone from UTC+14 to UTC-12: its span widened by 26 h).
        ("2025-01-02 03:04:05Z", calendar.timegm((2025, 1, 2, 3, 4, 5)), 1.0),
        ("2024-06-30T12:00+0200", calendar.timegm((2024, 6, 30, 10, 0, 0)), 60.0),
        ("2024-05-06T07:08:09", calendar.timegm((2024, 5, 5, 17, 8, 9)), 1.0 + 26 * 3600),
    ],
)
def test_a_w3c_datetime_is_its_first_instant_and_the_span_its_precision_leaves(
    text: str, start: float, span: float
) -> None:
    assert parse_w3c(text) == pytest.approx((start, span))


@pytest.mark.parametrize(
    "text",
    [
        "yesterday",
        "2024-13-01",
        "2024-02-30",
        "2024-05-01T10Z",
        "",
        "2024-01-02T99:99:99Z",  # taken as 2024-01-06T04:40:39 (a review)
        "2024-01-02T10:00+15:00",
        "0000-01-01",
    ],
)
def test_what_is_no_w3c_datetime_is_none(text: str) -> None:
    assert parse_w3c(text) is None


T0 = 1_767_225_600.0


def _crawl(kind: str, *, hours: int = 48, seed: int = 1) -> LastmodHints:
    """Ten pages of one host, changing about every 6 hours, visited every hour, the
    sitemap read every 20 minutes and saying what a sitemap of ``kind`` says."""
    rng = random.Random(seed)
    host = "h.test"
    changes = {fp: [T0 + rng.expovariate(1 / 21600) for _ in range(20)] for fp in range(10)}
    for times in changes.values():
        times.sort()
    last_visit = dict.fromkeys(changes, T0)
    hints = LastmodHints()

    def version(fp: int, t: float) -> int:
        return sum(1 for c in changes[fp] if c <= t)

    for minute in range(20, hours * 60, 20):
        now = T0 + minute * 60
        for fp in changes:
            past = [c for c in changes[fp] if c <= now]
            lastmod = {
                "accurate": _w3c(past[-1] if past else T0),
                "now": _w3c(now),
                "frozen": _w3c(T0 - 86400),
            }[kind]
            hints.read(fp, host, lastmod, now)
        if minute % 60 == 0:
            for fp in changes:
                changed = version(fp, now) != version(fp, last_visit[fp])
                hints.visited(fp, host, last_visit[fp], changed)
                last_visit[fp] = now
    return hints


def test_an_accurate_host_is_trusted_after_enough_checks_all_agreeing() -> None:
    hints = _crawl("accurate")
    trust = hints.hosts["h.test"]
    assert trust.checks >= TRUST_MIN_CHECKS and trust.agreed == trust.checks
    assert hints.trusted("h.test")


def test_a_host_is_not_trusted_on_fewer_checks_than_the_rule_asks() -> None:
    hints = LastmodHints()
    for fp in range(TRUST_MIN_CHECKS - 1):
        hints.read(fp, "h.test", _w3c(T0 + 10), T0 + 20)
        assert hints.visited(fp, "h.test", T0, changed=True) is True
    assert not hints.trusted("h.test")
    hints.read(99, "h.test", _w3c(T0 + 10), T0 + 20)
    hints.visited(99, "h.test", T0, changed=True)
    assert hints.trusted("h.test")


@pytest.mark.parametrize("kind", ["now", "frozen"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_sitemap_that_says_now_or_never_changes_is_not_trusted(kind: str, seed: int) -> None:
    hints = _crawl(kind, seed=seed)
    trust = hints.hosts["h.test"]
    assert trust.checks >= TRUST_MIN_CHECKS
    assert trust.agreed < 0.5 * trust.checks
    assert not hints.trusted("h.test")


def test_a_date_only_lastmod_is_not_held_against_its_host_for_its_precision() -> None:
    hints = LastmodHints()
    # A visit at 10:00 saw a change since 08:00; the sitemap says "that day".
    morning = T0 + 8 * 3600
    hints.visited(1, "h.test", morning, changed=True)
    said, check = hints.read(1, "h.test", "2026-01-01", T0 + 11 * 3600)
    assert said is not None and check is True
    # A lastmod of that day claims no change since a visit later the same day: no check.
    assert hints.visited(1, "h.test", T0 + 12 * 3600, changed=False) is None


def test_the_counts_summed_on_load_give_the_same_trust() -> None:
    before = _crawl("accurate")
    trust = before.hosts["h.test"]
    after = LastmodHints()
    after.load(
        [(1, "2026-01-01")], [("h.test", trust.checks - 3, trust.agreed - 3), ("h.test", 3, 3)]
    )
    assert after.trusted("h.test") and after.said(1) is not None


def test_a_pages_check_counts_are_kept_in_the_shard(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    row = RefreshRow(
        7, "http://h.test/", "h.test", 0, 3, 1, 60.0, T0, T0 + 60, 0.0, None, None, "d"
    )
    shard.save_refresh([dataclasses.replace(row, lastmod_checks=4, lastmod_agreed=3)], [])
    shard.close()
    shard = Shard.open(tmp_path)
    try:
        (kept,) = shard.refresh_rows()
    finally:
        shard.close()
    assert (kept.lastmod_checks, kept.lastmod_agreed) == (4, 3)


def test_what_sitemaps_said_is_no_work_for_the_collectors_full_passes() -> None:
    """One lastmod a page its sitemap lists, a million on a big continuous crawl: held
    as objects of a class, 0.1 s of every full collection. Read back as they were."""
    hints = LastmodHints()
    hints.load([(1, "2026-11-01"), (2, "not a date")], [])
    said, _ = hints.read(3, "a.test", "2026-11-02T10:00:00Z", now=1000.0)
    gc.collect()
    assert not gc.is_tracked(hints._said)
    assert said is not None and hints.said(3) == said and said.read == 1000.0
    first = hints.said(1)
    assert first is not None and first.at == calendar.timegm((2026, 11, 1, 0, 0, 0))
    assert hints.said(2) is None
