"""The paced web: a fast, a slow and a busy host, as the server answers them."""

from __future__ import annotations

import httpx2
import pytest
import trio
import trio.testing

from ubipy.synthweb import SyntheticWeb, SynthTransport, WebSpec, ground_truth, in_process
from ubipy.synthweb.log import Request
from ubipy.synthweb.pace import pace_of

SPEC = WebSpec(seed=2, hosts=1, pages_per_host=1, paced=True, paced_pages=4, unavailable_for=10.0)


def test_off_by_default() -> None:
    web = SyntheticWeb(WebSpec(hosts=1, pages_per_host=1))
    assert web.pace is None
    assert web.respond("pace-slow.synth.test", "/").status == 404


def test_the_paced_hosts_are_linked_from_home_and_in_the_truth() -> None:
    web = SyntheticWeb(SPEC)
    truth = ground_truth(web, [web.seed_url()])
    for case in ("fast", "slow", "busy"):
        host = f"pace-{case}.synth.test"
        pages = {f"http://{host}/", *(f"http://{host}/p{i}.html" for i in (1, 2, 3))}
        assert pages <= truth
        assert f"http://{host}/p4.html" not in truth


def test_the_busy_host_answers_503_for_its_outage_then_recovers() -> None:
    web = SyntheticWeb(SPEC)
    busy = "pace-busy.synth.test"
    # robots.txt is served all along, and does not start the outage.
    assert web.respond(busy, "/robots.txt", now=0.0).status == 404
    first = web.respond(busy, "/p1.html", now=100.0)
    assert first.status == 503
    assert not any(k.lower() == "retry-after" for k, _ in first.headers)
    assert web.respond(busy, "/p2.html", now=109.9).status == 503
    assert web.respond(busy, "/robots.txt", now=105.0).status == 404
    assert web.respond(busy, "/p1.html", now=110.0).status == 200
    assert web.respond(busy, "/", now=500.0).status == 200
    # The other hosts never fail.
    assert web.respond("pace-fast.synth.test", "/p1.html", now=100.0).status == 200


def test_only_the_slow_host_is_slow() -> None:
    web = SyntheticWeb(SPEC)
    slow = [web.latency_for("pace-slow.synth.test", "/p1.html", n) for n in range(50)]
    assert all(0.2 <= s < 0.4 for s in slow) and max(slow) - min(slow) > 0.1
    assert slow == [web.latency_for("pace-slow.synth.test", "/p1.html", n) for n in range(50)]
    assert web.latency_for("pace-fast.synth.test", "/p1.html", 0) == 0.0
    assert web.latency_for("h000.synth.test", "/", 0) == 0.0


async def test_in_process_the_outage_and_the_latency_run_on_trios_clock(
    autojump_clock: trio.testing.MockClock,
) -> None:
    server = in_process(SyntheticWeb(SPEC))
    async with httpx2.AsyncClient(transport=SynthTransport(server)) as client:
        start = trio.current_time()
        r = await client.get("http://pace-slow.synth.test/p1.html")
        assert r.status_code == 200 and 0.2 <= trio.current_time() - start < 0.4
        assert (await client.get("http://pace-busy.synth.test/p1.html")).status_code == 503
        await trio.sleep(9.0)
        assert (await client.get("http://pace-busy.synth.test/p2.html")).status_code == 503
        await trio.sleep(1.0)
        assert (await client.get("http://pace-busy.synth.test/p2.html")).status_code == 200


def _req(start: float, end: float, host: str = "a.test", status: int = 200) -> Request:
    return Request(start, end, host, "/", status, user_agent="", peer="", bytes_sent=0)


def test_pace_of_reads_gaps_rates_and_statuses_from_the_log() -> None:
    log = [_req(0.0, 0.5), _req(1.5, 2.0, status=503), _req(2.0, 3.0), _req(0.0, 9.0, "b.test")]
    pace = pace_of(reversed(log), "a.test")
    assert pace.requests == 3
    assert pace.gaps == (1.0, 0.0)
    assert pace.mean_gap == 0.5
    assert pace.response_time == pytest.approx((0.5 + 0.5 + 1.0) / 3)
    assert pace.rate == 1.0
    assert pace.statuses == (200, 503, 200)
    empty = pace_of(log, "c.test")
    assert (empty.requests, empty.rate, empty.mean_gap) == (0, 0.0, 0.0)
