"""The accounting of accepted connections and the rate limits on logging: pure, fed
events and times; and the accept loop that outlives running out of descriptors."""

from __future__ import annotations

import errno
import logging
import os
import socket
from typing import cast

import pytest
import trio
import trio.testing

from ubipy.net.guard import Accepted, SourceLog, Strikes, Throttle, default_caps
from ubipy.net.network import _accept_loop


def test_the_oldest_unauthenticated_connection_makes_room_for_a_new_one() -> None:
    acc: Accepted[str] = Accepted(max_total=10, max_unauthenticated=3)
    assert [acc.admit(c) for c in "abc"] == [(True, [])] * 3
    assert acc.admit("d") == (True, ["a"])
    acc.authenticated("b")
    assert acc.admit("e") == (True, [])  # b no longer counts as a stranger
    assert acc.unauthenticated == 3 and acc.total == 4
    assert acc.evicted == 1


def test_a_flood_from_one_source_pushes_out_its_own_connections() -> None:
    acc: Accepted[str] = Accepted(max_total=100, max_unauthenticated=4)
    acc.admit("member", "10.0.0.2")
    for i in range(50):
        keep, evicted = acc.admit(f"x{i}", "10.6.6.6")
        assert keep and "member" not in evicted
    acc.authenticated("member")
    assert acc.total == 4 and acc.unauthenticated == 3


def test_a_flood_from_one_ipv6_64_is_one_source() -> None:
    acc: Accepted[str] = Accepted(max_total=100, max_unauthenticated=4)
    acc.admit("member", "2001:db8:1::2")
    for i in range(50):
        keep, evicted = acc.admit(f"x{i}", f"2001:db8:6:6::{i + 1:x}")
        assert keep and "member" not in evicted
    acc.authenticated("member")
    assert acc.total == 4 and acc.unauthenticated == 3


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


def test_many_sources_at_once_get_a_few_lines_and_the_next_one_counts_the_rest() -> None:
    """A stranger with many addresses (a /8 of IPv4, or IPv6's) gets no more lines
    than one with a few: the lines of all sources are limited too."""
    log = SourceLog(rate=1.0, burst=10)
    lines = [log.line(f"10.{i // 250}.{i % 250}.1", "bad_tag", "", 0.0) for i in range(2000)]
    assert len([line for line in lines if line is not None]) == 10
    # One second on: a line again, saying how many were left out.
    line = log.line("10.99.0.1", "bad_length", "", 1.0)
    assert line == "10.99.0.1: bad_length; from sources past the limit on lines: 1990 bad_tag"


def test_an_ipv6_stranger_counts_as_one_source_per_64() -> None:
    log = SourceLog(interval=1.0)
    assert log.line("2001:db8::1", "bad_tag", "", 0.0) == "2001:db8::1: bad_tag"
    assert log.line("2001:db8::2", "bad_tag", "", 0.1) is None  # the same /64
    assert log.line("2001:db8:0:1::1", "bad_tag", "", 0.1) is not None  # another
    assert log.line("::ffff:10.0.0.1", "bad_tag", "", 0.1) is not None  # IPv4, mapped
    assert log.line("::ffff:10.0.0.2", "bad_tag", "", 0.1) is not None
    strikes = Strikes(limit=3, window=10.0, penalty=60.0)
    assert not strikes.failed("2001:db8::1", 0.0)
    assert not strikes.failed("2001:db8::2", 0.1)
    assert strikes.failed("2001:db8::ffff", 0.2)
    assert strikes.barred("2001:db8::abcd", 1.0)
    assert not strikes.barred("2001:db8:0:1::1", 1.0)


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


class _FullSocket:
    """A listening socket that is always readable and fails accept() with ``code``
    (EMFILE) a number of times, then has nothing more queued."""

    def __init__(self, failures: int, code: int = errno.EMFILE) -> None:
        self.failures = failures
        self.code = code
        self.exhausted = trio.Event()
        self._read, self._write = os.pipe()
        os.write(self._write, b"x")

    def fileno(self) -> int:
        return self._read

    def setblocking(self, flag: bool) -> None:
        pass

    def __enter__(self) -> _FullSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._read)
        os.close(self._write)

    def accept(self) -> tuple[socket.socket, object]:
        if self.failures:
            self.failures -= 1
            raise OSError(self.code, os.strerror(self.code))
        self.exhausted.set()
        raise BlockingIOError


