"""The command line as a user runs it: real processes, the synthetic web on loopback."""

from __future__ import annotations

import errno
import importlib.abc
import os
import pty
import re
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio
import trio.testing

from tests.e2e.cluster import run_cli, start_peer_or_fail, stop_all
from tests.test_progress import CLEAR, FakeTerminal, figures
from ubipy import cli, entry
from ubipy.cli import _or_cannot_start, _stop_on_signals, build_parser, main
from ubipy.progress import Progress, wall_clock
from ubipy.statustable import format_cluster
from ubipy.store import ShardError
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.synthweb.referee import Referee
from ubipy.synthweb.server import serve
from ubipy.synthweb.truth import ground_truth

UBIPY = [sys.executable, "-m", "ubipy.cli"]
PROGRESS = re.compile(
    r"(progress|crawling) \w+: \d+ pages, [\d.]+ pages/s, frontier \d+, in flight \d+, "
    r"errors \d+(, peers \d+/\d+)?"
)


async def _read_until(stream: trio.abc.ReceiveStream, marker: bytes, then: bytes = b"") -> bytes:
    """Read until ``marker`` has been seen, and ``then`` after the last one."""
    seen = b""
    while marker not in seen or then not in seen.rsplit(marker, 1)[1]:
        chunk = await stream.receive_some(4096)
        if not chunk:
            raise AssertionError(f"stream ended before {marker!r}: {seen!r}")
        seen += chunk
    return seen


async def _read_to_end(stream: trio.abc.ReceiveStream | None) -> bytes:
    assert stream is not None
    seen = b""
    while chunk := await stream.receive_some(65536):
        seen += chunk
    return seen


async def test_peer_seed_status_and_graceful_stop_as_processes(tmp_path: Path) -> None:
    web = SyntheticWeb(WebSpec(seed=3, hosts=6, pages_per_host=8, crawl_delay=0.05))
    seeds = tmp_path / "seeds.txt"
    seeds.write_text(
        f"# the home page\n{web.seed_url()}\n\nnot a url\nftp://h001.synth.test/\n"
        f"{web.seed_url()}  # again\n"
    )
    data = tmp_path / "peer"
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        proc = await trio.lowlevel.open_process(
            [
                *UBIPY,
                "peer",
                "--data",
                str(data),
                "--listen",
                "127.0.0.1:0",
                "--proxy",
                server.proxy_url,
                "--delay",
                "0.02",
                "--robots-retry",
                "0.05",
            ],
            stderr=subprocess.PIPE,
        )
        try:
            assert proc.stderr is not None
            with trio.fail_after(30):
                banner = await _read_until(proc.stderr, b"ubipy peer ", b"\n")
            assert b"no cluster secret: listening on loopback only" in banner
            addr = banner.decode().split("ubipy peer ")[1].split("listening on ")[1].split()[0]

            seeded = await trio.run_process(
                [*UBIPY, "seed", str(seeds), "--peer", addr],
                capture_stdout=True,
                capture_stderr=True,
                check=False,
            )
            err = seeded.stderr.decode()
            # Bad lines are named by number; the good seed is still sent, once.
            assert seeded.returncode == 1
            assert "line 4" in err and "line 5" in err and "line 6" in err
            assert "duplicate of line 2" in err
            assert "sent 1 seed to" in seeded.stdout.decode()

            truth = ground_truth(web, [web.seed_url()])
            with trio.fail_after(60):
                await server.log.wait_for(lambda log: Referee(log, web).requested() >= truth)

            status = await trio.run_process([*UBIPY, "status", "--peer", addr], capture_stdout=True)
            table = status.stdout.decode().splitlines()
            # The dashboard's columns, one row for the peer, then the totals.
            assert table[0].split() == [
                "peer", "address", "state", "started", "uptime", "pages", "pages/s", "errors",
                "time-outs", "frontier", "hosts", "bytes", "in", "bytes", "out",
            ]  # fmt: skip
            peer_id = banner.decode().split("ubipy peer ")[1].split()[0]
            row = table[1].split()
            assert row[:3] == [peer_id, addr, "alive"]
            assert re.fullmatch(r"\d\d:\d\d:\d\d", row[3]) and re.fullmatch(r"(\d+m)?\d+s", row[4])
            assert int(row[5]) > 0 and row[-3] in ("KiB", "MiB")  # bytes in, in human units
            assert table[2].startswith("total (1)") and "1 alive" in table[2]
            assert table[2].split()[4] == row[5]  # the pages, summed

            proc.send_signal(signal.SIGINT)
            with trio.fail_after(30):
                code = await proc.wait()
                rest = await _read_to_end(proc.stderr)
            assert code == 0
            # Not on a terminal: whole log lines, the last figures as the peer stops.
            lines = (banner + rest).decode().splitlines()
            progress = [line for line in lines if line.startswith("progress ")]
            assert progress and all(PROGRESS.fullmatch(line) for line in progress)
            assert "\r" not in rest.decode()
            assert lines[-2] == progress[-1]
            assert re.fullmatch(rf"ubipy peer {peer_id} stopped: \d+ pages this run", lines[-1])
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        with trio.fail_after(10):
            await server.wait_idle()
        nursery.cancel_scope.cancel()
    referee = Referee(server.log, web)
    assert referee.missing(truth) == set()
    assert referee.duplicates() == []
    conn = sqlite3.connect(data / "shard.sqlite3")
    (pages,) = conn.execute("SELECT COUNT(*) FROM pages").fetchone()
    conn.close()
    assert pages == len([r for r in server.log if not r.target_path.startswith("/robots")])


