"""The crawler's grouped commits: what requests leave waits until a commit takes it
as one batch; a batch the shard refused goes back in front, and the next commit
writes it. Nothing here touches a disk or a clock."""

from __future__ import annotations

import dataclasses

from tests.peer.test_replica import page
from ubipy.fetch import Entry
from ubipy.fetch.urls import fingerprint
from ubipy.peer.commits import GIVEN_UP_KEPT, Answered, Commits
from ubipy.store import HttpHead, RobotsAnswer
from ubipy.store.revisits import Visit
from ubipy.store.shard import HostMark, NewURL

ROBOTS = "robots.txt unreachable"


def url(u: str, depth: int = 1) -> NewURL:
    return NewURL(fingerprint(u), u, u.split("/")[2], depth)


def robots_answer(host: str, status: int = 200) -> RobotsAnswer:
    u = f"http://{host}/robots.txt"
    return RobotsAnswer(fingerprint(u), u, 1.0, HttpHead(status, "", "HTTP/1.1", ()), b"x", False)


def test_nothing_waiting_is_no_batch() -> None:
    commits = Commits()
    assert not commits
    assert commits.take() is None
    assert not commits


def test_a_batch_takes_everything_waiting_in_the_order_it_came() -> None:
    commits = Commits()
    first, second = page("http://a.test/1"), page("http://a.test/2")
    commits.answered(first, [url("http://b.test/x")])
    commits.mark("a.test", HostMark(10.0, 1.0, 1))
    commits.skip(7, "robots")
    commits.answered(second)
    commits.mark("a.test", HostMark(11.0, 1.0, 2))
    commits.close_host("c.test", ROBOTS)
    commits.acked([1, 2])
    assert commits and commits.pages_waiting == 2
    batch = commits.take()
    assert batch is not None
    assert batch.answered == (Answered(first, (url("http://b.test/x"),)), Answered(second, ()))
    assert batch.pages == [first, second]
    # A host's latest mark is the one written.
    assert batch.marks == {"a.test": HostMark(11.0, 1.0, 2)}
    assert batch.skips == ((7, "robots"),)
    assert batch.closed_hosts == (("c.test", ROBOTS),)
    assert batch.acked == (1, 2)
    # Two pages and one skipped entry leave the frontier (c.test's rows are counted
    # by the shard that closes them).
    assert batch.settled == 3
    commits.committed()
    assert not commits and commits.take() is None


def test_a_batch_being_written_still_counts_as_unsaved() -> None:
    # The crawler is idle only when nothing waits and nothing is being written.
    commits = Commits()
    commits.skip(1, "robots")
    assert commits.take() is not None
    assert commits
    commits.committed()
    assert not commits


def test_a_failed_commit_puts_everything_back_and_the_next_commit_writes_it() -> None:
    commits = Commits()
    old = page("http://a.test/old")
    commits.answered(old, [url("http://a.test/found")])
    commits.skip(1, "robots")
    commits.mark("a.test", HostMark(10.0, 1.0, 1))
    commits.mark("b.test", HostMark(10.0, 2.0, 5))
    commits.close_host("c.test", ROBOTS)
    commits.acked([100])
    commits.robots_answered(robots_answer("a.test"))
    refused = commits.take()
    assert refused is not None
    # While the shard refuses the write, more requests end.
    new = page("http://a.test/new")
    commits.answered(new)
    commits.skip(2, "robots")
    commits.mark("a.test", HostMark(12.0, 1.0, 2))
    commits.close_host("d.test", ROBOTS)
    commits.acked([101])
    commits.robots_answered(robots_answer("d.test", 503))
    commits.failed()
    assert commits.pages_waiting == 2
    # The robots.txt bodies wait in memory as the pages' do.
    assert commits.bytes_waiting == 2 + len(old.body or b"") + len(new.body or b"")

    retry = commits.take()
    assert retry is not None
    # What was refused comes first, then what came since.
    assert retry.answered == (*refused.answered, Answered(new, ()))
    assert retry.skips == ((1, "robots"), (2, "robots"))
    assert retry.closed_hosts == (("c.test", ROBOTS), ("d.test", ROBOTS))
    assert retry.acked == (100, 101)
    assert retry.robots_answers == (robots_answer("a.test"), robots_answer("d.test", 503))
    # a.test's later mark wins; b.test's, refused, is not lost.
    assert retry.marks == {"a.test": HostMark(12.0, 1.0, 2), "b.test": HostMark(10.0, 2.0, 5)}
    commits.committed()
    assert not commits


def test_a_urls_latest_tries_are_written_and_a_refused_count_is_not_lost() -> None:
    commits = Commits()
    commits.tried(Entry(1, 1, "http://a.test/1", 1, attempt=1))
    commits.tried(Entry(2, 2, "http://a.test/2", 1, attempt=1, free=1))
    refused = commits.take()
    assert refused is not None and refused.tries == {1: (1, 0), 2: (1, 1)}
    commits.tried(Entry(1, 1, "http://a.test/1", 1, attempt=2))  # failed again since
    commits.failed()
    retry = commits.take()
    assert retry is not None and retry.tries == {1: (2, 0), 2: (1, 1)}
    commits.committed()
    assert not commits
    assert commits.tries == {1: (2, 0), 2: (1, 1)}  # what a window's load counts on


