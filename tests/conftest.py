"""Fixtures shared across the test packages, and where tests run under xdist."""

from __future__ import annotations

from typing import Any

import pytest

import ubipy.cli
from tests.browser import chromium
from ubipy.cli import main
from ubipy.config import CrawlConfig

__all__ = ["chromium"]

# Tests that run peers as processes on real time: under ``pytest -n 2 --dist
# loadgroup`` they all go to one worker, one after another as in a serial run, while
# the other worker takes the tests on the autojump clock, which no busy CPU can upset.
_REAL_TIME = ("tests/e2e/", "tests/test_cli.py", "tests/control/test_control_browser.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path.as_posix()
        if any(part in path for part in _REAL_TIME):
            item.add_marker(pytest.mark.xdist_group("real-time"))


@pytest.fixture
def peer_config(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``ubipy peer ARGS`` as main() runs it, up to the config the peer would get."""
    got: list[CrawlConfig] = []

    async def run_peer(args: Any, config: CrawlConfig) -> int:
        got.append(config)
        return 0

    monkeypatch.setattr(ubipy.cli, "_run_peer", run_peer)
    monkeypatch.delenv("UBIPY_SECRET", raising=False)

    def run(*argv: str) -> CrawlConfig:
        assert main(["peer", *argv]) == 0
        return got.pop()

    return run
