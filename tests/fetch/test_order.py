"""Crawl order in the politeness scheduler (--order), driven by hand with explicit times:
which ready host goes next and which of its URLs, never at politeness's expense."""

from __future__ import annotations

import math
import random
import zlib
from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ubipy.config import CrawlOrder
from ubipy.fetch import ranking
from ubipy.fetch.duehosts import OLDEST_EVERY
from ubipy.fetch.politeness import Entry, JobKind, Scheduler
from ubipy.fetch.slots import HostSlot
from ubipy.fetch.windows import Windows


def _entry(host: str, n: int, score: float = 0.0) -> Entry:
    return Entry(
        fp=zlib.crc32(f"{host}/{n}".encode()),
        seq=n,
        url=f"http://{host}/p{n}",
        depth=1,
        score=score,
    )


class Disk:
    """The shard's frontier as the scheduler's loader sees it: pending entries by host,
    the best first under a ranked order."""

    def __init__(self, order: CrawlOrder) -> None:
        self.order = order
        self.rows: dict[str, list[Entry]] = {}

    def put(self, host: str, entry: Entry) -> Entry:
        self.rows.setdefault(host, []).append(entry)
        return entry

    def done(self, entry: Entry) -> None:
        host = entry.url.split("/")[2]
        self.rows[host] = [e for e in self.rows[host] if e.fp != entry.fp]

    def load(self, host: str, after: int, limit: int) -> list[Entry]:
        rows = self.rows.get(host, [])
        if self.order.ranked:
            return sorted(rows, key=lambda e: (-e.score, e.seq))[:limit]
        return [e for e in rows if e.seq > after][:limit]


def _scheduler(order: CrawlOrder, disk: Disk, *, window: int = 64, delay: float = 1.0) -> Scheduler:
    return Scheduler(delay=delay, window=window, loader=disk.load, order=order)


def _robots(s: Scheduler, now: float, hosts: int) -> None:
    """Answer every host's robots.txt (allow all)."""
    for _ in range(hosts):
        job = s.next_job(now)
        assert job is not None and job.kind is JobKind.ROBOTS
        s.robots_answer(job.host, now, status=404, location=None, body=b"")


def _drain(
    s: Scheduler, disk: Disk, start: float, *, limit: int = 10_000, step: float = 0.01
) -> list[tuple[float, str]]:
    """Fetch everything, one request at a time over all hosts; (time, url) in order."""
    out: list[tuple[float, str]] = []
    now = start
    for _ in range(limit):
        job = s.next_job(now)
        if job is None:
            wake = s.next_wakeup()
            if wake is None:
                return out
            now = max(now, wake)
            continue
        assert job.entry is not None
        out.append((now, job.url))
        disk.done(job.entry)
        now += step
        s.finished(job.host, now)
    raise AssertionError("did not finish")


def test_a_ranked_order_takes_a_hosts_best_url_first_oldest_among_equals() -> None:
    disk = Disk(CrawlOrder.OPIC)
    s = _scheduler(CrawlOrder.OPIC, disk)
    for n, score in enumerate([0.5, 2.0, 1.0, 2.0, 0.1]):
        s.add("a.test", disk.put("a.test", _entry("a.test", n, score)))
    _robots(s, 0.0, 1)
    urls = [u for _, u in _drain(s, disk, 1.0)]
    assert urls == [f"http://a.test/p{n}" for n in (1, 3, 2, 0, 4)]


def test_bfs_keeps_admission_order_whatever_the_scores() -> None:
    disk = Disk(CrawlOrder.BFS)
    s = _scheduler(CrawlOrder.BFS, disk)
    for n, score in enumerate([0.5, 2.0, 1.0]):
        s.add("a.test", disk.put("a.test", _entry("a.test", n, score)))
    _robots(s, 0.0, 1)
    assert [u for _, u in _drain(s, disk, 1.0)] == [f"http://a.test/p{n}" for n in range(3)]


