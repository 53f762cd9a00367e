"""The progress display: a line rewritten in place on a terminal, whole log lines
elsewhere; and the units the status table uses."""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator

import pytest
import trio
import trio.testing

from ubipy.progress import Figures, Progress, human_bytes, human_duration, wall_clock

CLEAR = "\r\x1b[K"
LOG_LINE = re.compile(
    r"progress \S+: \d+ pages, [\d.]+ pages/s, frontier \d+, in flight \d+, errors \d+"
    r"(, peers \d+/\d+)?"
)


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")


def figures(pages: int, frontier: int = 7, alive: int = 1, known: int = 1) -> Figures:
    return Figures(pages, frontier, in_flight=2, errors=1, peers_alive=alive, peers_known=known)


def test_units_are_human() -> None:
    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 5 * 2**20, 3 * 2**30, 2**50)] == [
        "0 B", "1023 B", "1.0 KiB", "1.5 KiB", "5.0 MiB", "3.0 GiB", "1024.0 TiB",
    ]  # fmt: skip
    assert [human_duration(s) for s in (-1, 0.4, 45, 125, 3723, 2 * 86_400 + 3 * 3600 + 240)] == [
        "0s", "0s", "45s", "2m05s", "1h02m03s", "2d03h04m",
    ]  # fmt: skip
    noon = 1_700_000_000.0
    assert re.fullmatch(r"\d\d:\d\d:\d\d", wall_clock(noon - 60, noon))
    assert re.fullmatch(r"[A-Z][a-z]{2} \d\d \d\d:\d\d", wall_clock(noon - 5 * 86_400, noon))


def test_off_a_terminal_a_whole_line_every_interval() -> None:
    out = io.StringIO()
    progress = Progress(out, interval=10.0)
    assert not progress.tty
    progress.update(figures(0), 100.0)
    progress.update(figures(20), 102.0)
    assert out.getvalue() == ""  # a line of zeros at the start says nothing
    progress.update(figures(50), 105.0)
    progress.update(figures(100), 110.0)
    progress.update(figures(120), 115.0)
    assert out.getvalue() == (
        # 50 pages in the last 5 s of readings
        "progress 10s: 100 pages, 10.0 pages/s, frontier 7, in flight 2, errors 1\n"
    )
    progress.update(figures(160, alive=2, known=3), 120.0)
    progress.end()
    lines = out.getvalue().splitlines(keepends=True)
    assert len(lines) == 3 and all(line.endswith("\n") for line in lines)
    assert all(LOG_LINE.fullmatch(line.rstrip("\n")) for line in lines)
    # The cluster's peers are shown once there is more than one.
    assert (
        lines[1]
        == lines[2]
        == ("progress 20s: 160 pages, 8.0 pages/s, frontier 7, in flight 2, errors 1, peers 2/3\n")
    )


def test_on_a_terminal_one_line_rewritten_about_once_a_second() -> None:
    out = FakeTerminal()
    progress = Progress(out, refresh=1.0)
    assert progress.tty
    progress.update(figures(0), 0.0)
    progress.update(figures(5), 0.5)  # not yet a second: not drawn
    progress.update(figures(12, frontier=3), 1.0)
    text = out.getvalue()
    assert "\n" not in text
    assert text.count(CLEAR) == 2
    assert text.endswith(
        CLEAR + "    1s  12 pages  12.0 pages/s  frontier 3  in flight 2  errors 1"
    )
    progress.end(figures(20, frontier=0), 2.0)
    assert out.getvalue().endswith(CLEAR + "    2s  20 pages  10.0 pages/s  frontier 0  "
                                   "in flight 2  errors 1\n")  # fmt: skip
    assert out.getvalue().count("\n") == 1


def test_on_a_narrow_terminal_the_line_is_cut_rather_than_wrapped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    out = FakeTerminal()
    progress = Progress(out)
    progress.update(figures(123456), 0.0)
    drawn = out.getvalue().removeprefix(CLEAR)
    assert len(drawn) == 39


@pytest.fixture
def root_handler() -> Iterator[tuple[FakeTerminal, logging.Handler]]:
    out = FakeTerminal()
    handler = logging.StreamHandler(out)
    logging.getLogger().addHandler(handler)
    try:
        yield out, handler
    finally:
        logging.getLogger().removeHandler(handler)


