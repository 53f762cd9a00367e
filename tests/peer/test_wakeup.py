"""A loop's wake-up: it comes when set or at the deadline, whichever is first, and no
set is lost between two waits. On trio's mock clock, so times are exact."""

from __future__ import annotations

import trio
import trio.testing

from ubipy.peer.wakeup import Wakeup


async def test_unset_it_returns_at_the_deadline(autojump_clock: trio.testing.MockClock) -> None:
    wakeup = Wakeup()
    start = trio.current_time()
    assert await wakeup.wait(start + 7.0) is False
    assert trio.current_time() == start + 7.0


async def test_a_set_wakes_the_waiting_task_at_once(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    wakeup = Wakeup()
    start = trio.current_time()

    async def set_later() -> None:
        await trio.sleep(3.0)
        wakeup.set()

    nursery.start_soon(set_later)
    assert await wakeup.wait(start + 10.0) is True
    assert trio.current_time() == start + 3.0


async def test_without_a_deadline_it_waits_for_the_set(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    wakeup = Wakeup()
    start = trio.current_time()

    async def set_much_later() -> None:
        await trio.sleep(80_000.0)
        wakeup.set()

    nursery.start_soon(set_much_later)
    assert await wakeup.wait() is True
    assert trio.current_time() == start + 80_000.0


async def test_a_set_while_the_loop_is_busy_is_not_lost(
    autojump_clock: trio.testing.MockClock,
) -> None:
    wakeup = Wakeup()
    start = trio.current_time()
    # Set twice while nobody waits: the next wait returns at once, and only that one.
    wakeup.set()
    wakeup.set()
    assert wakeup.is_set()
    assert await wakeup.wait(start + 5.0) is True
    assert trio.current_time() == start
    assert not wakeup.is_set()
    assert await wakeup.wait(start + 5.0) is False
    assert trio.current_time() == start + 5.0


async def test_a_deadline_already_past_returns_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    wakeup = Wakeup()
    await trio.sleep(10.0)
    now = trio.current_time()
    assert await wakeup.wait(now - 1.0) is False
    wakeup.set()
    # Set wins over a past deadline: the set is not left for the next wait to find.
    assert await wakeup.wait(now - 1.0) is True
    assert not wakeup.is_set()
    assert trio.current_time() == now


async def test_each_wait_is_a_checkpoint(autojump_clock: trio.testing.MockClock) -> None:
    # A loop that finds work every time must still let other tasks run.
    wakeup = Wakeup()
    wakeup.set()
    with trio.CancelScope() as scope:
        scope.cancel()
        await wakeup.wait()
        raise AssertionError("not cancelled: wait() did not checkpoint")
