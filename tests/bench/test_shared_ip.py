"""bench/shared_ip.py runs the scheduler to the end under each order."""

from __future__ import annotations

import pytest

from bench.shared_ip import run
from ubipy.config import CrawlOrder


@pytest.mark.parametrize("order", list(CrawlOrder))
def test_every_request_is_handed_out_and_timed(order: CrawlOrder) -> None:
    assert run(30, order) > 0
