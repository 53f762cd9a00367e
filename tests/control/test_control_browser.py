"""The dashboard in a real headless browser (Debian's chromium), against a fake cluster.

Chromium is driven by its own flags, no browser library: ``--dump-dom`` prints the
page as its script left it after ``--virtual-time-budget`` milliseconds of the
page's own time (network waits do not count against it), and ``--screenshot``
saves what it drew. Two dumps a moment apart are two readings of the figures.

Skipped where chromium is not installed, except under CI (``CI`` set), which must
install it. ``UBIPY_ARTEFACTS=DIR`` (relative to the repository root; ``1`` means
``test-artefacts``) keeps the screenshot and the dumped page there.
"""

from __future__ import annotations

import functools
from pathlib import Path

import lxml.html
import pytest
import trio

from tests.browser import Browser, cell, keep, peer_rows, value
from tests.control.control_fake import FakeBackend
from ubipy.control.server import ControlLimits, serve_control


async def test_the_dashboard_shows_the_cluster_live(
    chromium: str, tmp_path: Path, nursery: trio.Nursery
) -> None:
    backend = FakeBackend.with_peers(2, 3)
    kept, killed = sorted(backend.peers)
    serve = functools.partial(
        serve_control, limits=ControlLimits(sample_interval=0.25, history=30.0)
    )
    address: str = await nursery.start(serve, backend, "127.0.0.1:0")
    url = f"http://{address}/"
    browser = Browser(chromium, tmp_path)

    first = await browser.dom(url)
    rows = peer_rows(first)
    assert set(rows) == {kept, killed}
    for tr in rows.values():
        assert tr.get("data-state") == "alive"
        assert cell(tr, "state").text_content() == "alive"
        assert cell(tr, "address").text_content().startswith("127.0.0.1:")
    pages_before = {peer: float(cell(tr, "pages").get("data-value")) for peer, tr in rows.items()}
    total_before = value(first, "total-pages")
    assert total_before == sum(pages_before.values()) > 0

    # The page refreshed itself: several answers within its few seconds.
    [body] = first.xpath("//body")
    assert int(body.get("data-polls")) >= 2
    [chart] = first.xpath("//canvas[@id='chart']")
    assert int(chart.get("data-points")) > 0
    [conn] = first.xpath("//*[@id='conn']")
    assert conn.get("data-ok") == "true"

    backend.peers[killed].state = "dead"  # killed: membership has declared it dead
    second = await browser.dom(url)
    rows = peer_rows(second)
    assert set(rows) == {kept, killed}
    assert rows[killed].get("data-state") == "dead"
    assert cell(rows[killed], "state").text_content() == "dead"
    assert rows[kept].get("data-state") == "alive"
    assert float(cell(rows[kept], "pages").get("data-value")) > pages_before[kept]
    assert value(second, "total-pages") > total_before
    assert float(cell(rows[kept], "rate").get("data-value")) == pytest.approx(2.0)
    # A dead peer keeps its last count and fetches nothing more.
    assert float(cell(rows[killed], "rate").get("data-value")) == 0.0
    # Its death is marked on the chart's timeline.
    [chart] = second.xpath("//canvas[@id='chart']")
    assert int(chart.get("data-events")) >= 1

    page = tmp_path / "dashboard.html"
    page.write_bytes(lxml.html.tostring(second))
    shot = tmp_path / "dashboard.png"
    await browser.run(url, f"--screenshot={shot}", "--window-size=1280,860")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000  # a drawn page, not a blank one
    keep(shot)
    keep(page)
