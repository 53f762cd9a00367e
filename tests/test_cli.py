"""The command line as a user runs it: real processes, the synthetic web on loopback."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from ubipy.cli import build_parser
from ubipy.synthweb.model import SyntheticWeb, WebSpec
from ubipy.synthweb.referee import Referee
from ubipy.synthweb.server import serve
from ubipy.synthweb.truth import ground_truth

UBIPY = [sys.executable, "-m", "ubipy.cli"]


async def _read_until(stream: trio.abc.ReceiveStream, marker: bytes, then: bytes = b"") -> bytes:
    """Read until ``marker`` has been seen, and ``then`` after the last one."""
    seen = b""
    while marker not in seen or then not in seen.rsplit(marker, 1)[1]:
        chunk = await stream.receive_some(4096)
        if not chunk:
            raise AssertionError(f"stream ended before {marker!r}: {seen!r}")
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
            assert "sent 1 seeds" in seeded.stdout.decode()

            truth = ground_truth(web, [web.seed_url()])
            with trio.fail_after(60):
                await server.log.wait_for(lambda log: Referee(log, web).requested() >= truth)

            status = await trio.run_process([*UBIPY, "status", "--peer", addr], capture_stdout=True)
            assert "pages" in status.stdout.decode()

            proc.send_signal(signal.SIGINT)
            with trio.fail_after(30):
                code = await proc.wait()
            assert code == 0
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
    assert done.returncode == 1
    assert "binary file" in done.stderr


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


def test_demo_crawls_and_ends_with_a_summary(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            *UBIPY,
            "demo",
            "--hosts",
            "12",
            "--pages",
            "6",
            "--delay",
            "0.01",
            "--data",
            str(tmp_path / "demo"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-3].startswith("crawled ")
    assert "(100%)" in lines[-2] and "0 duplicate fetches" in lines[-2]
    assert (tmp_path / "demo" / "shard.sqlite3").exists()
