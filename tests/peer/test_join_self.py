"""A --join address that is the peer itself under another name (a host name for its
own address, as one --join list given to every peer has): found out from its own
frames coming back, and the peer, having reached nobody else, crawls alone instead of
waiting for ever to be counted in a cluster (it goes on trying the address: a name
may stand for several peers, tests/cluster/test_joining.py)."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from tests.peer.test_advertise import SECRET, free_port
from ubipy.config import CrawlConfig
from ubipy.peer.peer import Peer


class _Waiter(logging.Handler):
    """Sets an event when a record matching ``pattern`` is logged (on trio's thread)."""

    def __init__(self, pattern: str) -> None:
        super().__init__()
        self.pattern = re.compile(pattern)
        self.seen = trio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.pattern.search(record.getMessage()):
            self.seen.set()


@contextmanager
def logged(pattern: str) -> Iterator[_Waiter]:
    waiter = _Waiter(pattern)
    root = logging.getLogger("ubipy")
    root.addHandler(waiter)
    level = root.level
    root.setLevel(logging.INFO)
    try:
        yield waiter
    finally:
        root.removeHandler(waiter)
        root.setLevel(level)


@pytest.mark.parametrize(
    ("listen", "advertise", "join"),
    [
        # A name for its own address: resolved, and the address is its own.
        ("127.0.0.1", None, "localhost"),
        # Another address of the machine, reaching its wildcard listener: its own
        # frame comes back (a reflected frame).
        ("0.0.0.0", "127.0.0.1", "127.0.0.2"),
    ],
)
async def test_a_peer_that_joins_itself_by_another_name_crawls_alone(
    listen: str, advertise: str | None, join: str, tmp_path: Path
) -> None:
    port = free_port()
    peer = Peer(
        CrawlConfig(
            data_dir=tmp_path,
            listen=f"{listen}:{port}",
            advertise=f"{advertise}:{port}" if advertise else None,
            join=(f"{join}:{port}",),
            secret=SECRET,
        )
    )
    with logged(r"fetching starts") as started, logged(r"a cluster of its own") as founded:
        async with trio.open_nursery() as nursery:
            await nursery.start(peer.run)
            assert peer.crawler.paused is not None  # new, with an address to join
            with trio.fail_after(20):
                await founded.seen.wait()
                await started.seen.wait()
            assert peer.crawler.paused is None
            # Not shown joining for ever ("joining (attempt 4)" in status: QA).
            assert peer.joining == 0
            if advertise:
                assert peer.links.why(f"{join}:{port}") == "it reached this peer itself"
            peer.stop()


async def test_a_stopping_peer_is_not_shown_joining(tmp_path: Path) -> None:
    """A cluster stopped at once: each peer, the others gone, went on trying to join
    as it stopped ("join attempt 1: cannot connect", "joining (attempt 1)": QA)."""
    port = free_port()
    peer = Peer(
        CrawlConfig(
            data_dir=tmp_path,
            listen=f"127.0.0.1:{port}",
            join=(f"127.0.0.1:{free_port()}",),  # nobody there
            secret=SECRET,
        )
    )
    with logged(r"join attempt 1:") as tried:
        async with trio.open_nursery() as nursery:
            await nursery.start(peer.run)
            with trio.fail_after(20):
                await tried.seen.wait()
            assert peer.joining >= 1
            peer.stop()
            assert peer.joining == 0
