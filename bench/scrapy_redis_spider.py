"""The scrapy-redis side of `bench/scaling.py`: one of N Scrapy processes sharing a Redis queue.

Each process runs the same spider as `bench/scrapy_spider.py` (every link followed, pages
and titles to a JSON Lines feed) with scrapy-redis's scheduler and duplicate filter, so the
N processes share one request queue and one set of seen fingerprints in Redis: the usual
way to spread a Scrapy crawl over several processes or machines. The start URL is pushed
to Redis by the harness; whichever process pops it first starts the crawl. The shared
queue is FIFO (breadth-first) by default: scrapy-redis's own default, a priority queue,
hands out requests of equal priority in the order of their serialised bytes, that is by
URL, so one host's pages come in a row and each waits out the host's delay.

    python -m bench.scrapy_redis_spider --redis-url redis://127.0.0.1:PORT \\
        --proxy http://127.0.0.1:PORT --concurrency 2 --delay 0.27 --name s0 \\
        --feed out.jsonl --result res.json

Politeness is what Scrapy offers: CONCURRENT_REQUESTS_PER_DOMAIN=1 and DOWNLOAD_DELAY,
both *per process* (Scrapy has no shared per-host state): two processes may well ask one
host at the same time. DOWNLOAD_DELAY counts from the start of the previous request
(ubipy's delay from its end), so the harness passes delay + the longest latency.
Each process names itself in its User-Agent (`peer=NAME`), so the synthetic web's log
tells the processes apart. Prints `ready` when its spider is open.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import scrapy
from scrapy import signals
from scrapy.crawler import Crawler, CrawlerProcess
from scrapy.settings import default_settings
from scrapy_redis.spiders import RedisMixin

from bench.scrapy_spider import SynthSpider, _check_loopback, _cpu
from bench.scrapy_spider import settings as base_settings

START_KEY = "synth:start_urls"


class SynthRedisSpider(RedisMixin, SynthSpider):
    """SynthSpider whose start URLs and requests live in Redis."""

    redis_key = START_KEY

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> SynthRedisSpider:
        spider: SynthRedisSpider = super().from_crawler(crawler, *args, **kwargs)
        spider.setup_redis(crawler)
        return spider

    async def start(self) -> AsyncIterator[Any]:
        """Scrapy >= 2.13 reads `start()`, not scrapy-redis's `start_requests()`: without
        this, every process would fetch the spider's own start URL."""
        for request in self.next_requests():
            yield request


QUEUES = {
    # scrapy-redis's default: a sorted set by priority; equal priorities (all of them
    # here) come out in the order of the serialised requests' bytes, i.e. by URL, so
    # one host's pages come in a row and wait on its delay.
    "priority": "scrapy_redis.queue.PriorityQueue",
    "fifo": "scrapy_redis.queue.FifoQueue",  # breadth-first: hosts interleave
    "lifo": "scrapy_redis.queue.LifoQueue",
}


def settings(
    *, redis_url: str, concurrency: int, delay: float, name: str, feed: str, queue: str = "fifo"
) -> dict[str, Any]:
    out = base_settings(concurrency, feed)
    if hasattr(default_settings, "DOWNLOAD_DELAY_JITTER"):  # newer Scrapy
        out["DOWNLOAD_DELAY_JITTER"] = 0
    else:
        out["RANDOMIZE_DOWNLOAD_DELAY"] = False
    out.update(
        {
            "SCHEDULER": "scrapy_redis.scheduler.Scheduler",
            "SCHEDULER_QUEUE_CLASS": QUEUES[queue],
            "DUPEFILTER_CLASS": "scrapy_redis.dupefilter.RFPDupeFilter",
            # The harness starts a fresh Redis per run: nothing to flush, and a process
            # that stops first must not empty the queue under the others.
            "SCHEDULER_PERSIST": True,
            "REDIS_URL": redis_url,
            "DOWNLOAD_DELAY": delay,
            "USER_AGENT": f"Scrapy/{scrapy.__version__} (+https://scrapy.org); peer={name}",
        }
    )
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="One scrapy-redis process on the synthetic web.")
    p.add_argument("--redis-url", required=True)
    p.add_argument("--proxy", required=True, help="the synthetic web's proxy URL (loopback)")
    p.add_argument("--concurrency", type=int, default=2, help="requests in flight, this process")
    p.add_argument("--delay", type=float, default=0.0, help="DOWNLOAD_DELAY, start to start")
    p.add_argument("--name", default="s0", help="this process's name in its User-Agent")
    p.add_argument("--queue", choices=sorted(QUEUES), default="fifo", help="the shared queue")
    p.add_argument("--feed", required=True, help="JSON Lines output (url, title)")
    p.add_argument("--result", required=True, help="write the process's figures here (JSON)")
    args = p.parse_args(argv)
    _check_loopback(args.proxy)
    os.environ["http_proxy"] = args.proxy
    os.environ.pop("no_proxy", None)
    os.environ.pop("NO_PROXY", None)

    process = CrawlerProcess(
        settings(
            redis_url=args.redis_url,
            concurrency=args.concurrency,
            delay=args.delay,
            name=args.name,
            feed=args.feed,
            queue=args.queue,
        )
    )
    crawler: Crawler = process.create_crawler(SynthRedisSpider)
    marks: dict[str, float] = {}

    def opened() -> None:
        marks["start_wall"], marks["start_cpu"] = time.monotonic(), _cpu()
        print("ready", flush=True)

    def closed() -> None:
        marks["end_wall"], marks["end_cpu"] = time.monotonic(), _cpu()

    crawler.signals.connect(opened, signal=signals.spider_opened)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    process.crawl(crawler)
    process.start()

    stats: dict[str, Any] = crawler.stats.get_stats() if crawler.stats else {}
    responses = int(stats.get("downloader/response_count", 0))
    robots = int(stats.get("robotstxt/request_count", 0))
    result = {
        "crawler": f"Scrapy {scrapy.__version__} + scrapy-redis",
        "name": args.name,
        "pages_own": responses - robots,
        "robots_requests": robots,
        "errors": int(stats.get("downloader/exception_count", 0)),
        "crawl_wall": marks.get("end_wall", 0.0) - marks.get("start_wall", 0.0),
        "crawl_cpu": marks.get("end_cpu", 0.0) - marks.get("start_cpu", 0.0),
        "stats": {k: v for k, v in stats.items() if isinstance(v, int | float | str)},
    }
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    main()
