"""The synthetic web over HTTPS: CONNECT through the proxy, TLS with a certificate
for ``*.synth.test`` from a private CA, the same pages (links and redirects saying
https), each connection closed after a few answers; a crawler given the CA crawls it
all, once, on HTTPS only."""

from __future__ import annotations

import functools
import ssl
from pathlib import Path

import httpx2
import trio
import trustme

from tests.crawling import crawl_until_idle
from ubipy.config import CrawlConfig, FetchConfig, PolitenessConfig
from ubipy.fetch import make_client
from ubipy.store.shard import Shard
from ubipy.synthweb import Referee, SyntheticWeb, SynthServer, WebSpec, ground_truth, serve


def _server_context(ca: trustme.CA) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("*.synth.test").configure_cert(ctx)
    return ctx


async def test_the_web_over_tls_links_to_https_and_closes_after_n_answers(
    nursery: trio.Nursery,
) -> None:
    ca = trustme.CA()
    web = SyntheticWeb(WebSpec(hosts=3, pages_per_host=6))
    start = functools.partial(serve, web, tls=_server_context(ca), max_requests=2)
    server: SynthServer = await nursery.start(start)
    verify = ssl.create_default_context()
    ca.configure_trust(verify)
    async with httpx2.AsyncClient(proxy=server.proxy_url, trust_env=False, verify=verify) as c:
        home = await c.get(web.seed_url().replace("http://", "https://"))
        second = await c.get("https://h000.synth.test/robots.txt")
        plain = await c.get(web.seed_url())
    assert home.status_code == 200 and b'href="https://' in home.content
    assert b'href="http://' not in home.content and b"http://" not in home.content
    assert second.headers["connection"] == "close"  # the second answer on that connection
    assert b'href="http://' in plain.content  # plain HTTP is served as it was
    assert [r.target_path for r in server.log] == ["/", "/robots.txt", "/"]


async def test_a_crawler_with_the_ca_crawls_the_web_over_https_only(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    ca = trustme.CA()
    bundle = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    web = SyntheticWeb(WebSpec(seed=2, hosts=4, pages_per_host=10, crawl_delay=0.0))
    start = functools.partial(serve, web, tls=_server_context(ca), max_requests=3)
    server: SynthServer = await nursery.start(start)
    config = CrawlConfig(
        data_dir=tmp_path / "data",
        politeness=PolitenessConfig(delay=0.0, robots_retry_base=0.05),
        fetch=FetchConfig(proxy=server.proxy_url, ca_bundle=bundle),
    )
    shard = Shard.open(config.data_dir)
    try:
        async with make_client(config.fetch, "ubipy/test (peer=https)") as client:
            crawler = await crawl_until_idle(
                config, shard, client, ["https://h000.synth.test/"], patience=60
            )
        urls = [str(r["url"]) for r in shard.iter_pages()]
    finally:
        shard.close()
    await server.wait_idle()
    truth = ground_truth(web, [web.seed_url()])
    referee = Referee(server.log, web)
    assert referee.missing(truth) == set() and referee.unexpected(truth) == set()
    assert referee.duplicates() == []
    assert urls and [u for u in urls if not u.startswith("https://")] == []
    assert crawler.stats.certificate_errors == 0
