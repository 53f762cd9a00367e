"""A rate over a rolling window of readings of a running count (pages fetched), for
the progress line and the control centre's per-peer rates."""

from __future__ import annotations

from collections import deque


class RollingRate:
    """Readings ``(t, count)`` of a count that only grows, kept over the last
    ``window`` units of ``t``; the rate is the count's change over the window.

    A reading older than the window is kept while it is the only one that spans it,
    and the count at the window's start is read between it and the next, as if the
    count grew evenly between them: after a gap in the readings (a peer stopped for a
    while, SIGSTOP) the rate is the window's, not the gap's and the window's (QA: 1.1
    pages/s shown for 15)."""

    __slots__ = ("_readings", "window")

    def __init__(self, window: float) -> None:
        self.window = window
        self._readings: deque[tuple[float, int]] = deque()

    def add(self, t: float, count: int) -> None:
        readings = self._readings
        readings.append((t, count))
        while len(readings) > 2 and readings[1][0] <= t - self.window:
            readings.popleft()

    @property
    def last(self) -> tuple[float, int] | None:
        """The latest reading, if any."""
        return self._readings[-1] if self._readings else None

    def rate(self) -> float | None:
        """Change per unit of ``t`` over the readings; None until they span some time."""
        if len(self._readings) < 2:
            return None
        (t0, c0), (t1, c1) = self._readings[0], self._readings[-1]
        start, first = t1 - self.window, float(c0)
        if t0 < start:
            ta, ca = self._readings[1]
            first, t0 = c0 + (ca - c0) * (start - t0) / (ta - t0), start
        return (c1 - first) / (t1 - t0) if t1 > t0 else None