def test_among_ready_hosts_the_one_holding_the_richest_url_goes_first() -> None:
    disk = Disk(CrawlOrder.OPIC)
    s = _scheduler(CrawlOrder.OPIC, disk)
    for host, score in [("a.test", 1.0), ("b.test", 5.0), ("c.test", 3.0)]:
        s.add(host, disk.put(host, _entry(host, 0, score)))
    _robots(s, 0.0, 3)
    # All three are ready at 1.0 (the delay after robots.txt): by cash, not by arrival.
    hosts = [s.next_job(1.0) for _ in range(3)]
    assert [j.host for j in hosts if j is not None] == ["b.test", "c.test", "a.test"]


@pytest.mark.parametrize("order", [CrawlOrder.OPIC, CrawlOrder.BIG_SITE_FIRST])
def test_a_host_without_cash_gets_turns_while_richer_ones_are_always_ready(
    order: CrawlOrder,
) -> None:
    """Connections, not delays, bound this crawl: 20 hosts rich in cash (and in URLs)
    are ready at every choice. The poor host (what only its sitemap listed) was never
    chosen until they were done: 1,000 requests (a review: never, on a web that keeps
    growing). Now one choice in OLDEST_EVERY goes to the host that waited longest."""
    disk = Disk(order)
    s = _scheduler(order, disk, window=8)
    rich = [f"r{i}.test" for i in range(20)]
    for host in rich:
        for n in range(50):
            s.add(host, disk.put(host, _entry(host, n, 1.0)))
    for n in range(3):
        s.add("poor.test", disk.put("poor.test", _entry("poor.test", n)))
    _robots(s, 0.0, 21)
    # Each request takes 0.2 s, one at a time: a rich host is ready again long before
    # the other 19 have had theirs.
    fetched = [u for _, u in _drain(s, disk, 1.0, step=0.2)]
    poor = [i for i, url in enumerate(fetched) if "poor.test" in url]
    assert poor[0] < 2 * OLDEST_EVERY
    assert poor[-1] < 20 * OLDEST_EVERY  # each of its turns comes, not only the first


def test_a_held_host_chosen_as_the_longest_waiting_is_parked_once() -> None:
    # Parked, a host stays armed: its place in the other ready queue was live still,
    # and it was chosen and parked a second time (a review).
    disk = Disk(CrawlOrder.OPIC)
    s = _scheduler(CrawlOrder.OPIC, disk)
    hosts = [f"h{i}.test" for i in range(OLDEST_EVERY + 2)]
    for i, host in enumerate(hosts):  # h0 the richest
        s.add(host, disk.put(host, _entry(host, 0, float(len(hosts) - i))))
    robots = [s.next_job(0.0) for _ in hosts]
    # h0's robots.txt answered first: it comes up first, and has waited longest.
    for job in sorted((j for j in robots if j is not None), key=lambda j: j.host != "h0.test"):
        s.robots_answer(
            job.host, 0.0 if job.host == "h0.test" else 0.1, status=404, location=None, body=b""
        )
    s.hold(lambda host: host == "h0.test")
    jobs = [s.next_job(2.0) for _ in hosts]
    assert sorted(j.host for j in jobs if j is not None) == sorted(hosts[1:])
    assert [slot.host for slot in s._parked] == ["h0.test"]


def test_big_site_first_takes_the_host_with_most_waiting() -> None:
    disk = Disk(CrawlOrder.BIG_SITE_FIRST)
    s = _scheduler(CrawlOrder.BIG_SITE_FIRST, disk, window=2)
    for host, n in [("small.test", 1), ("big.test", 5), ("mid.test", 3)]:
        for i in range(n):
            s.add(host, disk.put(host, _entry(host, i)))
    _robots(s, 0.0, 3)
    jobs = [s.next_job(1.0) for _ in range(3)]
    assert [j.host for j in jobs if j is not None] == ["big.test", "mid.test", "small.test"]
    # Within a host: oldest first.
    assert jobs[0] is not None and jobs[0].url == "http://big.test/p0"


