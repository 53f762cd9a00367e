"""A process that did not run for a while says so once it runs again (QA: a peer
stopped with SIGSTOP logged only frames "stale (sent_at is -89.8 s from now)")."""

from __future__ import annotations

import logging

import pytest

from ubipy.peer.stalls import STALLED, say_if_stalled


def test_a_timer_woken_late_is_said_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    assert not say_if_stalled(None, 100.0)  # nothing was due
    assert not say_if_stalled(100.0, 100.0 + STALLED)  # a busy loop, not a stall
    assert say_if_stalled(100.0, 190.0)
    assert [r.getMessage() for r in caplog.records] == [
        "this process did not run for 90 s (stopped, paused or starved of CPU): the others "
        "may have taken it for dead; it catches up now"
    ]


def test_a_loop_held_by_its_own_work_is_not_said_to_have_been_stopped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The process ran meanwhile (a hostile page's parse held the loop, QA): "did not
    run" sent the operator looking for a SIGSTOP or a paused machine."""
    caplog.set_level(logging.WARNING)
    assert say_if_stalled(100.0, 112.0, cpu=11.5)
    assert [r.getMessage() for r in caplog.records] == [
        "this peer's event loop was held 12 s by its own work (12 s of CPU): the others "
        "may have taken it for dead; it catches up now"
    ]
