"""A peer stopped with SIGSTOP and continued, as an OS process: it says it did not run
(the unit test of the wording is tests/peer/test_stalls.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import trio

from ubipy.peer.stalls import STALLED


async def test_a_peer_stopped_and_continued_says_it_did_not_run(tmp_path: Path) -> None:
    cmd = [
        sys.executable, "-m", "ubipy.cli", "peer", "--data", str(tmp_path / "p"),
        "--listen", "127.0.0.1:0", "--secret", "s3cret",
    ]  # fmt: skip
    proc = await trio.lowlevel.open_process(cmd, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    said = bytearray()
    try:
        with trio.fail_after(30):
            while b"listening on" not in said:
                said += await proc.stderr.receive_some(4096)
            os.kill(proc.pid, signal.SIGSTOP)
            await trio.sleep(STALLED + 2)  # the stall itself: what is tested
            os.kill(proc.pid, signal.SIGCONT)
            while b"this process did not run for" not in said:
                said += await proc.stderr.receive_some(4096)
    finally:
        proc.terminate()
        with trio.fail_after(30):
            await proc.wait()
    assert b"did not run for 1" in said  # 12 s or so