def test_a_credit_moves_a_url_in_memory_up_at_once() -> None:
    disk = Disk(CrawlOrder.OPIC)
    s = _scheduler(CrawlOrder.OPIC, disk)
    entries = [disk.put("a.test", _entry("a.test", n, 1.0)) for n in range(3)]
    for e in entries:
        s.add("a.test", e)
    _robots(s, 0.0, 1)
    s.credit("a.test", entries[2].fp, 0.5)
    job = s.next_job(1.0)
    assert job is not None and job.url == "http://a.test/p2"
    # Its score now holds the credit: its links share 1.5.
    assert job.entry is not None and job.entry.score == pytest.approx(1.5)


def test_a_full_window_keeps_the_best_and_a_retry_goes_first() -> None:
    disk = Disk(CrawlOrder.OPIC)
    s = _scheduler(CrawlOrder.OPIC, disk, window=2)
    for n, score in enumerate([1.0, 2.0, 3.0, 0.5]):
        s.add("a.test", disk.put("a.test", _entry("a.test", n, score)))
    _robots(s, 0.0, 1)
    job = s.next_job(1.0)
    # p2 (3.0) came when the window held p0 and p1: it took p0's place.
    assert job is not None and job.entry is not None and job.url == "http://a.test/p2"
    s.retry("a.test", job.entry, 1.1, wait=5.0)
    assert s.next_job(2.2) is None  # the retry's wait holds the host
    again = s.next_job(6.1)
    assert again is not None and again.url == "http://a.test/p2"
    disk.done(again.entry)  # type: ignore[arg-type]
    s.finished("a.test", 6.2)
    rest = [u for _, u in _drain(s, disk, 7.2)]
    assert rest == ["http://a.test/p1", "http://a.test/p0", "http://a.test/p3"]


def test_a_full_window_still_takes_a_better_url_after_new_pageranks() -> None:
    """A full window turns away what is no better than its worst without looking
    (most links of a crawl); new PageRanks can lower every score in it, and a URL
    better than the new worst must then get in."""
    disk = Disk(CrawlOrder.PAGERANK)
    s = _scheduler(CrawlOrder.PAGERANK, disk, window=2)
    p = [disk.put("a.test", _entry("a.test", n, score)) for n, score in enumerate([2.0, 2.0])]
    for e in p:
        s.add("a.test", e)
    for n, score in [(2, 1.0), (3, 1.5)]:  # no better than the window's worst: on disk
        s.add("a.test", disk.put("a.test", _entry("a.test", n, score)))
    s.rescore({p[0].fp: 0.1, p[1].fp: 0.2})
    late = disk.put("a.test", _entry("a.test", 4, 1.0))
    s.add("a.test", late)
    _robots(s, 0.0, 1)
    job = s.next_job(1.0)
    assert job is not None and job.url == late.url


@pytest.mark.parametrize("order", list(CrawlOrder))
@pytest.mark.parametrize("seed", range(5))
def test_every_order_fetches_everything_once_with_the_delay(order: CrawlOrder, seed: int) -> None:
    rng = random.Random(seed)
    disk = Disk(order)
    s = _scheduler(order, disk, window=4, delay=0.5)
    hosts = [f"h{i}.test" for i in range(6)]
    admitted = []
    for n in range(120):
        host = rng.choice(hosts)
        entry = disk.put(host, _entry(host, n, rng.random()))
        admitted.append(entry.url)
        s.add(host, entry)
    _robots(s, 0.0, len(hosts))
    fetched = _drain(s, disk, 0.5)
    assert sorted(u for _, u in fetched) == sorted(admitted)
    last: dict[str, float] = {}
    for at, url in fetched:
        host = url.split("/")[2]
        if host in last:
            assert at - last[host] >= 0.5 - 1e-9  # 0.01 s in flight, then the delay
        last[host] = at + 0.01
    assert s.idle()


