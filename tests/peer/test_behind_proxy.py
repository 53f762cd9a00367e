"""A peer behind --proxy says, once at start, that names leading to private addresses
are the proxy's to refuse: the proxy looks them up, not the peer."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from tests.peer.test_advertise import free_port
from ubipy.config import CrawlConfig, DnsConfig, FetchConfig
from ubipy.peer.peer import Peer


@pytest.mark.parametrize("allow_private", [False, True])
async def test_a_peer_behind_a_proxy_says_names_are_not_checked(
    allow_private: bool, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = CrawlConfig(
        data_dir=tmp_path,
        listen=f"127.0.0.1:{free_port()}",
        fetch=FetchConfig(proxy="http://127.0.0.1:3128"),
        dns=DnsConfig(allow_private=allow_private),
    )
    peer = Peer(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(peer.run)
        peer.stop()
    warned = [r for r in caplog.records if r.getMessage().startswith("--proxy:")]
    assert len(warned) == (0 if allow_private else 1)
