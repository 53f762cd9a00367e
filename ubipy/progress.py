"""Live progress for ``ubipy peer`` and ``ubipy demo``, and the units the tables use.

On a terminal, one line rewritten in place about once a second; elsewhere (a log
file, a pipe) a plain, whole log line every ``interval`` seconds, and one at the end.

    progress = Progress(sys.stderr, interval=10.0)
    nursery.start_soon(progress.run, lambda: peer_figures([peer]))

The figures come from a callable, so the same display serves one peer or the sum
over the peers of an in-process cluster. Pages/s is measured here over the last
few seconds, not the lifetime average, so it follows the crawl's pace.
"""

from __future__ import annotations

import logging
import math
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TextIO

import trio

from ubipy.rolling import RollingRate

if TYPE_CHECKING:
    from ubipy.peer import Peer

_CLEAR: Final = "\r\x1b[K"  # back to the line's start, then erase it


@dataclass(frozen=True, slots=True)
class Figures:
    """What the progress line shows: counters summed over the peers it follows."""

    pages: int
    frontier: int
    in_flight: int
    errors: int
    # The cluster as one peer sees it: members that own a share of the ring (alive
    # or suspect) and all it knows of (dead and departed included).
    peers_alive: int = 1
    peers_known: int = 1
    # The first peer's join attempt while it is alone (0: not joining), and why it
    # fetches nothing, if it does not.
    joining: int = 0
    paused: str | None = None
    holding: str | None = None
    # Under --recrawl: visits of pages fetched before, among the pages (None: not one
    # of a continuous crawl; QA read "frontier 0" and no word of the refreshes).
    refreshes: int | None = None


def peer_figures(peers: Sequence[Peer]) -> Figures:
    """The figures of running peers, summed; the members as the first one sees them.
    Counters only, read every second: a peer's whole status walks every host it
    knows (for its slowest ones), which is the control centre's to ask for."""
    crawlers = [p.crawler for p in peers]
    membership = peers[0].membership
    return Figures(
        pages=sum(c.stats.pages for c in crawlers),
        frontier=sum(c.pending for c in crawlers),
        in_flight=sum(c.scheduler.requests for c in crawlers),
        errors=sum(c.stats.errors for c in crawlers),
        # The peer that reads is alive while it reads: once it has left (its last
        # line), alive_ids leaves it out, and the line read "peers 0/4" (QA).
        peers_alive=len(membership.alive_ids() | {membership.self_id}),
        peers_known=len(membership.members()),
        joining=peers[0].joining,
        paused=crawlers[0].paused,
        holding=peers[0].handoff.holding(trio.current_time()),
        refreshes=None
        if crawlers[0].refresher is None
        else sum(c.refresher.stats.refreshes for c in crawlers if c.refresher is not None),
    )


def human_bytes(n: float) -> str:
    """``512 B``, ``1.5 KiB``, ``12.3 MiB``…"""
    if n < 1024:
        return f"{int(n)} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        n /= 1024
        if n < 1024 or unit == "TiB":
            break
    return f"{n:.1f} {unit}"


def human_duration(seconds: float) -> str:
    """``45s``, ``2m05s``, ``1h02m03s``, ``3d04h05m``."""
    s = int(max(seconds, 0.0))
    days, s = divmod(s, 86_400)
    hours, s = divmod(s, 3_600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days}d{hours:02d}h{minutes:02d}m"
    if hours:
        return f"{hours}h{minutes:02d}m{s:02d}s"
    if minutes:
        return f"{minutes}m{s:02d}s"
    return f"{s}s"