def test_the_status_table_has_the_dashboards_rows_and_totals() -> None:
    def figures(peer_id: str, pages: int, **more: Any) -> dict[str, Any]:
        return {
            "peer_id": peer_id, "address": "ignored", "version": "0.1.0",
            "started_at": 1_700_000_000.0, "uptime": 3723.4, "pages": pages,
            "pages_per_second": pages / 3723.4, "errors": 2, "timeouts": 1, "pending": 40,
            "hosts": 5, "in_flight": 3, "bytes_in": 3 * 2**20, "bytes_out_wire": 1536,
            "storage_error": None, **more,
        }  # fmt: skip

    report = {
        "members": [
            {"id": "aaaa", "address": "127.0.0.1:7001", "state": "alive"},
            {"id": "bbbb", "address": "127.0.0.1:7002", "state": "suspect"},
            {"id": "cccc", "address": "127.0.0.1:7003", "state": "dead"},
            {"id": "dddd", "address": "127.0.0.1:7004", "state": "left"},
        ],
        "peers": [
            figures("aaaa", 7446),
            figures(
                "bbbb",
                3723,
                storage_error="disk I/O error",
                paused="no majority in sight: hears from 1 of 4 peers",
                joining=3,
            ),
        ],
    }
    table = format_cluster(report, now=1_700_000_000.0 + 3723.4).splitlines()
    assert table[0].split() == [
        "peer", "address", "state", "started", "uptime", "pages", "pages/s", "errors",
        "time-outs", "frontier", "hosts", "bytes", "in", "bytes", "out",
    ]  # fmt: skip
    started = wall_clock(1_700_000_000.0, 1_700_000_000.0 + 3723.4)
    assert table[1].split() == [
        "aaaa", "127.0.0.1:7001", "alive", started, "1h02m03s", "7446", "2.0", "2", "1", "40",
        "5", "3.0", "MiB", "1.5", "KiB",
    ]  # fmt: skip
    assert table[2].split()[:6] == [
        "bbbb",
        "127.0.0.1:7002",
        "suspect",
        started,
        "1h02m03s",
        "3723",
    ]
    assert table[3] == "  STORAGE FAILING, admission paused: disk I/O error"
    assert table[4] == "  joining (attempt 3)"
    assert table[5] == "  PAUSED: no majority in sight: hears from 1 of 4 peers"
    # Those that did not answer: their state, and '-' for every figure.
    assert table[6].split() == ["cccc", "127.0.0.1:7003", "dead"] + ["-"] * 10
    assert table[7].split() == ["dddd", "127.0.0.1:7004", "left"] + ["-"] * 10
    # The totals as the dashboard sums them.
    assert table[8].split() == [
        "total", "(4)", "1", "alive,", "1", "suspect,", "1", "dead,", "1", "left",
        "11169", "3.0", "4", "2", "80", "10", "6.0", "MiB", "3.0", "KiB",
    ]  # fmt: skip
    # Columns line up: every figure ends where its header does.
    assert len({len(line) for line in (table[0], table[1], table[2], table[6])}) == 1


