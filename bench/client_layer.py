"""What the HTTP client layer costs a page's GET, above a transport that costs nothing.

    python bench/client_layer.py                 # 40 rounds of 1,000 fetches each way
    python bench/client_layer.py --rounds 10 --fetches 500

In process, nothing on the network: ``fetch`` (ubipy's fetcher, as the crawler calls
it) against a transport that hands back a 5 KB page at once, through two clients made
alike by ``make_client``: the crawler's, whose GETs go straight to the transport
(``CrawlClient.get_page``), and the same client given a no-op event hook, which sends
them httpx2's way (``build_request`` and ``send``: a second URL parse, the header and
cookie merges, the auth and redirect steps). The two are timed alternately, round by
round, so that a machine whose speed drifts moves both; CPU time of the process, in
microseconds a fetch, min and median over the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import AsyncIterator

import httpx2
import trio

from ubipy.config import FetchConfig
from ubipy.fetch import fetch, make_client

_BODY = b"<p>" + b"x" * 5000 + b"</p>"
_HEADERS = [
    (b"Content-Type", b"text/html; charset=utf-8"),
    (b"Content-Length", str(len(_BODY)).encode()),
    (b"Server", b"bench"),
    (b"Date", b"Wed, 02 Dec 2026 00:00:00 GMT"),
]


class _Body(httpx2.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield _BODY


class _Free(httpx2.AsyncBaseTransport):
    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, headers=_HEADERS, stream=_Body())


async def _noop(_: httpx2.Request) -> None:
    return None


async def _run(rounds: int, fetches: int) -> dict[str, list[float]]:
    direct = make_client(FetchConfig(), "ubipy-bench", transport=_Free())
    layered = make_client(FetchConfig(), "ubipy-bench", transport=_Free())
    layered.event_hooks = {"request": [_noop], "response": []}
    times: dict[str, list[float]] = {"direct": [], "httpx2's way": []}
    for _ in range(rounds):
        for name, client in (("direct", direct), ("httpx2's way", layered)):
            started = time.process_time()
            for i in range(fetches):
                await fetch(client, f"http://h{i % 200}.synth.test/p/{i}.html", max_bytes=1 << 20)
            times[name].append((time.process_time() - started) / fetches * 1e6)
    await direct.aclose()
    await layered.aclose()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--fetches", type=int, default=1000, help="fetches a round, each way")
    args = parser.parse_args()
    times = trio.run(_run, args.rounds, args.fetches)
    for name, us in times.items():
        print(f"{name}: {min(us):.1f} us a fetch (min), {statistics.median(us):.1f} (median)")
    direct, layered = (statistics.median(us) for us in times.values())
    print(f"saved: {layered - direct:.1f} us a fetch (medians)")
    command = f"python bench/client_layer.py --rounds {args.rounds} --fetches {args.fetches}"
    print(f"reproduce: {command}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