async def test_running_out_of_descriptors_is_a_line_a_minute_not_a_traceback_per_accept(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    full = _FullSocket(failures=1200)  # two minutes of tries, 0.1 s apart
    with caplog.at_level(logging.WARNING, logger="ubipy.net"):
        async with trio.open_nursery() as nursery:

            async def handler(stream: trio.abc.Stream) -> None:
                pass

            nursery.start_soon(
                _accept_loop, cast(socket.socket, full), handler, None, Throttle(60.0), nursery
            )
            with trio.fail_after(200):
                await full.exhausted.wait()
            nursery.cancel_scope.cancel()
    assert 2 <= len(caplog.records) <= 3
    assert all(r.exc_info is None for r in caplog.records)
    assert "Too many open files" in caplog.text


def test_a_source_that_keeps_failing_is_turned_away_for_a_while() -> None:
    strikes = Strikes(limit=3, window=10.0, penalty=30.0)
    # Failures spread wider than the window do not add up.
    assert not any(strikes.failed("10.6.6.6", t) for t in (0.0, 11.0, 22.0, 33.0))
    assert not strikes.failed("10.6.6.6", 34.0)
    assert strikes.failed("10.6.6.6", 35.0)
    assert strikes.barred("10.6.6.6", 64.9) and not strikes.barred("10.0.0.2", 40.0)
    # Connections accepted before the bar that end during it do not bar it again.
    assert not any(strikes.failed("10.6.6.6", 36.0) for _ in range(10))
    assert not strikes.barred("10.6.6.6", 65.0)
    # A member that authenticates starts afresh.
    strikes.failed("10.0.0.2", 0.0)
    strikes.failed("10.0.0.2", 1.0)
    strikes.authenticated("10.0.0.2")
    strikes.closed("10.0.0.2", 1.5)
    assert not strikes.failed("10.0.0.2", 2.0)


def test_a_members_address_is_not_barred_for_a_stranger_on_it() -> None:
    strikes = Strikes(limit=3, window=10.0, penalty=30.0, trust=600.0)
    # Barred before any member spoke from it; a member authenticating lifts the bar.
    assert [strikes.failed("10.0.0.2", t) for t in (0.0, 1.0, 2.0)] == [False, False, True]
    strikes.authenticated("10.0.0.2")
    assert not strikes.barred("10.0.0.2", 3.0)
    strikes.authenticated("10.0.0.2")
    # A stranger sharing the address (one machine, a NAT) strikes nothing meanwhile.
    assert not any(strikes.failed("10.0.0.2", 3.0 + t / 10) for t in range(100))
    assert not strikes.barred("10.0.0.2", 13.0)
    # One of the member's two connections closes: the other still vouches for it.
    strikes.closed("10.0.0.2", 20.0)
    assert not any(strikes.failed("10.0.0.2", 700.0 + t) for t in range(5))
    # Once none is open, the address is trusted for a while, then struck as any other.
    strikes.closed("10.0.0.2", 800.0)
    assert not any(strikes.failed("10.0.0.2", 1399.0) for _ in range(5))
    assert [strikes.failed("10.0.0.2", 1400.0 + t) for t in (0.0, 1.0, 2.0)] == [
        False,
        False,
        True,
    ]
    assert strikes.barred("10.0.0.2", 1403.0) and not strikes.barred("10.0.0.3", 1403.0)


def test_the_sources_struck_are_bounded() -> None:
    strikes = Strikes(limit=1, max_sources=10)
    for i in range(1000):
        strikes.failed(f"h{i}", 0.0)
    assert not strikes.barred("h0", 1.0) and strikes.barred("h999", 1.0)


@pytest.mark.parametrize(
    "code", [errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ETIMEDOUT, errno.ECONNRESET]
)
async def test_a_connection_that_failed_while_queued_is_passed_over(
    code: int, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    """Linux's accept() reports a network error the queued connection met (a stranger
    can cause one): the listener goes on to the next, quietly."""
    failed = _FullSocket(failures=3, code=code)

    async def handler(stream: trio.abc.Stream) -> None:
        pass

    with caplog.at_level(logging.WARNING, logger="ubipy.net"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                _accept_loop, cast(socket.socket, failed), handler, None, Throttle(60.0), nursery
            )
            with trio.fail_after(1):
                await failed.exhausted.wait()
            nursery.cancel_scope.cancel()
    assert caplog.records == []
