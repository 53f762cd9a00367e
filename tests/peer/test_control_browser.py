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
import os
import shutil
from pathlib import Path

import lxml.html
import pytest
import trio

from tests.peer.control_fake import FakeBackend
from ubipy.peer.control import ControlLimits, serve_control

_REPO = Path(__file__).resolve().parents[2]
_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--hide-scrollbars",
    # Page time, not wall time: with 1 s polls the page has answered several times.
    "--virtual-time-budget=3500",
)


@pytest.fixture
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        why = "chromium is not installed (Debian: apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(f"{why}; CI must install it to test the dashboard")
        pytest.skip(why)
    return found


class Browser:
    def __init__(self, binary: str, workdir: Path) -> None:
        self.binary = binary
        self.workdir = workdir
        self.runs = 0

    async def run(self, url: str, *flags: str) -> bytes:
        self.runs += 1
        # A fresh profile each time: nothing cached, nothing shared between readings.
        profile = self.workdir / f"profile-{self.runs}"
        command = [self.binary, *_FLAGS, f"--user-data-dir={profile}", *flags, url]
        with trio.fail_after(120):
            done = await trio.run_process(
                command, capture_stdout=True, capture_stderr=True, check=False
            )
        if done.returncode != 0:
            tail = done.stderr.decode("utf-8", "replace")[-2000:]
            pytest.fail(f"chromium exited with {done.returncode}:\n{tail}")
        return done.stdout

    async def dom(self, url: str) -> lxml.html.HtmlElement:
        page = await self.run(url, "--dump-dom")
        return lxml.html.fromstring(page)


def _peer_rows(doc: lxml.html.HtmlElement) -> dict[str, lxml.html.HtmlElement]:
    return {tr.get("data-peer"): tr for tr in doc.xpath("//tbody[@id='peer-rows']/tr")}


def _cell(tr: lxml.html.HtmlElement, column: str) -> lxml.html.HtmlElement:
    [td] = tr.xpath(f"./td[@class='{column}']")
    return td


def _value(doc: lxml.html.HtmlElement, element_id: str) -> float:
    [element] = doc.xpath(f"//*[@id='{element_id}']")
    return float(element.get("data-value"))


def _keep(artefact: Path) -> None:
    where = os.environ.get("UBIPY_ARTEFACTS", "")
    if where:
        if where.lower() in ("1", "yes", "true"):
            where = "test-artefacts"
        target = _REPO / where  # an absolute path stays as it is
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(artefact, target / artefact.name)


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
    rows = _peer_rows(first)
    assert set(rows) == {kept, killed}
    for tr in rows.values():
        assert tr.get("data-state") == "alive"
        assert _cell(tr, "state").text_content() == "alive"
        assert _cell(tr, "address").text_content().startswith("127.0.0.1:")
    pages_before = {peer: float(_cell(tr, "pages").get("data-value")) for peer, tr in rows.items()}
    total_before = _value(first, "total-pages")
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
    rows = _peer_rows(second)
    assert set(rows) == {kept, killed}
    assert rows[killed].get("data-state") == "dead"
    assert _cell(rows[killed], "state").text_content() == "dead"
    assert rows[kept].get("data-state") == "alive"
    assert float(_cell(rows[kept], "pages").get("data-value")) > pages_before[kept]
    assert _value(second, "total-pages") > total_before
    assert float(_cell(rows[kept], "rate").get("data-value")) == pytest.approx(2.0)
    # A dead peer keeps its last count and fetches nothing more.
    assert float(_cell(rows[killed], "rate").get("data-value")) == 0.0

    page = tmp_path / "dashboard.html"
    page.write_bytes(lxml.html.tostring(second))
    shot = tmp_path / "dashboard.png"
    await browser.run(url, f"--screenshot={shot}", "--window-size=1280,860")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000  # a drawn page, not a blank one
    _keep(shot)
    _keep(page)