@given(
    scores=st.lists(st.sampled_from([0.0, 0.5, 1.0, 2.5]), min_size=1, max_size=20),
    credited=st.dictionaries(
        st.integers(0, 19), st.sampled_from([0.5, 1.5, ranking.FIRST]), max_size=6
    ),
)
def test_a_window_is_searched_as_its_scores_say(
    scores: list[float], credited: dict[int, float]
) -> None:
    """The best is the oldest of the highest (credit and retries counted), the worst the
    newest of the lowest, whatever the ties."""
    window = deque(_entry("a.test", n, s) for n, s in enumerate(scores))
    credit = {window[i].fp: c for i, c in credited.items() if i < len(window)}
    total = [
        math.inf if credit.get(e.fp) == ranking.FIRST else e.score + credit.get(e.fp, 0.0)
        for e in window
    ]
    oldest_best = next(i for i, s in enumerate(total) if s == max(total))
    newest_worst = max(i for i, s in enumerate(total) if s == min(total))
    assert ranking.best_score(window, credit) == max(total)
    assert ranking.worst(window, credit) == (newest_worst, min(total))
    expected = window[oldest_best]
    taken = ranking.pop_best(window, credit)
    assert taken.fp == expected.fp and len(window) == len(scores) - 1
    assert taken.score == (total[oldest_best] if total[oldest_best] != math.inf else expected.score)
    assert taken.fp not in credit


@pytest.mark.parametrize("seed", range(4))
def test_a_window_hands_out_its_best_however_it_changed_since_the_host_came_due(
    seed: int,
) -> None:
    """Where a host's best entry is, found when it came due, serves its pop; every
    change to the window in between (an entry added or replaced, a credit, a retry
    put back, new scores) forgets it: the entry handed out is the best of the window
    as it is, as a search at the pop finds it. Random changes, 500 windows a seed."""
    rng = random.Random(seed)
    for _ in range(500):
        disk: list[Entry] = []

        def load(host: str, after: int, limit: int, disk: list[Entry] = disk) -> list[Entry]:
            return disk[:limit]

        windows = Windows(window=rng.randint(2, 6), loader=load, max_in_memory=100, ranked=True)
        slot = HostSlot("a.test", 1.0)
        taken: list[Entry] = []
        for seq in range(1, 40):
            op, score = (
                rng.choice(["add", "add", "credit", "pop", "put_back", "rescore"]),
                rng.random(),
            )
            if op == "pop":
                if slot.queue:
                    expected = slot.queue[ranking.best(slot.queue, slot.credit)[0]]
                    entry = windows.pop(slot)
                    assert entry is not None and entry.fp == expected.fp
                    disk[:] = [e for e in disk if e.fp != entry.fp]
                    taken.append(entry)
                continue
            windows.priority(slot, CrawlOrder.OPIC)  # it came due before the change
            if op == "add":
                entry = _entry("a.test", seq, score)._replace(seq=seq)
                disk.append(entry)
                windows.add(slot, entry)
            elif op == "credit" and slot.queue:
                windows.credit(slot, rng.choice(slot.queue).fp, score)
            elif op == "put_back" and taken:
                windows.put_back(slot, taken.pop())
            elif op == "rescore":
                windows.rescore([slot], {e.fp: rng.random() for e in slot.queue})


def test_credits_for_pages_not_in_a_hosts_window_are_not_kept() -> None:
    """Each page links to the 50 before it, all fetched already: their credits were
    kept for ever by a host whose work fits its window (never refilled from disk, which
    dropped them): 20,000 for a window of 1 (found by a review). The shard holds the
    scores of entries not in the window; only the window's need theirs."""
    s = Scheduler(delay=1.0, window=64, loader=lambda h, a, n: [], order=CrawlOrder.OPIC)
    s.add("a.test", Entry(fp=1, seq=1, url="http://a.test/", depth=1, score=1.0))
    s.next_job(0.0)
    s.robots_answer("a.test", 0.0, status=404, location=None, body=b"")
    t = 1.0
    for n in range(2, 5_002):
        s.add("a.test", Entry(fp=n, seq=n, url=f"http://a.test/{n}", depth=1, score=1.0))
        job = s.next_job(t)
        assert job is not None
        s.finished(job.host, t)
        t += 1
        for old in range(max(1, n - 50), n):
            s.credit("a.test", old, 0.01)
    slot = s.slot("a.test")
    assert slot is not None and len(slot.queue) <= 1
    assert len(slot.credit) <= 2 * len(slot.queue) + 64 + 1
