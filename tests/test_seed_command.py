"""``ubipy seed`` against a stand-in for the peer's end of the wire: a long file goes in
frames under the cap, their answers summed in one summary line, bad lines counted; a
peer lost midway is reported with what it had taken."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import trio
import trio.testing

import ubipy.asking
from ubipy import cli
from ubipy.errors import StorageError
from ubipy.fetch import parse_seeds
from ubipy.peer import SeedResult
from ubipy.seedfiles import seeds_taken, take_seeds
from ubipy.wire import (
    DEFAULT_MAX_FRAME,
    FrameWriter,
    Message,
    Seed,
    SeedAck,
    Status,
    StatusRequest,
    new_epoch,
    secret_from,
)

WRITER = FrameWriter(secret_from("s"), "cli-0123abcd", new_epoch())


class FakePeer:
    """Answers SEED frames as a peer would: half new, half forwarded (odd counts favour
    the new); the ``fail_at``-th frame (from 1) finds the peer gone."""

    def __init__(self, fail_at: int = 0, paused: str = "", joining: int = 0) -> None:
        self.frames: list[Seed] = []
        self.fail_at = fail_at
        self.paused = paused
        self.joining = joining

    async def request(
        self, address: str, secret: bytes, message: Message, **kwargs: object
    ) -> Message:
        if isinstance(message, StatusRequest):  # asked once the seeds are in
            row: dict[str, str | int] = {
                "peer_id": "aaaa",
                "paused": self.paused,
                "joining": self.joining,
            }
            return Status((), (row,))
        assert isinstance(message, Seed)
        if len(self.frames) + 1 == self.fail_at:
            raise OSError(f"{address} dropped the connection")
        size = len(WRITER.frame(message.KIND, message.to_wire(), 0.0))
        assert size <= DEFAULT_MAX_FRAME // 8
        self.frames.append(message)
        n = len(message.urls)
        return SeedAck(n, n - n // 2, n // 2, ())


def seed(tmp: Path, text: str, peer: FakePeer, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """``ubipy seed`` of ``text`` to ``peer``: its exit status, and the file's name."""
    path = tmp / "seeds.txt"
    path.write_text(text)
    monkeypatch.setattr(ubipy.asking, "request", peer.request)
    return cli.main(["seed", str(path), "--peer", "127.0.0.1:7000"]), str(path)


URLS = [f"http://h{i % 50}.example.test/page/{i}" for i in range(25_000)]


