"""Counting wake-ups in a test: a trio instrument that counts the steps of tasks (each
step is a wake-up of that task) and the distinct moments of the clock at which they
ran (tasks due at one moment share one wake-up of the process)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import trio


class TaskSteps(trio.abc.Instrument):
    """Steps of every task, or of those whose name ends with one of ``names``."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.steps = 0
        self.moments: set[float] = set()

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if not self.names or task.name.endswith(self.names):
            self.steps += 1
            self.moments.add(trio.current_time())


@contextmanager
def counting_steps(*names: str) -> Iterator[TaskSteps]:
    steps = TaskSteps(*names)
    trio.lowlevel.add_instrument(steps)
    try:
        yield steps
    finally:
        trio.lowlevel.remove_instrument(steps)