class Progress:
    """A live line on a terminal, plain log lines elsewhere.

    ``update(figures, now)`` takes a reading (``now`` on any monotonic clock) and
    draws when it is due; ``end()`` draws the last reading, and on a terminal ends
    the line. ``run(source)`` does both on trio's clock until cancelled.
    """

    def __init__(
        self,
        out: TextIO,
        *,
        interval: float = 10.0,
        refresh: float = 1.0,
        window: float = 5.0,
        label: str = "progress",
    ) -> None:
        self.out = out
        self.tty = out.isatty()
        self.interval = interval
        self.refresh = refresh
        self.window = window
        self.label = label
        self._rate = RollingRate(window)
        self._last: Figures | None = None
        self._started: float | None = None
        self._drawn_at: float | None = None
        self._on_screen = False  # a terminal line is drawn and not yet ended

    # -- readings ---------------------------------------------------------------
    def update(self, figures: Figures, now: float) -> None:
        """Take a reading; draw it if a line is due."""
        self._record(figures, now)
        if self.tty:
            due = self._drawn_at is None or now - self._drawn_at >= self.refresh
        else:
            due = now >= self._next_line()
        if due:
            self._draw(now)

    def _next_line(self) -> float:
        """Off a terminal, when the next log line is due: one interval after the last
        (the first, one interval after the first reading: a line of zeros says
        nothing)."""
        since = self._drawn_at if self._drawn_at is not None else self._started
        return -math.inf if since is None else since + self.interval

    def next_reading(self, now: float) -> float:
        """When ``run`` takes its next reading, after one at ``now``: on a terminal every
        ``refresh`` seconds; elsewhere only where a line needs one, at the start of its
        rate's window and at the line itself (an idle peer's every wake-up costs it CPU,
        on some machines hundreds of microseconds)."""
        if self.tty:
            return now + self.refresh
        line = self._next_line()
        return line - self.window if line - self.window > now else line

    def _record(self, figures: Figures, now: float) -> None:
        if self._started is None:
            self._started = now
        self._last = figures
        self._rate.add(now, figures.pages)

    @property
    def pages_per_second(self) -> float:
        """Over the last ``window`` seconds of readings (0 before two readings)."""
        return self._rate.rate() or 0.0

    def line(self, now: float) -> str:
        """The figures of the last reading as one line (without a newline)."""
        f = self._last or Figures(0, 0, 0, 0)
        elapsed = human_duration(now - (self._started if self._started is not None else now))
        parts = [
            f"{f.pages} pages"
            + ("" if f.refreshes is None else f" ({f.refreshes} of them refreshes)"),
            f"{self.pages_per_second:.1f} pages/s",
            f"frontier {f.frontier}",
            f"in flight {f.in_flight}",
            f"errors {f.errors}",
        ]
        if f.peers_known > 1:
            parts.append(f"peers {f.peers_alive}/{f.peers_known}")
        if f.joining:
            parts.append(f"joining (attempt {f.joining})")
        if f.paused:
            parts.append(f"PAUSED: {f.paused}")
        if f.holding:
            parts.append(f"HOLDING: {f.holding}")
        if self.tty:
            return f"{elapsed:>6}  " + "  ".join(parts)
        return f"{self.label} {elapsed}: " + ", ".join(parts)

    def _draw(self, now: float) -> None:
        self._drawn_at = now
        text = self.line(now)
        if self.tty:
            width = shutil.get_terminal_size().columns
            # A line that wrapped could not be rewritten in place.
            self.out.write(_CLEAR + text[: max(width - 1, 20)])
            self._on_screen = True
        else:
            self.out.write(text + "\n")  # one write: a whole line in the log
        self.out.flush()

    def end(self, figures: Figures | None = None, now: float | None = None) -> None:
        """Take a last reading if given, show the figures once more, and leave the
        terminal on a fresh line."""
        if figures is not None:
            self._record(figures, now if now is not None else self._latest())
        if self._last is not None:
            self._draw(self._latest())
        if self._on_screen:
            self.out.write("\n")
            self.out.flush()
            self._on_screen = False

    def _latest(self) -> float:
        last = self._rate.last
        return 0.0 if last is None else last[0]

    def clear(self) -> None:
        """Erase the terminal line (before something else is written there)."""
        if self._on_screen:
            self.out.write(_CLEAR)
            self.out.flush()
            self._on_screen = False
            self._drawn_at = None  # draw again at the next reading

    # -- running ------------------------------------------------------------------
    async def run(self, source: Callable[[], Figures]) -> None:
        """Read ``source`` when a line needs it (``next_reading``) until cancelled, then
        ``end()`` with a last reading."""
        try:
            with self._clear_for_logging():
                while True:
                    now = trio.current_time()
                    self.update(source(), now)
                    await trio.sleep_until(self.next_reading(now))
        finally:
            try:
                last: Figures | None = source()
            except RuntimeError:  # what it follows has gone: its last reading stands
                last = None
            self.end(last, trio.current_time())

    @contextmanager
    def _clear_for_logging(self) -> Iterator[None]:
        """On a terminal, a log record written to the same stream first erases the
        progress line, which is drawn again at the next reading."""
        if not self.tty:
            yield
            return
        progress = self

        class _Clear(logging.Filter):
            def filter(self, record: logging.LogRecord) -> bool:
                progress.clear()
                return True

        clear = _Clear()
        # Two streams on terminals are most likely the same terminal.
        handlers = [
            h
            for h in logging.getLogger().handlers
            if isinstance(h, logging.StreamHandler) and (h.stream is self.out or _isatty(h.stream))
        ]
        for h in handlers:
            h.addFilter(clear)
        try:
            yield
        finally:
            for h in handlers:
                h.removeFilter(clear)


def _isatty(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    return callable(isatty) and isatty() is True


def wall_clock(started_at: float, now: float | None = None) -> str:
    """A wall-clock time, short: ``14:05:09`` today, ``Mar 02 14:05`` another day."""
    now = time.time() if now is None else now
    when, today = time.localtime(started_at), time.localtime(now)
    if when[:3] == today[:3]:
        return time.strftime("%H:%M:%S", when)
    return time.strftime("%b %d %H:%M", when)
