"""Without a cluster secret a peer stays on loopback; one that looks wrong is said to."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from ubipy.config import CrawlConfig
from ubipy.peer.peer import Peer
from ubipy.wire import secret_doubt


def test_no_secret_refuses_a_non_loopback_address(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"0\.0\.0\.0 without a cluster secret"):
        Peer(CrawlConfig(data_dir=tmp_path, listen="0.0.0.0:7000"))
    # A name is not looked up: one mistyped is said to be maybe that (QA: "lcoalhost").
    with pytest.raises(ValueError, match=r"lcoalhost \(a name other than localhost: mistyped\?\)"):
        Peer(CrawlConfig(data_dir=tmp_path, listen="lcoalhost:7000"))


def test_a_secret_allows_any_address_and_loopback_needs_none(tmp_path: Path) -> None:
    Peer(CrawlConfig(data_dir=tmp_path / "a", listen="0.0.0.0:7000", secret="s")).shard.close()
    Peer(CrawlConfig(data_dir=tmp_path / "b", listen="127.0.0.1:7000")).shard.close()


@pytest.mark.parametrize(
    ("secret", "doubt"),
    [
        ("one long random string", None),
        ("one long random string\n", "begins or ends with whitespace"),
        (" ", "begins or ends with whitespace"),
        ("x", "1 characters long"),
    ],
)
def test_a_secret_that_looks_wrong_is_said_to(secret: str, doubt: str | None) -> None:
    """ " " and "x" were taken without a word, and lifted the loopback-only rule (QA)."""
    said = secret_doubt(secret)
    assert said is None if doubt is None else doubt in (said or "")


async def test_a_peer_warns_of_a_secret_that_looks_wrong(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    peer = Peer(CrawlConfig(data_dir=tmp_path, listen="127.0.0.1:0", secret="abc\n"))
    async with trio.open_nursery() as nursery:
        await nursery.start(peer.run)
        peer.stop()
    assert "the cluster secret: it begins or ends with whitespace" in caplog.text
