"""Asking a peer from the command line when the peer says nothing (a frozen process)."""

from __future__ import annotations

import functools
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

from ubipy.net import Network, request
from ubipy.wire import StatusRequest, secret_from

UBIPY = [sys.executable, "-m", "ubipy.cli"]


def _mute_listener() -> socket.socket:
    """A port that takes connections (the kernel's backlog) and never answers."""
    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen()
    return mute


async def test_the_user_hears_of_a_silent_peer_before_the_patience_ends(
    autojump_clock: trio.testing.MockClock,
) -> None:
    said: list[float] = []
    with _mute_listener() as mute:
        there = f"127.0.0.1:{mute.getsockname()[1]}"
        start = trio.current_time()
        with pytest.raises(OSError, match="took the connection but did not answer within 30"):
            await request(
                there,
                secret_from(None),
                StatusRequest(),
                patience=30.0,
                waiting=lambda: said.append(trio.current_time() - start),
            )
        assert trio.current_time() - start == pytest.approx(30.0, abs=0.5)
    assert said == [pytest.approx(5.0, abs=0.5)]


class _Blackhole(Network):
    """Dials that nothing answers, not even a kernel (a firewall that drops them)."""

    async def serve(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("nothing listens here")

    async def connect(self, address: str) -> trio.abc.Stream:
        await trio.sleep_forever()


async def test_a_connection_nobody_takes_is_told_from_a_peer_that_does_not_answer(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A peer stopped (SIGSTOP) still has its kernel take the connection, and acts on
    what was sent once it runs again: told "is it a ubipy peer, with this secret?", an
    operator took a seed sent as lost (QA). Nothing took this one."""
    with pytest.raises(OSError, match=r"did not take the connection within 30\.0 s"):
        await request(
            "127.0.0.1:7000",
            secret_from(None),
            StatusRequest(),
            patience=30.0,
            network=_Blackhole(),
        )


async def test_a_failure_before_the_notice_ends_it_unsaid(
    autojump_clock: trio.testing.MockClock,
) -> None:
    said: list[str] = []
    with pytest.raises(OSError, match="all attempts to connect"):
        # Nothing listens on port 9 here: the failure comes at once, and no notice after.
        await request(
            "127.0.0.1:9", secret_from(None), StatusRequest(), waiting=lambda: said.append("x")
        )
    await trio.sleep(60)
    assert said == []


@pytest.mark.parametrize("command", ["status", "seed"])
def test_timeout_bounds_the_wait_for_a_silent_peer(tmp_path: Path, command: str) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.test/\n")
    file = [str(seeds)] if command == "seed" else []
    with _mute_listener() as mute:
        there = f"127.0.0.1:{mute.getsockname()[1]}"
        done = subprocess.run(
            [*UBIPY, command, *file, "--peer", there, "--timeout", "0.5"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert f"ubipy {command}: cannot reach peer {there}: " in done.stderr
    assert "took the connection but did not answer within 0.5 s: a peer stalled" in done.stderr


async def test_an_http_server_asked_as_a_peer_is_named_so() -> None:
    # The control centre's port given as --peer: "closed the connection without an
    # authentic answer (is it a ubipy peer, with this secret?)" sent the user looking
    # at the secret (QA).
    async def http_server(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.receive_some(4096)
            await stream.send_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, http_server, 0, host="127.0.0.1")
        listeners = await nursery.start(serve)
        port = listeners[0].socket.getsockname()[1]
        with pytest.raises(OSError, match="is an HTTP server, not a ubipy peer's port") as got:
            await request(f"127.0.0.1:{port}", secret_from(None), StatusRequest(), patience=10)
        assert not isinstance(got.value, PermissionError)
        nursery.cancel_scope.cancel()