async def test_run_follows_its_source_and_ends_the_terminal_line(
    autojump_clock: trio.testing.MockClock,
    root_handler: tuple[FakeTerminal, logging.Handler],
) -> None:
    out, handler = root_handler
    pages = [0]
    progress = Progress(out, refresh=1.0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(progress.run, lambda: figures(pages[0]))
        await trio.sleep(2.5)
        pages[0] = 30
        # A log record on the same terminal erases the progress line first…
        logging.getLogger("ubipy.test").warning("something happened")
        assert out.getvalue().endswith(CLEAR + "something happened\n")
        await trio.sleep(1.0)
        # …and the line comes back at the next reading.
        assert out.getvalue().endswith("30 pages  10.0 pages/s  frontier 7  in flight 2  errors 1")
        nursery.cancel_scope.cancel()
    assert out.getvalue().endswith("errors 1\n")
    assert not handler.filters  # the filter goes with the display


async def test_run_off_a_terminal_logs_every_interval_and_once_at_the_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    out = io.StringIO()
    readings: list[float] = []

    def source() -> Figures:
        # 4 pages a second for 12 s, then 1 a second.
        now = trio.current_time()
        readings.append(now)
        return figures(int(4 * min(now, 12.0) + max(now - 12.0, 0.0)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(Progress(out, interval=10.0, refresh=1.0).run, source)
        await trio.sleep(25.5)
        nursery.cancel_scope.cancel()
    lines = out.getvalue().splitlines()
    assert [line.split(":")[0] for line in lines] == [
        "progress 10s",
        "progress 20s",
        "progress 25s",
    ]
    assert all(LOG_LINE.fullmatch(line) for line in lines)
    # Each line's rate is over the window before it (5 s), not the whole run...
    assert lines[0].startswith("progress 10s: 40 pages, 4.0 pages/s")
    assert lines[1].startswith("progress 20s: 56 pages, 1.0 pages/s")
    # ...the last reading's, at cancellation, over the 5.5 s since its window began.
    assert lines[-1].startswith("progress 25s: 61 pages, 0.9 pages/s")
    assert out.getvalue().endswith("\n")
    # Off a terminal nobody sees a reading between lines: one where a line's window
    # starts and one at the line (an idle peer's every wake-up costs CPU).
    assert readings == [0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 25.5]


async def test_a_source_gone_at_the_end_leaves_the_last_reading(
    autojump_clock: trio.testing.MockClock,
) -> None:
    out = io.StringIO()
    running = [True]

    def source() -> Figures:
        if not running[0]:
            raise RuntimeError("the peer is not running")
        return figures(9)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(Progress(out, interval=1.0).run, source)
        await trio.sleep(1.5)
        running[0] = False
        nursery.cancel_scope.cancel()
    assert out.getvalue().splitlines()[-1].startswith("progress 1s: 9 pages")


def test_a_lone_paused_or_holding_peer_says_so_on_its_line() -> None:
    out = io.StringIO()
    progress = Progress(out, interval=10.0, label="progress")
    progress.update(Figures(0, 0, 0, 0), 0.0)
    progress.update(Figures(0, 0, 0, 0, joining=4), 10.0)
    progress.update(
        Figures(5, 3, 0, 0, peers_alive=1, peers_known=4, paused="no majority in sight"), 20.0
    )
    progress.update(Figures(5, 3, 0, 0, holding="hosts held until 1 peer (b) hand them"), 30.0)
    progress.end()
    text = out.getvalue()
    assert "joining (attempt 4)" in text
    assert "peers 1/4, PAUSED: no majority in sight\n" in text
    assert text.rstrip().endswith("errors 0, HOLDING: hosts held until 1 peer (b) hand them")


def test_a_continuous_crawl_s_line_says_how_many_of_its_pages_were_refreshes() -> None:
    """Under --recrawl the frontier runs dry while the pages go on (QA: "frontier 0"
    and no word of the pages asked again)."""
    out = io.StringIO()
    progress = Progress(out, interval=10.0, label="progress")
    progress.update(Figures(0, 0, 0, 0, refreshes=0), 0.0)
    progress.update(Figures(40, 0, 1, 0, refreshes=12), 10.0)
    progress.update(Figures(50, 0, 1, 0), 20.0)
    progress.end()
    first, second = out.getvalue().splitlines()[:2]
    assert "40 pages (12 of them refreshes), " in first
    assert "50 pages, " in second  # not a continuous crawl: as before
