"""Headless Chromium for the dashboard tests, driven by its own flags (no browser
library): ``--dump-dom`` prints the page as its script left it after
``--virtual-time-budget`` milliseconds of the page's own time, ``--screenshot``
saves what it drew.

Skipped where chromium is not installed, except under CI (``CI`` set), which must
install it. ``UBIPY_ARTEFACTS=DIR`` (relative to the repository root; ``1`` means
``test-artefacts``) keeps screenshots and dumped pages there.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import lxml.html
import pytest
import trio

_REPO = Path(__file__).resolve().parents[1]
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


def peer_rows(doc: lxml.html.HtmlElement) -> dict[str, lxml.html.HtmlElement]:
    return {tr.get("data-peer"): tr for tr in doc.xpath("//tbody[@id='peer-rows']/tr")}


def cell(tr: lxml.html.HtmlElement, column: str) -> lxml.html.HtmlElement:
    [td] = tr.xpath(f"./td[@class='{column}']")
    return td


def value(doc: lxml.html.HtmlElement, element_id: str) -> float:
    [element] = doc.xpath(f"//*[@id='{element_id}']")
    return float(element.get("data-value"))


def keep(artefact: Path) -> None:
    where = os.environ.get("UBIPY_ARTEFACTS", "")
    if where:
        if where.lower() in ("1", "yes", "true"):
            where = "test-artefacts"
        target = _REPO / where  # an absolute path stays as it is
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(artefact, target / artefact.name)
