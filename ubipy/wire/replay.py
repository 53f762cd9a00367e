"""Whether an authentic frame is fresh and new: the :class:`ReplayGuard` that every
connection of a peer shares. Like :mod:`ubipy.wire.reader`, no I/O: the reader passes
each frame and the wall-clock ``now`` in; the guard reads a monotonic clock (injected,
``time.monotonic`` by default) to know when it may forget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ubipy.wire.frames import Frame, FrameType, Rejected, RejectReason

DEFAULT_MAX_SKEW: Final = 60.0
DEFAULT_WINDOW: Final = 1024


@dataclass(slots=True)
class _Window:
    highest: int
    # Bit i set: sequence number highest - i has been admitted.
    seen: int
    # The newest sent_at admitted, and when (monotonic) a frame was last admitted:
    # once both are old enough, every frame of this epoch is stale and the window
    # can be forgotten (prune()).
    newest: float
    heard: float


class ReplayGuard:
    """Admits each (sender, epoch, seq) once, and only while it is fresh.

    Shared by all of a peer's connections, so a frame captured on one cannot be
    replayed on another. Per (sender, epoch) it keeps the highest sequence number
    and a bitmap of the ``window`` below it: a number seen before, or older than the
    window, is a REPLAY. A ``sent_at`` more than ``max_skew`` from ``now`` is STALE;
    that bound is what lets windows of epochs gone quiet be forgotten. With
    ``local_id`` it also refuses frames claiming to come from this peer (REFLECTED:
    a frame of ours bounced back) or addressed to another one (MISDIRECTED). With
    ``local_epoch`` too, a MEMBERSHIP frame under this peer's id that names it as its
    recipient and is of another epoch is admitted: another live process under this id
    (a data directory copied) telling it its outbids (ubipy.membership.clash). No peer
    names itself as a recipient but for that, so the frames a previous life sent to
    others cannot be replayed as one; only those of a previous life that was itself in
    such a clash, within the minute they stay fresh.

    ``clock`` is a monotonic clock in seconds: when windows may be forgotten is
    measured on it, not on the wall clock, which can step.
    """

    def __init__(
        self,
        *,
        local_id: str | None = None,
        local_epoch: int | None = None,
        max_skew: float = DEFAULT_MAX_SKEW,
        window: int = DEFAULT_WINDOW,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not max_skew > 0 or not math.isfinite(max_skew):
            raise ValueError(f"max_skew must be a positive number of seconds: {max_skew!r}")
        if window < 1:
            raise ValueError(f"window must be at least 1: {window!r}")
        self.local_id = local_id
        self.local_epoch = local_epoch
        self.max_skew = float(max_skew)
        self.window = window
        self._clock = clock
        self._windows: dict[tuple[str, int], _Window] = {}
        self._next_prune = -math.inf

    def __len__(self) -> int:
        """How many (sender, epoch) windows are held."""
        return len(self._windows)

    def admit(self, frame: Frame, now: float) -> Rejected | None:
        """None if the frame is admitted (and recorded as seen), else why not."""
        heard = self._clock()
        if heard >= self._next_prune:
            self.prune(now)
        sender = frame.sender
        if self.local_id is not None and sender == self.local_id and not self._other_life(frame):
            return Rejected(RejectReason.REFLECTED, "a frame from this peer", sender)
        # Stale before misdirected: an old capture replayed to another peer is a
        # stranger's doing, and is counted as one (a misdirected frame is not).
        skew = frame.sent_at - now
        if not abs(skew) <= self.max_skew:
            return Rejected(RejectReason.STALE, f"sent_at is {skew:+.1f} s from now", sender)
        if self.local_id is not None and frame.recipient not in ("", self.local_id):
            return Rejected(RejectReason.MISDIRECTED, f"addressed to {frame.recipient!r}", sender)
        key = (sender, frame.epoch)
        seq = frame.seq
        win = self._windows.get(key)
        if win is None:
            self._windows[key] = _Window(seq, 1, frame.sent_at, heard)
            return None
        if seq > win.highest:
            shift = seq - win.highest
            # A shift past the window clears it; shifting by the raw distance could
            # build an int of up to 2**63 bits.
            win.seen = ((win.seen << shift) | 1) & self._mask if shift < self.window else 1
            win.highest = seq
        else:
            offset = win.highest - seq
            if offset >= self.window:
                return Rejected(RejectReason.REPLAY, f"seq {seq} is older than the window", sender)
            bit = 1 << offset
            if win.seen & bit:
                return Rejected(RejectReason.REPLAY, f"seq {seq} seen before", sender)
            win.seen |= bit
        win.newest = max(win.newest, frame.sent_at)
        win.heard = heard
        return None

    def _other_life(self, frame: Frame) -> bool:
        """Whether a frame under this peer's id is another process's, telling it so."""
        epoch = self.local_epoch
        return (
            epoch is not None
            and frame.epoch != epoch
            and frame.recipient == self.local_id
            and frame.type is FrameType.MEMBERSHIP
        )

    @property
    def _mask(self) -> int:
        return (1 << self.window) - 1

    def prune(self, now: float) -> int:
        """Forget windows whose frames are all stale; how many were forgotten.

        A window goes once no frame of it has been admitted for ``2 * max_skew``
        seconds of the monotonic clock (every frame admitted had a ``sent_at`` within
        ``max_skew`` of the wall clock then, so all are stale by now if the wall clock
        ran with it) and, by the wall-clock ``now``, its newest frame is stale too.
        Measured on the wall clock alone, a step forward forgot windows whose frames
        were fresh again once the clock stepped back: replays admitted.

        admit() calls this every max_skew / 2 monotonic seconds, so memory is bounded
        by the (sender, epoch) pairs heard from in about the last 2.5 * max_skew.
        """
        clock = self._clock()
        quiet = clock - 2 * self.max_skew
        horizon = now - self.max_skew
        dead = [
            key for key, win in self._windows.items() if win.heard < quiet and win.newest < horizon
        ]
        for key in dead:
            del self._windows[key]
        self._next_prune = clock + self.max_skew / 2
        return len(dead)
