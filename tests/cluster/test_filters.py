"""--exclude in a cluster: a URL it drops is dropped where it is found, before routing,
so it is neither fetched (the web's request log) nor sent to its owner (no frame on
the network carries it), while the URLs beside it are forwarded and fetched as usual;
each peer's status counts what it dropped."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
import trio.testing

from tests.cluster.harness import cluster
from ubipy.config import BoundsConfig
from ubipy.net.memory import MemoryStream
from ubipy.synthweb import SyntheticWeb, WebSpec

# Ordinary pages are /sN/pM.html with N = M % 3: a third of every host's pages.
EXCLUDED = "/s1/"


async def test_an_excluded_url_is_neither_forwarded_nor_fetched(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[bytes] = []
    send_all = MemoryStream.send_all

    async def recorded(self: MemoryStream, data: bytes | bytearray | memoryview) -> None:
        sent.append(bytes(data))
        await send_all(self, data)

    monkeypatch.setattr(MemoryStream, "send_all", recorded)
    web = SyntheticWeb(WebSpec(seed=5, hosts=8, pages_per_host=12, latency=0.02))
    bounds = BoundsConfig(exclude=(EXCLUDED,))
    async with cluster(tmp_path, web, seed=2) as c:
        a = await c.start(0, bounds=bounds)
        b = await c.start(1, join=a, bounds=bounds)
        both = {a.peer_id, b.peer_id}
        with trio.fail_after(30):
            await c.wait_until(
                lambda: a.peer.membership.alive_ids() == b.peer.membership.alive_ids() == both
            )
        seeded = a.peer.seed_urls([web.seed_url(), web.url(3, "/s1/p4.html")])
        assert (seeded.admitted, seeded.refused) == (1, (("http://h003.synth.test/s1/p4.html",
                                                          "excluded by --exclude"),))  # fmt: skip
        with trio.fail_after(300):
            while True:
                await trio.sleep(5)
                peers = (a.peer, b.peer)
                if all(p.crawler.pending == 0 and not p._router.backlog() for p in peers):  # type: ignore[union-attr]
                    break
        status = await c.status(a)
        owners = {h: a.peer._router.owner(h) for h in web.host_names()}  # type: ignore[union-attr]

    requested = [r.target_path for r in c.server.log]
    # Both peers fetched, from hosts they own, and URLs crossed between them...
    assert {r.peer for r in c.server.log} >= both
    assert set(owners.values()) == both
    url_frames = sum(p.peer.links.stats.frames_out["URL_BATCH"] for p in (a, b))
    assert url_frames > 0 and any(b"/s2/p" in chunk for chunk in sent)
    # ...but none of the excluded ones: not on the wire (the pattern itself is, in the
    # settings each peer's status names), not asked of the web.
    assert not [chunk for chunk in sent if f"{EXCLUDED}p".encode() in chunk]
    assert not [path for path in requested if EXCLUDED in path]
    assert any("/s2/" in path for path in requested)
    # Counted where they were found, and in the status; the seed too.
    figures = {p["peer_id"]: p for p in status["peers"]}
    assert figures[a.peer_id]["excluded"] >= 1 and figures[b.peer_id]["excluded"] >= 1
    assert sum(f["excluded"] for f in figures.values()) == sum(
        p.peer.crawler.stats.filtered.total() for p in (a, b)
    )
