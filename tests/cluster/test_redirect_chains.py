"""A chain of redirects is bounded wherever its hosts live. A redirect is no link hop
(its target keeps the page's depth), so --max-depth does not bound a chain: each peer
refuses the redirect that would make more than MAX_REDIRECTS in a row. The count
lived only on the peer that followed the redirect, and a target on a host another peer
owns started afresh there: two hosts of two peers answering each page with a
redirect to a new page of the other were followed for ever. The count now travels
with the URL (in the outbox and the URL_BATCH) and the owner counts on from it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from tests.cluster.harness import cluster
from ubipy.config import BoundsConfig, CrawlOrder, Scope
from ubipy.peer.reading import MAX_REDIRECTS
from ubipy.ring import Ring
from ubipy.synthweb import Request, RequestLog, SyntheticWeb, WebSpec
from ubipy.synthweb.spec import Response

# Where the web itself ends the chain (a page with no links), so that a crawl that
# followed it for ever still ends, and the test with it.
END = 3 * MAX_REDIRECTS


class PingPong(SyntheticWeb):
    """The synthetic web, and two hosts (``pair``, once chosen) whose every page
    ``/go?n=k`` redirects to ``/go?n=k+1`` on the other, a new URL each time, up to
    END; their robots.txt is missing (allow all)."""

    pair: tuple[str, str] = ("", "")
    ended = trio.Event()  # set once the chain's last page is asked

    def respond(self, host: str, target: str, **kw: Any) -> Response:
        if host not in self.pair:
            return super().respond(host, target, **kw)
        if target == "/robots.txt":
            return Response(404, (("Content-Type", "text/plain"),), b"none\n")
        n = int(target.removeprefix("/go?n="))
        if n >= END:
            self.ended.set()
            return Response(200, (("Content-Type", "text/html"),), b"<p>the end</p>")
        other = self.pair[1] if host == self.pair[0] else self.pair[0]
        location = f"http://{other}/go?n={n + 1}"
        return Response(302, (("Location", location), ("Content-Type", "text/plain")), b"")


def chain(log: RequestLog, pair: tuple[str, str]) -> list[Request]:
    return [r for r in log if r.host in pair and r.target_path.startswith("/go?")]


class Refusals(Counter[str]):
    """A crawl's refusals, which call ``then`` as a redirect chain is refused."""

    def __init__(self, then: Callable[[], object]) -> None:
        super().__init__()
        self._then = then

    def __setitem__(self, key: str, value: int) -> None:
        super().__setitem__(key, value)
        if key == "redirect chain":
            self._then()


# Under a ranked order a page's cash is shared out over what it reveals, its
# redirect's target too: the count goes with it.
@pytest.mark.parametrize("order", [CrawlOrder.BFS, CrawlOrder.OPIC], ids=lambda o: o.value)
async def test_a_chain_of_redirects_across_two_peers_stops_after_twenty_in_a_row(
    order: CrawlOrder, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    web = PingPong(WebSpec(seed=1, hosts=1, pages_per_host=1))
    bounds = BoundsConfig(scope=Scope.ANY, sitemaps=False, order=order)
    async with cluster(tmp_path, web, seed=5) as c:
        sims = await c.start_joined(2, bounds=bounds)
        # Two hosts, each owned by one of the two peers.
        ring = Ring([s.peer_id for s in sims])
        names = [f"r{i}.test" for i in range(64)]
        first, second = (next(h for h in names if ring.owner(h) == s.peer_id) for s in sims)
        pair = web.pair = (first, second)
        # The chain ends with a refusal, or (followed for ever) with the web's end.
        ended = web.ended = trio.Event()
        for sim in sims:
            sim.peer.crawler.stats.refused = Refusals(ended.set)
        sims[0].peer.seed_urls([f"http://{pair[0]}/go?n=0"])
        with trio.fail_after(600):
            await ended.wait()
            for sim in sims:
                await sim.peer.crawler.wait_idle()
        refused = [s.peer.crawler.stats.refused["redirect chain"] for s in sims]
        await c.stop_all()
    asked = chain(c.server.log, pair)
    # The first page and its twenty redirects, not one more: the twenty-first redirect
    # (from n=20) is refused, and counted, by the peer that owns that page's host.
    assert [r.target_path for r in asked] == [f"/go?n={n}" for n in range(MAX_REDIRECTS + 1)]
    assert [r.host for r in asked] == [pair[n % 2] for n in range(MAX_REDIRECTS + 1)]
    assert len({r.peer for r in asked}) == 2  # each host asked by its own peer
    last = MAX_REDIRECTS % 2  # the peer that owns the last page's host
    assert refused[last] == 1 and sum(refused) == 1
    assert all(not s.troubles for s in c.lives)
