"""Dead names against a live web (issue #16): one peer, 32 requests in flight, crawls a
synthetic web of ~10,000 pages whose home page also links to names that do not resolve
(``WebSpec.dead_links``), each lookup failing only at the 5 s time-out. The live web's
crawl time with the dead links, as a ratio of its time without them, and the lookups
per host.

In process, on the autojump clock (the in-memory cluster of tests/cluster): the times
are the crawl's own virtual seconds, the same on any machine.

    python -m bench.dead_names                 # 200 dead names, 100 hosts x 100 pages
    python -m bench.dead_names --dead 1000 --hosts 20 --pages 50
"""

from __future__ import annotations

import argparse
import dataclasses
import socket
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trio
import trio.testing

from tests.cluster.harness import cluster
from ubipy.config import BoundsConfig, CrawlConfig, Scope
from ubipy.fetch import Resolver
from ubipy.synthweb import Referee, SyntheticWeb, WebSpec, ground_truth


async def crawl(web: SyntheticWeb, concurrency: int) -> tuple[float, dict[str, Any]]:
    """The live web's crawl time and the peer's figures once idle."""
    truth = ground_truth(web, [web.seed_url()], scope="any")
    live = sorted({urlsplit(u).hostname or "" for u in truth})
    names = {n: f"11.0.{i // 250}.{i % 250 + 1}" for i, n in enumerate(live)}

    async def lookup(name: str) -> list[str]:
        if name in names:
            await trio.sleep(0.002)
            return [names[name]]
        await trio.sleep(3600.0)  # cut by the resolver's time-out
        raise socket.gaierror(socket.EAI_NONAME, "no such name")

    def tune(config: CrawlConfig) -> CrawlConfig:
        politeness = dataclasses.replace(config.politeness, concurrency=concurrency)
        return dataclasses.replace(config, politeness=politeness)

    with tempfile.TemporaryDirectory() as tmp:
        async with cluster(Path(tmp), web, seed=1) as c:
            sim = await c.start(
                0, bounds=BoundsConfig(scope=Scope.ANY), tune=tune, resolver=Resolver(lookup=lookup)
            )
            started = trio.current_time()
            sim.peer.seed_urls([web.seed_url()])
            await c.server.log.wait_for(lambda log: Referee(log, web).missing(truth) == set())
            took = trio.current_time() - started
            await sim.peer.crawler.wait_idle()
            status = (await c.status(sim))["peers"][0]
            await c.stop(sim)
    return took, status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dead", type=int, default=200)
    parser.add_argument("--hosts", type=int, default=100)
    parser.add_argument("--pages", type=int, default=100, help="pages per host")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    spec = WebSpec(seed=1, hosts=args.hosts, pages_per_host=args.pages, latency=0.02)
    cpu = time.process_time()
    results = {}
    for dead in (0, args.dead):
        clock = trio.testing.MockClock(autojump_threshold=0)
        web = SyntheticWeb(dataclasses.replace(spec, dead_links=dead))
        results[dead] = trio.run(crawl, web, args.concurrency, clock=clock)
    alone, (took, status) = results[0][0], results[args.dead]
    print(
        f"live web ({args.hosts} hosts x {args.pages} pages, {args.concurrency} in flight): "
        f"{alone:.1f} s alone, {took:.1f} s beside {args.dead} dead names "
        f"(ratio {took / alone:.2f}); {status['dns_lookups']} lookups, at most "
        f"{status['dns_most_per_host']} per host, {status['dns_hosts_given_up']} hosts "
        f"given up; {time.process_time() - cpu:.0f} s of CPU"
    )


if __name__ == "__main__":
    main()