def test_a_long_file_goes_in_frames_and_one_summary_line_counts_them_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    peer = FakePeer()
    bad = "not a url\nftp://h1.example.test/\n" + URLS[7] + "\n"
    code, path = seed(tmp_path, "\n".join(URLS) + "\n" + bad, peer, monkeypatch)
    out, err = capsys.readouterr()
    assert code == 1  # bad lines, still reported as such
    assert len(peer.frames) > 1
    assert [u for f in peer.frames for u in f.urls] == URLS
    admitted = sum(len(f.urls) - len(f.urls) // 2 for f in peer.frames)
    assert out.splitlines() == [
        f"sent {len(URLS)} seeds to 127.0.0.1:7000: {admitted} new there, "
        f"{len(URLS) - admitted} forwarded to their owners; 3 lines skipped"
    ]
    lines = err.splitlines()
    assert len(lines) == 3 and all(line.startswith(f"{path}: line 2500") for line in lines)


def test_a_peer_lost_midway_is_reported_with_what_it_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    peer = FakePeer(fail_at=3)
    code, _ = seed(tmp_path, "\n".join(URLS), peer, monkeypatch)
    out, err = capsys.readouterr()
    taken = sum(len(f.urls) for f in peer.frames)
    assert (code, out) == (2, "")
    assert err.strip() == (
        "ubipy seed: cannot reach peer 127.0.0.1:7000: 127.0.0.1:7000 dropped the connection "
        f"({taken} of {len(URLS)} seeds were taken)"
    )


def test_seeds_taken_by_a_peer_that_fetches_nothing_for_now_are_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A peer waiting to join (a --join address dead, another secret) took them and
    # said "1 new there", and nothing of fetching nothing (QA).
    why = "new to the cluster: not yet counted by a member that holds the majority lease"
    code, _ = seed(tmp_path, URLS[0] + "\n", FakePeer(paused=why), monkeypatch)
    out, err = capsys.readouterr()
    assert (code, out) == (
        0,
        "sent 1 seed to 127.0.0.1:7000: 1 new there, 0 forwarded to their owners\n",
    )
    assert err == f"ubipy seed: the peer fetches nothing for now: {why}\n"
    # Still joining: its --join address is what to look at, not the lease (QA).
    seed(tmp_path, URLS[0] + "\n", FakePeer(paused=why, joining=3), monkeypatch)
    assert capsys.readouterr().err == (
        "ubipy seed: the peer fetches nothing for now: it is still joining the cluster "
        "(attempt 3): no --join address has answered yet\n"
    )


class KnowingPeer(FakePeer):
    """Knows every seed but the first two: one new, one forwarded."""

    async def request(
        self, address: str, secret: bytes, message: Message, **kwargs: object
    ) -> Message:
        if not isinstance(message, Seed):
            return await super().request(address, secret, message)
        self.frames.append(message)
        return SeedAck(len(message.urls), 1, 1, ())


def test_seeds_the_peer_knew_already_are_counted_in_the_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "sent 5 seeds: 1 new there, 1 forwarded" left three unaccounted for (QA)."""
    code, _ = seed(tmp_path, "\n".join(URLS[:5]), KnowingPeer(), monkeypatch)
    assert code == 0
    assert capsys.readouterr().out.splitlines() == [
        "sent 5 seeds to 127.0.0.1:7000: 1 new there, 1 forwarded to their owners, "
        "3 known there already"
    ]


def test_a_peer_s_seeds_file_is_summed_up_once_taken() -> None:
    """``peer --seeds`` said nothing of the seeds it took unless some were refused."""
    refused = (("ftp://x/", "not http"),)
    assert seeds_taken(SeedResult(12, 8, refused, forwarded=2)) == (
        "12 seeds: 8 new, 2 for other peers, 1 known already, 1 refused (1 not http)"
    )
    assert seeds_taken(SeedResult(3, 3, ())) == "3 seeds: 3 new"


class RefusingPeer(FakePeer):
    async def request(
        self, address: str, secret: bytes, message: Message, **kwargs: object
    ) -> Message:
        raise PermissionError(f"the peer at {address} refused the secret (it is not the cluster's)")


@pytest.mark.parametrize("given", [False, True])
def test_a_refused_secret_says_when_none_was_given(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    given: bool,
) -> None:
    """No secret at all read as a wrong one (QA)."""
    monkeypatch.delenv("UBIPY_SECRET", raising=False)
    if given:
        monkeypatch.setenv("UBIPY_SECRET", "a guess")
    code, _ = seed(tmp_path, URLS[0], RefusingPeer(), monkeypatch)
    assert code == 2
    err = capsys.readouterr().err
    assert "refused the secret (it is not the cluster's)" in err
    assert ("none was given (--secret, or UBIPY_SECRET)" in err) is not given
    # From the environment, maybe for another cluster, sent to a peer with none (QA).
    assert ("it was $UBIPY_SECRET's: a peer started without a secret" in err) is given


def test_a_refused_secret_that_ends_with_a_newline_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """UBIPY_SECRET from a file kept its newline: only "the secrets differ" (QA)."""
    monkeypatch.setenv("UBIPY_SECRET", "a long enough secret\n")
    code, _ = seed(tmp_path, URLS[0], RefusingPeer(), monkeypatch)
    assert code == 2
    assert "the secret given: it begins or ends with whitespace" in capsys.readouterr().err


async def test_peer_seeds_the_shard_refuses_at_the_start_are_taken_once_it_takes_writes(
    autojump_clock: trio.testing.MockClock, capsys: pytest.CaptureFixture[str]
) -> None:
    """``peer --seeds`` on a full disk at the start: the seeds were dropped with a line,
    and the peer ran idle for ever (QA). Tried again every ``retry`` until taken."""
    tried: list[float] = []

    def seed(urls: Sequence[str]) -> SeedResult:
        tried.append(trio.current_time())
        if len(tried) < 3:
            raise StorageError("database or disk is full")
        return SeedResult(offered=len(urls), admitted=len(urls), refused=())

    seeds = parse_seeds(b"http://a.test/\nhttp://b.test/\n")
    await take_seeds(seed, 5.0, Path("urls.txt"), seeds)
    assert tried == [0.0, 5.0, 10.0]
    assert capsys.readouterr().err.splitlines() == [
        "ubipy peer: cannot take the seeds yet: database or disk is full; trying again every 5 s",
        "urls.txt: 2 seeds: 2 new",
    ]
