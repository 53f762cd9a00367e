"""The accounting of accepted connections and the rate limits on logging: pure, fed
events and times; and the accept loop that outlives running out of descriptors."""

from __future__ import annotations

import errno
import logging
from typing import cast

import pytest
import trio
import trio.testing

from ubipy.net.guard import Accepted, SourceLog, Throttle, default_caps
from ubipy.net.network import _accept_loop


def test_the_oldest_unauthenticated_connection_makes_room_for_a_new_one() -> None:
    acc: Accepted[str] = Accepted(max_total=10, max_unauthenticated=3)
    assert [acc.admit(c) for c in "abc"] == [(True, [])] * 3
    assert acc.admit("d") == (True, ["a"])
    acc.authenticated("b")
    assert acc.admit("e") == (True, [])  # b no longer counts as a stranger
    assert acc.unauthenticated == 3 and acc.total == 4
    assert acc.evicted == 1


def test_authenticated_connections_are_capped_as_a_whole() -> None:
    acc: Accepted[int] = Accepted(max_total=3, max_unauthenticated=2)
    for c in range(3):
        assert acc.admit(c)[0]
        acc.authenticated(c)
    assert acc.admit(99) == (False, [])
    assert acc.refused == 1
    acc.closed(0)
    assert acc.admit(99) == (True, [])


def test_one_pushed_out_does_not_come_back_by_authenticating() -> None:
    acc: Accepted[str] = Accepted(max_total=5, max_unauthenticated=1)
    acc.admit("a")
    acc.admit("b")  # pushes a out
    acc.authenticated("a")
    assert acc.total == 1


def test_caps_follow_the_descriptor_limit() -> None:
    total, unauthenticated = default_caps()
    assert 8 <= total <= 1024 and 4 <= unauthenticated <= min(64, total)
    with pytest.raises(ValueError):
        Accepted(max_total=2, max_unauthenticated=3)


def test_a_source_gets_a_line_a_second_and_the_next_one_counts_the_rest() -> None:
    log = SourceLog(interval=1.0)
    assert log.line("10.0.0.9", "bad_tag", "", 0.0) == "10.0.0.9: bad_tag"
    assert all(log.line("10.0.0.9", "bad_tag", "", t / 1000) is None for t in range(1, 999))
    assert log.line("10.0.0.8", "too_large", "frame of 9 bytes", 0.5) == (
        "10.0.0.8: too_large (frame of 9 bytes)"
    )
    line = log.line("10.0.0.9", "bad_length", "", 1.0)
    assert line == "10.0.0.9: bad_length; since the last line: 998 bad_tag"
    assert log.line("10.0.0.9", "bad_tag", "", 2.5) == "10.0.0.9: bad_tag"


def test_the_sources_remembered_are_bounded() -> None:
    log = SourceLog(max_sources=10)
    for i in range(1000):
        log.line(f"h{i}", "bad_tag", "", 0.0)
    assert len(log._sources) == 10


def test_a_throttle_counts_what_it_does_not_log() -> None:
    t = Throttle(60.0)
    assert t.hit(0.0) == 1
    assert [t.hit(s) for s in range(1, 60)] == [None] * 59
    assert t.hit(60.0) == 60
    assert t.count == 61


class _FullListener:
    """Fails accept() with EMFILE a number of times, then waits forever."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.exhausted = trio.Event()

    async def __aenter__(self) -> _FullListener:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def accept(self) -> trio.abc.Stream:
        if self.failures:
            self.failures -= 1
            raise OSError(errno.EMFILE, "Too many open files")
        self.exhausted.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")


async def test_running_out_of_descriptors_is_a_line_a_minute_not_a_traceback_per_accept(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    listener = _FullListener(failures=1200)  # two minutes of tries, 0.1 s apart
    with caplog.at_level(logging.WARNING, logger="ubipy.net"):
        async with trio.open_nursery() as nursery:

            async def handler(stream: trio.abc.Stream) -> None:
                pass

            nursery.start_soon(
                _accept_loop,
                cast(trio.SocketListener, listener),
                handler,
                Throttle(60.0),
                nursery,
            )
            with trio.fail_after(200):
                await listener.exhausted.wait()
            nursery.cancel_scope.cancel()
    assert 2 <= len(caplog.records) <= 3
    assert all(r.exc_info is None for r in caplog.records)
    assert "Too many open files" in caplog.text
