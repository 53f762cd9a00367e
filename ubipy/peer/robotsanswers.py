"""What a host's robots.txt answer means for the crawl.

The scheduler takes it (its rules, the host's delay, a retry, a refetch once they are
old: :mod:`ubipy.fetch.robotsrule`). A host it gives up (robots.txt unreachable after
the last attempt, or its certificate did not verify) has its queued URLs closed with
the reason, not lost; when the host's other scheme has URLs waiting, only the failing
scheme's are closed (each as its turn comes), and the host goes on over the other. A
host whose rules came has its ``Sitemap`` lines and /sitemap.xml go where links go
(:mod:`ubipy.peer.sitemapping`).
"""

from __future__ import annotations

import time

from ubipy.fetch import (
    BACKOFF_STATUSES,
    ROBOTS_UNREACHABLE,
    FetchOutcome,
    FetchResult,
    HostRobots,
    Job,
    RobotsRules,
    Scheduler,
    fingerprint,
    made_no_connection,
)
from ubipy.peer.commits import Commits
from ubipy.peer.crawlstats import CrawlStats
from ubipy.peer.records import head_of
from ubipy.peer.sitemapping import Sitemapping
from ubipy.store import RobotsAnswer, RobotsKept, Shard

__all__ = ["robots_answered"]


def robots_answered(
    scheduler: Scheduler,
    commits: Commits,
    sitemaps: Sitemapping,
    stats: CrawlStats,
    job: Job,
    result: FetchResult,
    now: float,
    asked: float | None = None,
    *,
    at: float,
    archive: bool,
    rules: RobotsRules | None = None,
) -> bool:
    """Hand ``job``'s answer on (``asked``: the seconds its Retry-After asked; ``at``:
    the wall clock when it ended); True when URLs were closed (a commit is due now).
    With ``archive``, an answer (any status) goes to the WARC files too. ``rules``:
    its body's, parsed already."""
    stats.robots_requests += 1
    if archive and (head := head_of(result)) is not None:
        answer = RobotsAnswer(
            fingerprint(job.url), job.url, at, head, result.body, result.truncated
        )
        commits.robots_answered(answer)
    # A certificate that did not verify will not on the next attempt, nor will an
    # address that may not be reached (a redirect into a private network): the host is
    # given up at once, its pages closed with the reason.
    bad_cert = result.outcome is FetchOutcome.CERTIFICATE_ERROR
    refused = result.outcome is FetchOutcome.REFUSED
    stats.certificate_errors += bad_cert
    stats.refused_addresses += refused
    # The slot of the host that answered: the host's, or its robots.txt's hop target's.
    status, slot = result.status, scheduler.paced(job.host)
    striking = slot is not None and slot.pace is not None and slot.pace.strikes > 0
    if status in BACKOFF_STATUSES or (status is not None and status < 500 and striking):
        # Heard as a page's answer is, where it speaks of the server's load: a 503's
        # strike holds the address (not this host's retries of its robots.txt), and an
        # answer after a run of them ends it.
        scheduler.heard(job.host, result.latency, status, asked=asked)
    # What the host's URLs (or those of the scheme, when its other goes on) are
    # closed with, once its rules cannot be had.
    reason = (result.detail if bad_cert or refused else None) or ROBOTS_UNREACHABLE
    decision = scheduler.robots_answer(
        job.host,
        now,
        status=result.status,
        location=result.location,
        body=result.body,
        final=bad_cert or refused,
        asked=asked,
        reason=reason,
        rules=rules,
        no_connection=made_no_connection(result),
    )
    if decision is None:
        return False
    slot = scheduler.slot(job.host)
    if slot is not None and slot.robots_state is HostRobots.GIVEN_UP:
        stats.robots_given_up += 1
        commits.close_host(job.host, reason)
        return True
    if slot is not None and slot.robots_fetch is not None and not decision.temporary:
        commits.found(sitemaps.named_by_robots(slot.robots_fetch, decision.rules))
        # Kept for a restart (store/robotskept.py): the body of a 2xx, else nothing
        # restricts (a 4xx, a redirect past the limit).
        ok = status is not None and 200 <= status < 300
        kept = RobotsKept(slot.host, slot.robots_scheme, time.time(), result.body if ok else None)
        commits.robots_known(kept)
    return False


def robots_kept(shard: Shard, host: str, scheme: str) -> tuple[float, bytes | None] | None:
    """What an earlier run kept of ``host``'s robots.txt of ``scheme``: its age, its body."""
    kept = shard.robots_kept(host, scheme)
    return None if kept is None else (time.time() - kept.at, kept.body)
