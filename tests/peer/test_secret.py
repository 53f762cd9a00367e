"""Without a cluster secret a peer stays on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest

from ubipy.config import CrawlConfig
from ubipy.peer.peer import Peer


def test_no_secret_refuses_a_non_loopback_address(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="without a cluster secret"):
        Peer(CrawlConfig(data_dir=tmp_path, listen="0.0.0.0:7000"))


def test_a_secret_allows_any_address_and_loopback_needs_none(tmp_path: Path) -> None:
    Peer(CrawlConfig(data_dir=tmp_path / "a", listen="0.0.0.0:7000", secret="s")).shard.close()
    Peer(CrawlConfig(data_dir=tmp_path / "b", listen="127.0.0.1:7000")).shard.close()