def test_seed_reports_an_unreachable_peer_clearly(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("http://example.test/\n")
    done = subprocess.run(
        [*UBIPY, "seed", str(seeds), "--peer", "127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "cannot reach peer 127.0.0.1:9" in done.stderr


def test_seed_refuses_a_binary_file(tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.bin"
    seeds.write_bytes(b"\x00\x01\x02garbage\xff" * 50)
    done = subprocess.run(
        [*UBIPY, "seed", str(seeds), "--peer", "127.0.0.1:9"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == f"ubipy seed: {seeds}: looks like a binary file, not a list of URLs\n"


@pytest.mark.parametrize(
    ("command", "flag"),
    [("peer", "--listen"), ("peer", "--control"), ("demo", "--control"), ("demo", "--listen")],
)
def test_an_address_in_use_is_named_with_its_flag(tmp_path: Path, command: str, flag: str) -> None:
    # "cannot start: [Errno 98] Address already in use", for --control too, read as
    # the peer's own port taken (a review found); the demo's named none (QA).
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = f"127.0.0.1:{taken.getsockname()[1]}"
        ours = ["--listen", busy] if flag == "--listen" else ["--listen", "127.0.0.1:0",
                                                              "--control", busy]  # fmt: skip
        if command == "demo":
            ours = ["--hosts", "1", "--pages", "1", "--peers", "1", flag, busy]
        done = subprocess.run(
            [*UBIPY, command, "--data", str(tmp_path / "data"), *ours],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"ubipy {command}: cannot start: [Errno {errno.EADDRINUSE}] {flag} {busy}: "
        f"{os.strerror(errno.EADDRINUSE)}"
    )
    if command == "peer":  # nor did it leave a directory of a lock and an empty shard (QA)
        assert not (tmp_path / "data").exists()


def test_a_peer_whose_seeds_file_is_not_there_does_not_start(tmp_path: Path) -> None:
    # It was read once the peer was listening (perhaps had joined a cluster), and said
    # as a failure to start, --seeds unnamed (a review found).
    data = tmp_path / "data"
    done = subprocess.run(
        [*UBIPY, "peer", "--data", str(data), "--listen", "127.0.0.1:0",
         "--seeds", str(tmp_path / "nowhere.txt")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        f"ubipy peer: --seeds {tmp_path / 'nowhere.txt'}: No such file or directory\n"
    )
    assert not data.exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["demo", "--data", ""], "argument --data"),
        (["seed", ""], "argument file"),
        (["export", "--data", "", "--format", "jsonl", "--out", "x.jsonl"], "argument --data"),
        (["export", "--data", "d", "--format", "jsonl", "--out", ""], "argument --out"),
    ],
)
def test_an_empty_path_is_refused_not_taken_for_the_current_directory(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        build_parser().parse_args(args)
    assert ended.value.code == 2
    assert f"{named}: must be a path, not ''" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["peer", "seed", "status", "demo"])
def test_every_command_documents_its_options_and_defaults(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args([command, "--help"])
    out = capsys.readouterr().out
    assert "usage: ubipy " + command in out
    if command in ("peer", "demo"):
        for option in ("--delay", "--concurrency", "--max-depth", "--scope", "--user-agent"):
            assert option in out
        assert "default" in out


async def test_demo_runs_a_cluster_with_its_dashboard_and_a_perfect_verdict(
    tmp_path: Path,
) -> None:
    data = tmp_path / "demo"
    errors = tmp_path / "stderr.txt"
    cmd = [
        *UBIPY, "demo", "--hosts", "12", "--pages", "6", "--delay", "0.01",
        "--data", str(data), "--linger", "60",
    ]  # fmt: skip
    with errors.open("wb") as stderr:
        proc = await trio.lowlevel.open_process(cmd, stdout=subprocess.PIPE, stderr=stderr)
    try:
        assert proc.stdout is not None
        with trio.fail_after(60):
            head = await _read_until(proc.stdout, b"dashboard: http://", b"\n")
        m = re.search(r"dashboard: (http://\S+/)\n", head.decode())
        assert m is not None, head
        base = m.group(1)
        async with httpx2.AsyncClient(timeout=10) as client:
            # Up before the crawl starts, with the three peers as members.
            answer = await client.get(f"{base}api/status")
            assert answer.status_code == 200
            assert len(answer.json()["peers"]) == 3
            with trio.fail_after(60):
                out = head + await _read_until(proc.stdout, b"the dashboard stays up", b"\n")
            lines = out.decode().splitlines()
            assert lines[-1].startswith("the dashboard stays up 60 s on http://")
            crawled = re.fullmatch(
                r"crawled (\d+) pages \((\d+) \+ (\d+) \+ (\d+) by 3 peers\) from 12 hosts .*",
                lines[-4],
            )
            assert crawled is not None, lines[-4]
            total = int(crawled.group(1))
            assert total == sum(int(crawled.group(i)) for i in (2, 3, 4))
            # While it lingers, every peer has reported its figures to the dashboard.
            with trio.fail_after(10):
                while True:
                    status = (await client.get(f"{base}api/status")).json()
                    if status["totals"]["pages"] == total:
                        break
                    await trio.sleep(0.2)
            assert [p["state"] for p in status["peers"]] == ["alive"] * 3
            assert all(p["reported"] for p in status["peers"])
        proc.send_signal(signal.SIGINT)  # ends the lingering, gracefully
        with trio.fail_after(30):
            code = await proc.wait()
            out += await _read_to_end(proc.stdout)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert code == 0, errors.read_text()
    assert out.decode().splitlines() == lines  # nothing after the lingering
    verdict = lines[-3]
    assert verdict.startswith("referee: coverage ") and "(100%)" in verdict
    for nothing in ("unexpected", "duplicate fetches", "robots violations", "overlaps",
                    "short gaps"):  # fmt: skip
        assert f" 0 {nothing}" in verdict, verdict
    dirs = lines[-2].removeprefix("data: ").split()
    assert dirs == [str(data / f"peer{i}") for i in (1, 2, 3)]
    assert all((Path(d) / "shard.sqlite3").exists() for d in dirs)
    # No warning about a --proxy the user never gave (the synthetic web's own).
    assert "--proxy" not in errors.read_text()
    # Not on a terminal, the progress is whole lines, the cluster's sums at the end.
    progress = [line for line in lines if line.startswith("crawling ")]
    assert progress and all(PROGRESS.fullmatch(line) for line in progress)
    assert progress[-1].split(": ")[1].startswith(f"{total} pages")
    assert progress[-1].endswith("peers 3/3")


async def test_a_second_peer_on_one_data_directory_exits_at_once_naming_the_first(
    tmp_path: Path,
) -> None:
    data = tmp_path / "peer"
    async with trio.open_nursery() as nursery:
        # Nothing is seeded: the proxy is never asked.
        first = await start_peer_or_fail(nursery, data, "http://127.0.0.1:9")
        try:
            with trio.fail_after(30):
                second = await run_cli(
                    "peer", "--data", str(data), "--listen", "127.0.0.1:0", "--secret", "s3cret"
                )
        finally:
            await stop_all([first])
    err = second.stderr.decode()
    assert second.returncode == 2, err
    assert err.count("\n") == 1, err
    assert f"is in use by another peer (pid {first.proc.pid}, listening on {first.address})" in err
    # The first never noticed: it ran on, and stopped as asked.
    assert first.proc.returncode == 0
    assert b"stopped: 0 pages this run" in first.output


def test_a_data_directory_that_cannot_be_used_inside_a_task_is_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The demo's 25th peer out of file descriptors: a ShardError inside trio's group
    # ended in a traceback (a review found).
    def run() -> int:
        raise ExceptionGroup("peers", [ShardError("cannot use p25: Too many open files")])

    assert _or_cannot_start("demo", run) == 2
    said = capsys.readouterr().err
    assert said == "ubipy demo: cannot start: cannot use p25: Too many open files\n"


class _Stoppable:
    """What the signal watcher needs of a peer, telling when it is asked to stop."""

    def __init__(self) -> None:
        self.crawler = self
        self.stopped = trio.Event()  # the crawler's: not stopped yet
        self.stopping = False
        self.asked = trio.Event()

    def stop(self) -> None:
        self.stopping = True
        self.asked.set()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGHUP])
async def test_a_stop_asked_on_a_terminal_is_said_on_a_line_of_its_own(
    monkeypatch: pytest.MonkeyPatch, signum: signal.Signals
) -> None:
    # It was written on the end of the progress line ("errors 0stopping: ...": a review).
    # A SIGHUP (the terminal closed) killed the peer outright, with no leave (QA).
    terminal = FakeTerminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    progress = Progress(terminal)
    progress.update(figures(3), 0.0)
    peer = _Stoppable()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_stop_on_signals, peer, nursery.cancel_scope, progress)  # type: ignore[arg-type]
        await trio.testing.wait_all_tasks_blocked()
        signal.raise_signal(signum)
        with trio.fail_after(5):
            await peer.asked.wait()
        nursery.cancel_scope.cancel()
    assert terminal.getvalue().endswith(CLEAR + "stopping: letting requests in flight finish…\n")


@asynccontextmanager
async def _killed_if_left(proc: trio.Process) -> AsyncIterator[trio.Process]:
    try:
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _rest_and_status(proc: trio.Process) -> tuple[bytes, int]:
    """What the process still writes to stderr, and its exit status, within a minute."""
    with trio.fail_after(60):
        return await _read_to_end(proc.stderr), await proc.wait()


async def test_ctrl_c_while_the_seeds_load_ends_the_peer_without_a_traceback(
    tmp_path: Path,
) -> None:
    """SIGINT just after the peer listens, while a long --seeds file loads (before its
    signal handler is in place): a traceback of some fifty lines, exit status 1 (QA).
    Now a line, and 130 (or, once the handler is in place, a graceful stop)."""
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("".join(f"http://h{i}.test/\n" for i in range(100_000)))
    cmd = [*UBIPY, "-v", "peer", "--data", str(tmp_path / "p"), "--listen", "127.0.0.1:0"]
    proc = await trio.lowlevel.open_process([*cmd, "--seeds", str(seeds)], stderr=subprocess.PIPE)
    async with _killed_if_left(proc):
        assert proc.stderr is not None
        with trio.fail_after(60):
            await _read_until(proc.stderr, b"listening on")
        proc.send_signal(signal.SIGINT)
        said, code = await _rest_and_status(proc)
    assert b"Traceback" not in said, said.decode()
    assert code in (0, 130), said.decode()
    assert code == 0 or b"ubipy peer: interrupted" in said


async def test_a_peer_says_whether_its_data_directory_is_new(tmp_path: Path) -> None:
    """A mistyped --data looked like a resume: a new directory, a new member under a new
    id, and nothing said without -v (QA)."""
    data = tmp_path / "p"
    for first in (True, False):
        if not first:  # as a --recrawl run leaves it: restarted without, it said nothing
            with sqlite3.connect(data / "shard.sqlite3") as conn:
                conn.execute(
                    "INSERT INTO refresh (fp, url, host, depth, visits, changes, observed, "
                    "last_visit, due) VALUES (1, 'http://a.test/', 'a.test', 0, 1, 0, 0, 0, 9)"
                )
        cmd = [*UBIPY, "peer", "--data", str(data), "--listen", "127.0.0.1:0"]
        proc = await trio.lowlevel.open_process(cmd, stderr=subprocess.PIPE)
        async with _killed_if_left(proc):
            assert proc.stderr is not None
            with trio.fail_after(60):
                head = await _read_until(proc.stderr, b" listening on 127.0.0.1:", b"\n")
                head += await _read_until(proc.stderr, b"\n")
            address = head.rsplit(b" listening on ", 1)[1].split()[0].decode()
            # Once it answers, its signal watcher (started with it) is in place.
            assert (await run_cli("status", "--peer", address)).returncode == 0
            proc.send_signal(signal.SIGTERM)
            rest, code = await _rest_and_status(proc)
        assert code == 0
        said = "a new data directory" if first else "its data"
        assert f"{said}: {data.resolve()}\n" in head.decode()
        recrawl = "1 page kept fresh by --recrawl: none asked without it"
        assert (recrawl in (head + rest).decode()) is not first


async def test_a_peer_under_nohup_outlives_the_hang_up(tmp_path: Path) -> None:
    """nohup ignores SIGHUP for the peer to outlive the session: a handler for it
    would undo that (a review). The hang-up is ignored; the SIGTERM after it is the
    first signal the peer takes, so it stops gracefully, saying so once."""
    cmd = [*UBIPY, "-v", "peer", "--data", str(tmp_path / "p"), "--listen", "127.0.0.1:0"]

    def as_nohup() -> None:
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    proc = await trio.lowlevel.open_process(cmd, stderr=subprocess.PIPE, preexec_fn=as_nohup)
    async with _killed_if_left(proc):
        assert proc.stderr is not None
        with trio.fail_after(60):
            head = await _read_until(proc.stderr, b" listening on 127.0.0.1:", b"\n")
        address = head.rsplit(b" listening on ", 1)[1].split()[0].decode()
        # Once it answers, its signal watcher (started with it) is in place.
        answered = await run_cli("status", "--peer", address)
        assert answered.returncode == 0, answered.stderr
        proc.send_signal(signal.SIGHUP)
        proc.send_signal(signal.SIGTERM)
        said, code = await _rest_and_status(proc)
    assert code == 0, said.decode()
    said = head + said
    assert said.count(b"stopping: letting requests in flight finish") == 1
    assert b"stopping now" not in said


def test_an_error_raised_beside_a_ctrl_c_is_not_swallowed(monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted_and_broken(args: Any) -> int:
        raise BaseExceptionGroup("both", [KeyboardInterrupt(), ValueError("a bug")])

    monkeypatch.setattr(cli, "_seed", interrupted_and_broken)
    with pytest.raises(BaseExceptionGroup) as raised:
        cli.main(["seed", "urls.txt"])
    assert raised.group_contains(ValueError)


async def test_a_peer_whose_terminal_hangs_up_leaves_gracefully(tmp_path: Path) -> None:
    """Its terminal gone (the master side of its pty closed), every write to it fails
    with EIO, the log's too: the leave the hang-up asked for broke on the first line
    it logged (a review). What went to the terminal now goes nowhere."""
    master, slave = pty.openpty()
    cmd = [*UBIPY, "-v", "peer", "--data", str(tmp_path / "p"), "--listen", "127.0.0.1:0"]
    proc = await trio.lowlevel.open_process(
        cmd, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave
    )
    os.close(slave)
    async with _killed_if_left(proc):
        terminal = trio.lowlevel.FdStream(master)
        with trio.fail_after(60):
            head = await _read_until(terminal, b" listening on 127.0.0.1:", b"\n")
        address = head.rsplit(b" listening on ", 1)[1].split()[0].decode()
        answered = await run_cli("status", "--peer", address)  # its signal watcher is up
        assert answered.returncode == 0, answered.stderr
        await terminal.aclose()  # the terminal hangs up
        proc.send_signal(signal.SIGHUP)
        with trio.fail_after(60):
            code = await proc.wait()
    assert code == 0


def test_a_reader_that_goes_away_ends_a_command_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`ubipy status | head` printed a BrokenPipeError's traceback (QA)."""
    read, write = os.pipe()
    os.close(read)  # head has read its lines and gone
    out = os.fdopen(write, "w")
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(cli, "_status", lambda args: print("row\n" * 100_000) or 0)
    try:
        assert main(["status", "--peer", "127.0.0.1:7000"]) == 1
    finally:
        out.close()


class _Interrupted(importlib.abc.MetaPathFinder):
    """Ctrl-C while ``ubipy.cli`` is being imported."""

    def find_spec(self, name: str, path: object, target: object = None) -> None:
        if name == "ubipy.cli":
            raise KeyboardInterrupt


def test_ctrl_c_while_the_program_loads_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its modules take a third of a second to import: Ctrl-C then printed a traceback
    of 20 to 30 lines (QA)."""
    monkeypatch.delitem(sys.modules, "ubipy.cli")
    monkeypatch.setattr(sys, "meta_path", [_Interrupted(), *sys.meta_path])
    with pytest.raises(SystemExit) as exited:
        entry.main()
    assert exited.value.code == 130
    assert capsys.readouterr().err == "ubipy: interrupted\n"


def test_a_demo_runs_sixteen_peers_at_most(capsys: pytest.CaptureFixture[str]) -> None:
    """A million were taken, started one after another until killed (QA)."""
    with pytest.raises(SystemExit):
        main(["demo", "--peers", "17"])
    assert "argument --peers: must be <= 16, not 17" in capsys.readouterr().err


def test_a_peer_given_a_binary_seeds_file_does_not_start(tmp_path: Path) -> None:
    # It said the file was binary and ran idle with no seed (QA); `ubipy seed` refuses.
    seeds = tmp_path / "seeds.bin"
    seeds.write_bytes(b"\x00\x01\x02garbage\xff" * 50)
    done = subprocess.run(
        [*UBIPY, "peer", "--data", str(tmp_path / "data"), "--listen", "127.0.0.1:0",
         "--seeds", str(seeds)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr == (
        f"ubipy peer: --seeds {seeds}: looks like a binary file, not a list of URLs\n"
    )
    assert not (tmp_path / "data").exists()


async def test_a_peer_started_in_the_background_takes_an_early_sigint(tmp_path: Path) -> None:
    """Started with `&` from a script, SIGINT ignored: one sent before its signal
    watcher was up was lost, and the peer ran on (QA). It ends now, whenever sent."""

    def ignore_sigint() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)

    cmd = [sys.executable, "-c", "from ubipy.entry import main; main()"]
    cmd += ["peer", "--data", str(tmp_path / "p"), "--listen", "127.0.0.1:0"]
    proc = await trio.lowlevel.open_process(cmd, stderr=subprocess.PIPE, preexec_fn=ignore_sigint)
    async with _killed_if_left(proc):
        await trio.sleep(0.05)  # at once: the program still loads
        proc.send_signal(signal.SIGINT)
        said, code = await _rest_and_status(proc)
    assert code in (0, 130), said.decode()
