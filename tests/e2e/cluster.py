"""Peers as OS processes on loopback, for the end-to-end cluster tests."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

UBIPY = [sys.executable, "-m", "ubipy.cli"]
_BANNER = re.compile(rb"ubipy peer (\w+) listening on (\S+)\n")


@dataclass
class PeerProcess:
    """A running ``ubipy peer`` whose stderr is drained and searchable."""

    proc: trio.Process
    data: Path
    peer_id: str = ""
    address: str = ""
    output: bytearray = field(default_factory=bytearray)
    _grew: trio.Event = field(default_factory=trio.Event)

    async def drain(self) -> None:
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.receive_some(65536):
            self.output += chunk
            self._grew.set()
            self._grew = trio.Event()

    async def wait_for(self, pattern: bytes) -> re.Match[bytes]:
        """Wait until the peer's log matches ``pattern`` (use trio.fail_after around it)."""
        regex = re.compile(pattern)
        while (m := regex.search(self.output)) is None:
            await self._grew.wait()
        return m

    def count(self, pattern: bytes) -> int:
        return len(re.findall(pattern, self.output))

    async def wait_count(self, pattern: bytes, n: int) -> None:
        """Wait until ``pattern`` has matched the log ``n`` times."""
        while self.count(pattern) < n:
            await self._grew.wait()


async def start_peer(
    nursery: trio.Nursery, data: Path, proxy: str, *extra: str, secret: str = "s3cret"
) -> PeerProcess:
    cmd = [
        *UBIPY, "-v", "peer", "--data", str(data), "--listen", "127.0.0.1:0",
        "--proxy", proxy, "--delay", "0.01", "--robots-retry", "0.05", "--secret", secret,
        *extra,
    ]  # fmt: skip
    proc = await trio.lowlevel.open_process(cmd, stderr=subprocess.PIPE)
    peer = PeerProcess(proc, data)
    nursery.start_soon(peer.drain)
    with trio.fail_after(30):
        m = await peer.wait_for(_BANNER.pattern)
    peer.peer_id, peer.address = m.group(1).decode(), m.group(2).decode()
    return peer


async def start_quiet_peer(proxy: str, data: Path, seeds: Path | None, *extra: str) -> trio.Process:
    """A peer whose output is thrown away, for tests that kill it at random moments
    (its stderr is never drained, so nothing it prints may block it)."""
    cmd = [
        *UBIPY, "peer", "--data", str(data), "--listen", "127.0.0.1:0", "--proxy", proxy,
        "--delay", "0.01", "--robots-retry", "0.05", *extra,
        *(["--seeds", str(seeds)] if seeds is not None else []),
    ]  # fmt: skip
    return await trio.lowlevel.open_process(cmd, stderr=subprocess.DEVNULL)


async def stop_all(peers: list[PeerProcess]) -> None:
    for p in peers:
        if p.proc.returncode is None:
            p.proc.terminate()
    with trio.move_on_after(30):
        for p in peers:
            await p.proc.wait()
    for p in peers:
        if p.proc.returncode is None:
            p.proc.kill()
            await p.proc.wait()


async def run_cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return await trio.run_process(
        [*UBIPY, *args], capture_stdout=True, capture_stderr=True, check=False
    )


async def start_peer_or_fail(
    nursery: trio.Nursery,
    data: Path,
    proxy: str,
    *extra: str,
    secret: str = "s3cret",
    patience: float = 30.0,
    listen: str = "127.0.0.1:0",
    prefix: tuple[str, ...] = (),
) -> PeerProcess:
    """Like ``start_peer``, but a peer that exits before its banner fails at once, with
    its exit status and log in the message, instead of after ``patience`` seconds.
    ``prefix`` goes before the command (``ip netns exec NS``)."""
    cmd = [
        *prefix, *UBIPY, "-v", "peer", "--data", str(data), "--listen", listen,
        "--proxy", proxy, "--delay", "0.01", "--robots-retry", "0.05", "--secret", secret,
        *extra,
    ]  # fmt: skip
    proc = await trio.lowlevel.open_process(cmd, stderr=subprocess.PIPE)
    peer = PeerProcess(proc, data)
    drained = trio.Event()

    async def drain() -> None:
        try:
            await peer.drain()
        finally:
            drained.set()

    nursery.start_soon(drain)
    with trio.fail_after(patience):
        async with trio.open_nursery() as race:

            async def banner_seen() -> None:
                await peer.wait_for(_BANNER.pattern)
                race.cancel_scope.cancel()

            async def gone() -> None:
                await drained.wait()  # end of its stderr: the peer has exited
                race.cancel_scope.cancel()

            race.start_soon(banner_seen)
            race.start_soon(gone)
    m = _BANNER.search(peer.output)
    if m is None:
        with trio.fail_after(5):
            code = await proc.wait()
        tail = bytes(peer.output[-2000:]).decode(errors="replace")
        raise AssertionError(f"peer on {data} exited {code} before its banner:\n{tail}")
    peer.peer_id, peer.address = m.group(1).decode(), m.group(2).decode()
    return peer


async def status_json(address: str, secret: str = "s3cret") -> dict[str, Any]:
    """The cluster-wide STATUS answer of the peer at ``address``, as plain JSON."""
    from ubipy.net import request
    from ubipy.wire import StatusRequest, secret_from

    answer = await request(address, secret_from(secret), StatusRequest(cluster=True))
    payload: dict[str, Any] = json.loads(json.dumps(answer.to_wire()))
    return payload


async def members_alive(peer: PeerProcess, secret: str = "s3cret") -> set[str]:
    """The ids the peer sees alive; none while it does not answer."""
    try:
        report = await status_json(peer.address, secret)
    except OSError:
        return set()
    return {m["id"] for m in report["members"] if m["state"] == "alive"}


async def wait_for_one_view(
    peers: Sequence[PeerProcess], everyone: set[str], within: float
) -> None:
    """Ask every peer which members it sees alive, every half second (a status is a
    frame to each peer), until each sees ``everyone``; fail with their views if they
    do not within ``within`` seconds."""
    views: list[set[str]] = []
    for _ in range(max(1, int(within / 0.5))):
        views = [await members_alive(p) for p in peers]
        if all(v == everyone for v in views):
            return
        await trio.sleep(0.5)
    raise AssertionError(f"no one view in {within:g} s: {views}")
