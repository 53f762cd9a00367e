"""The crawler's count of URLs pending, which tells a peer (and the demo) when the
crawl is done: it must come back to 0 whatever order things are saved in."""

from __future__ import annotations

from pathlib import Path

from tests.peer.test_handoff import crawler_at
from tests.peer.test_replica import page
from ubipy.fetch.politeness import HostRobots, JobKind
from ubipy.fetch.urls import fingerprint
from ubipy.peer.crawler import _Outcome
from ubipy.store.shard import NewURL


async def test_urls_found_for_a_host_given_up_in_the_same_commit_are_counted_once(
    tmp_path: Path,
) -> None:
    gone, other = "gone.test", "other.test"
    async with crawler_at(tmp_path) as c:
        c.seed([f"http://{gone}/", f"http://{other}/"])
        assert c.pending == 2
        # gone.test's robots.txt never answers: the scheduler gives the host up.
        s = c.scheduler
        now = 0.0
        while (slot := s.slot(gone)) is None or slot.robots_state is not HostRobots.GIVEN_UP:
            wake = s.next_wakeup()
            assert wake is not None
            now = max(now, wake)
            job = s.next_job(now)
            assert job is not None
            if job.host == gone:
                assert job.kind is JobKind.ROBOTS
                s.robots_answer(gone, now, status=503, location=None, body=b"")
        # In one commit: the host given up, and other.test's page, which links to a
        # new URL of gone.test.
        link = f"http://{gone}/found"
        c._host_skips.append((gone, "robots.txt unreachable"))
        c._outcomes.append(
            _Outcome(page(f"http://{other}/"), [NewURL(fingerprint(link), link, gone, 1)])
        )
        assert c._flush() and c._flush()
        assert c._shard.pending_count(gone) == 0 and c._shard.pending_count(other) == 0
        assert c.pending == 0
