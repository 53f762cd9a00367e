"""What a request costs the politeness scheduler when many hosts share one IP address.

    python bench/shared_ip.py                       # 10, 50, 200 and 1000 hosts, bfs and opic
    python bench/shared_ip.py --hosts 5000 --order opic

Shared hosting puts thousands of sites on one server, and the per-IP rule (one request
in flight per address, ``--ip-delay`` between two) makes them wait for each other. The
scheduler alone, in process, nothing fetched: every host resolves to one address, holds
60 URLs in its window (64 at most) and answers robots.txt with a 404; requests are taken
as the crawler's dispatcher takes them (every job that may start now, then their ends)
and each ends at once. Reported: the scheduler's time a page request, next_job and
finished together, in microseconds of wall time (on an idle core, its CPU time).
"""

from __future__ import annotations

import argparse
import random
import time

from ubipy.config import CrawlOrder
from ubipy.fetch import Entry, JobKind, Scheduler

_PER_HOST = 60


def run(hosts: int, order: CrawlOrder, seed: int = 1) -> float:
    """Microseconds of the scheduler's time a page request, ``hosts`` on one address."""
    rng = random.Random(seed)
    s = Scheduler(
        delay=0.0, window=64, loader=lambda host, after, limit: [], resolve=lambda host: True,
        order=order,
    )  # fmt: skip
    seq = 0
    for h in range(hosts):
        for _ in range(_PER_HOST):
            seq += 1
            s.add(f"h{h}.test", Entry(seq, seq, f"http://h{h}.test/{seq}", 1, score=rng.random()))
    wanted = min(3000, hosts * _PER_HOST // 2)
    now, pages, elapsed = 0.0, 0, 0.0
    while pages < wanted:
        started = time.perf_counter()
        jobs = []
        while (job := s.next_job(now)) is not None:
            jobs.append(job)
        for job in jobs:
            if job.kind is JobKind.RESOLVE:
                s.resolved(job.host, "192.0.2.1", until=1e9)
            elif job.kind is JobKind.ROBOTS:
                s.robots_answer(job.host, now, status=404, location=None, body=b"")
            else:
                pages += 1
                s.finished(job.host, now)
        elapsed += time.perf_counter() - started
        if not jobs:
            now += 0.001
            if now > 60.0:  # a minute of the scheduler's time with nothing to hand out
                raise RuntimeError(f"the scheduler stopped at {pages} of {wanted} requests")
    return elapsed / pages * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, action="append", help="hosts on the address")
    parser.add_argument(
        "--order", choices=[o.value for o in CrawlOrder], action="append", help="crawl order"
    )
    args = parser.parse_args()
    orders = [CrawlOrder(o) for o in args.order or ("bfs", "opic")]
    for order in orders:
        for hosts in args.hosts or (10, 50, 200, 1000):
            cost = run(hosts, order)
            print(
                f"--order {order.value:5} {hosts:6,} hosts on one address: {cost:9.1f} us a request"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
