"""The Scrapy side of `bench/speed.py`: a spider that crawls the synthetic web like ubipy.

It follows every link of `a`, `area`, `frame` and `iframe` on HTML responses (any
extension: images and PDFs are fetched too, as ubipy does), skips `rel=nofollow` links
and pages under a meta robots `nofollow` (ubipy respects both, so both crawl the same
pages), and yields `{"url", "title"}` for every response to a JSON Lines feed.

Run by `bench/speed.py` as a child process, so its CPU time and peak RSS are its own:

    python bench/scrapy_spider.py --seed-url http://h000.synth.test/ \\
        --proxy http://127.0.0.1:PORT --concurrency 64 --feed out.jsonl --result res.json

`scrapy runspider bench/scrapy_spider.py -a seed=URL -s ...` works as well.
Loopback only: the proxy must be a loopback address.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import resource
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import scrapy
from scrapy import signals
from scrapy.core.downloader.handlers.http11 import HTTP11DownloadHandler
from scrapy.crawler import Crawler, CrawlerProcess
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor


class SynthSpider(scrapy.Spider):
    name = "synth"
    allowed_domains = ["synth.test"]  # noqa: RUF012 - Scrapy's own attribute

    def __init__(
        self, seed: str = "http://h000.synth.test/", normalize: str = "1", **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.start_urls = [seed]
        self.normalize = normalize not in ("0", "false", "no")
        self.links = LinkExtractor(
            tags=("a", "area", "frame", "iframe"),
            attrs=("href", "src"),
            deny_extensions=[],  # follow every link, as ubipy does
            unique=True,
        )

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        if not isinstance(response, TextResponse) or b"html" not in (
            response.headers.get("Content-Type") or b""
        ):
            yield {"url": response.url, "title": None}
            return
        yield {"url": response.url, "title": response.css("title::text").get()}
        robots = " ".join(
            response.xpath(
                "//meta[translate(@name, 'ROBTS', 'robts') = 'robots']/@content"
            ).getall()
        ).lower()
        if "nofollow" in robots or "none" in robots:
            return
        for link in self.links.extract_links(response):
            if not link.nofollow:
                yield response.follow(self.canonical(link.url), callback=self.parse)

    def canonical(self, url: str) -> str:
        """Lower-case host, no explicit default port, as ubipy normalises. Scrapy's own
        dupefilter keeps them apart, so one `:80` link makes it crawl a site twice."""
        if not self.normalize:
            return url
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        if parts.port is not None and parts.port != (443 if parts.scheme == "https" else 80):
            host = f"{host}:{parts.port}"
        return urlunsplit((parts.scheme, host, parts.path or "/", parts.query, ""))


class KeepAliveHandler(HTTP11DownloadHandler):
    """Scrapy's HTTP/1.1 handler keeping as many idle connections as requests in flight.

    The stock handler keeps CONCURRENT_REQUESTS_PER_DOMAIN (here 1) idle connections per
    pool key, and behind an HTTP proxy every request has the same key (the proxy), so it
    opens a new TCP connection for almost every request. ubipy keeps its connections to
    the proxy alive; so does this handler, for a like-for-like comparison.
    """

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self._pool.maxPersistentPerHost = crawler.settings.getint("CONCURRENT_REQUESTS")


def settings(concurrency: int, feed: str, *, keep_alive: bool = True) -> dict[str, Any]:
    """The issue's settings plus what makes the run comparable with ubipy's."""
    handlers = {"http": f"{__name__}.KeepAliveHandler"} if keep_alive else {}
    return {
        "DOWNLOAD_HANDLERS": handlers,
        "CONCURRENT_REQUESTS": concurrency,
        "CONCURRENT_REQUESTS_PER_DOMAIN": 1,
        "DOWNLOAD_DELAY": 0,
        "ROBOTSTXT_OBEY": True,
        "DEPTH_LIMIT": 0,
        "REDIRECT_ENABLED": True,
        "LOG_LEVEL": "WARNING",
        "TELNETCONSOLE_ENABLED": False,
        "FEEDS": {feed: {"format": "jsonlines", "fields": ["url", "title"], "overwrite": True}},
    }


def _check_loopback(proxy: str) -> None:
    host = urlsplit(proxy).hostname or ""
    if not ipaddress.ip_address(host).is_loopback:
        raise SystemExit(f"the proxy must be on loopback, not {host!r}")


def _cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description="Crawl the synthetic web with Scrapy.")
    p.add_argument("--seed-url", required=True)
    p.add_argument("--proxy", required=True, help="the synthetic web's proxy URL (loopback)")
    p.add_argument("--concurrency", type=int, default=64)
    p.add_argument("--feed", required=True, help="JSON Lines output (url, title)")
    p.add_argument("--result", required=True, help="write the run's figures here (JSON)")
    p.add_argument(
        "--stock-pool",
        action="store_true",
        help="Scrapy's stock connection pool (1 idle connection to the proxy)",
    )
    p.add_argument(
        "--raw-links",
        action="store_true",
        help="follow links as extracted (no host lower-casing or :80 removal)",
    )
    args = p.parse_args(argv)
    _check_loopback(args.proxy)
    # HttpProxyMiddleware reads the environment; robots.txt requests go through it too.
    os.environ["http_proxy"] = args.proxy
    os.environ.pop("no_proxy", None)
    os.environ.pop("NO_PROXY", None)

    process = CrawlerProcess(settings(args.concurrency, args.feed, keep_alive=not args.stock_pool))
    crawler: Crawler = process.create_crawler(SynthSpider)
    marks: dict[str, float] = {}

    def opened() -> None:
        marks["start_wall"], marks["start_cpu"] = time.monotonic(), _cpu()

    def closed() -> None:
        marks["end_wall"], marks["end_cpu"] = time.monotonic(), _cpu()

    crawler.signals.connect(opened, signal=signals.spider_opened)
    crawler.signals.connect(closed, signal=signals.spider_closed)
    process.crawl(crawler, seed=args.seed_url, normalize="0" if args.raw_links else "1")
    process.start()

    stats: dict[str, Any] = crawler.stats.get_stats() if crawler.stats else {}
    responses = int(stats.get("downloader/response_count", 0))
    robots = int(stats.get("robotstxt/request_count", 0))
    result = {
        "crawler": f"Scrapy {scrapy.__version__}" + (" (stock pool)" if args.stock_pool else ""),
        "pages_own": responses - robots,
        "items": int(stats.get("item_scraped_count", 0)),
        "robots_requests": robots,
        "errors": int(stats.get("downloader/exception_count", 0)),
        "crawl_wall": marks.get("end_wall", 0.0) - marks.get("start_wall", 0.0),
        "crawl_cpu": marks.get("end_cpu", 0.0) - marks.get("start_cpu", 0.0),
        "startup_cpu": marks.get("start_cpu", 0.0),
        "stats": {k: v for k, v in stats.items() if isinstance(v, int | float | str)},
    }
    with open(args.result, "w", encoding="utf-8") as f:
        json.dump(result, f, default=str)


if __name__ == "__main__":
    main()