def test_a_url_settled_owes_its_tries_no_more() -> None:
    """Answered or closed, its tries go from memory and its row from the shard: kept,
    they grew for a whole crawl and a URL reopened later was given up early."""
    commits = Commits()
    answered = page("http://a.test/1")
    commits.tried(Entry(answered.fp, 1, answered.url, 1, attempt=1))
    commits.tried(Entry(2, 2, "http://a.test/2", 1, attempt=1))
    assert commits.take() is not None
    commits.committed()
    commits.answered(answered)
    commits.skip(2, ROBOTS)
    commits.skip(3, ROBOTS)  # never tried: nothing to forget
    batch = commits.take()
    assert batch is not None and batch.untried == (answered.fp, 2) and not batch.tries
    assert commits.tries == {}


def test_a_call_then_waits_for_what_waits_now_to_be_written() -> None:
    """What a large sitemap's turn waits for (pageanswers.py): its body, kept in the
    page's record, written; not a batch taken before it came, nor a failed one."""
    commits = Commits()
    called: list[str] = []
    commits.then(lambda: called.append("at once"))  # nothing waits
    assert called == ["at once"]
    commits.skip(1, "robots")
    commits.then(lambda: called.append("first"))
    assert commits.take() is not None
    commits.then(lambda: called.append("second"))  # came while the batch was written
    commits.failed()
    assert called == ["at once"]
    assert commits.take() is not None
    commits.committed()
    assert called == ["at once", "first", "second"]
    for more in (True, False):
        commits.skip(2, "robots")
        commits.then(lambda: called.append("third"))
        assert commits.take() is not None
        commits.then(lambda: called.append("fourth"))  # came while it was written
        if more:
            commits.skip(3, "robots")
        commits.committed()
        if more:  # it waits for what came with it
            assert called[-1] == "third"
            assert commits.take() is not None
            commits.committed()
        assert called[-2:] == ["third", "fourth"]


def test_a_refused_batch_can_fail_again_and_again_without_losing_anything() -> None:
    commits = Commits()
    commits.answered(page("http://a.test/"))
    for _ in range(3):
        assert commits.take() is not None
        commits.failed()
    batch = commits.take()
    assert batch is not None and batch.pages == [page("http://a.test/")]


def test_a_host_closed_in_the_same_batch_as_urls_found_for_it() -> None:
    """The commit that once drove the pending count to -1: gone.test is given up while
    other.test's page, in the same commit, links to gone.test. The batch keeps both
    together, also when the first try is refused and the page comes after it; the
    crawler writes a batch's closes before its new rows (tests/peer/test_crawler.py
    checks the count on a shard)."""
    found = url("http://gone.test/found")
    commits = Commits()
    commits.close_host("gone.test", ROBOTS)
    assert commits.take() is not None
    commits.answered(page("http://other.test/"), [found])
    commits.failed()
    batch = commits.take()
    assert batch is not None
    assert batch.closed_hosts == (("gone.test", ROBOTS),)
    assert [a.discovered for a in batch.answered] == [(found,)]
    assert batch.settled == 1


def test_the_bodies_waiting_are_counted_until_a_batch_takes_them() -> None:
    # The crawler commits when they reach COMMIT_BYTES: a batch of --max-body pages
    # would otherwise hold commit_every_pages bodies in memory.
    commits = Commits()
    commits.answered(dataclasses.replace(page("http://a.test/1"), body=b"x" * 1000))
    commits.answered(page("http://a.test/2"))  # no body kept
    commits.refreshed(None, Visit(1, 2.0, 200, True, "d", body=b"y" * 500))
    assert commits.bytes_waiting == 1500
    assert commits.take() is not None
    assert commits.bytes_waiting == 0
    commits.answered(dataclasses.replace(page("http://a.test/3"), body=b"z" * 10))
    # A batch the shard refused comes back, its bodies with it.
    commits.failed()
    assert commits.bytes_waiting == 1510


def test_a_hosts_mark_not_yet_written_is_known_until_it_is() -> None:
    # A forgotten host's new slot asks for its mark: one waiting for a commit (the
    # shard refusing writes) or in one is newer than the shard's.
    commits = Commits()
    assert commits.mark_of("a.test") is None
    commits.mark("a.test", HostMark(10.0, 1.0, 1))
    assert commits.mark_of("a.test") == HostMark(10.0, 1.0, 1)
    commits.take()
    assert commits.mark_of("a.test") == HostMark(10.0, 1.0, 1)  # being written
    commits.mark("a.test", HostMark(11.0, 1.0, 2))
    assert commits.mark_of("a.test") == HostMark(11.0, 1.0, 2)
    commits.failed()
    assert commits.mark_of("a.test") == HostMark(11.0, 1.0, 2)
    commits.take()
    commits.committed()
    assert commits.mark_of("a.test") is None  # the shard has it now


def test_the_reasons_of_hosts_given_up_are_kept_for_the_latest_only() -> None:
    # Kept for the run, a crawl meeting millions of dead hosts grew by one a host for
    # ever, long after their slots were forgotten (a review).
    commits = Commits()
    for n in range(GIVEN_UP_KEPT + 10):
        commits.close_host(f"h{n}.test", "robots.txt unreachable")
    commits.close_host("h3.test", "certificate error")  # given up again: the latest
    assert len(commits.given_up) == GIVEN_UP_KEPT
    assert "h10.test" not in commits.given_up and "h11.test" in commits.given_up
    assert commits.given_up["h3.test"] == "certificate error"
