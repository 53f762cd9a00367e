"""Every flag a slip of the keyboard can get wrong ends the command at start-up: status
2, one line naming the option and what it must be, nothing started, no traceback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import ubipy.cli
from ubipy.cli import main
from ubipy.config import CrawlConfig


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[CrawlConfig]:
    """The configs a peer or a demo was started with: none, where a check refused."""
    got: list[CrawlConfig] = []

    async def run(args: Any, config: CrawlConfig) -> int:
        got.append(config)
        return 0

    monkeypatch.setattr(ubipy.cli, "_run_peer", run)
    monkeypatch.setattr("ubipy.demo.run_demo", run)
    monkeypatch.delenv("UBIPY_SECRET", raising=False)
    return got


def refused(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a command ended with (status 2)."""
    with pytest.raises(SystemExit) as ended:
        main(argv)
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith("\n"), err
    assert err.startswith(f"ubipy {argv[0]}: error: "), err
    return err


PEER = [
    (["--concurrency", "-3"], "--concurrency must be >= 1, not -3"),
    (["--concurrency", "0"], "--concurrency must be >= 1, not 0"),
    (["--concurrency", "many"], "argument --concurrency: invalid int value: 'many'"),
    (["--delay", "-5"], "--delay must be >= 0, not -5"),
    (["--delay", "nan"], "--delay must be >= 0, not nan"),
    (["--delay", "inf"], "--delay must be >= 0 and finite, not inf"),
    (["--robots-retry", "inf"], "--robots-retry must be >= 0 and finite, not inf"),
    (["--max-body", "-1"], "--max-body must be >= 1, not -1"),
    (["--timeout", "0"], "--timeout must be > 0, not 0"),
    (["--timeout", "nan"], "--timeout must be > 0, not nan"),
    (["--timeout", "inf"], "--timeout must be > 0 and finite, not inf"),
    (["--fetch-deadline", "-1"], "--fetch-deadline must be > 0, not -1"),
    (["--retries", "-1"], "--retries must be >= 0, not -1"),
    (["--max-depth", "-1"], "--max-depth must be >= 0, not -1"),
    (["--max-pages-per-host", "0"], "--max-pages-per-host must be >= 1, not 0"),
    (["--max-path-repeats", "0"], "--max-path-repeats must be >= 1, not 0"),
    (["--batch-size", "0"], "--batch-size must be >= 1, not 0"),
    (["--batch-linger", "-1"], "--batch-linger must be >= 0, not -1"),
    (["--batch-linger-max", "nan"], "--batch-linger-max must be >= 0, not nan"),
    (["--replicas", "3"], "argument --replicas: invalid choice: 3 (choose from 1, 2)"),
    (["--rejoin-grace", "-1"], "--rejoin-grace must be >= 0, not -1"),
    (["--reconnect-interval", "0"], "--reconnect-interval must be > 0, not 0"),
    (["--reconnect-timeout", "-1"], "--reconnect-timeout must be >= 0, not -1"),
    (["--majority-lease", "inf"], "--majority-lease must be > 0 and finite, not inf"),
    (["--listen", "127.0.0.1"], "--listen must be HOST:PORT, not '127.0.0.1'"),
    (["--listen", "127.0.0.1:65536"], "--listen must have a port from 0 to 65535, not 65536"),
    (["--join", "127.0.0.1"], "--join must be HOST:PORT, not '127.0.0.1'"),
    (["--join", "127.0.0.1:0"], "--join must have a port from 1 to 65535, not 0"),
    (["--join", "http://127.0.0.1:7000"], "--join must be HOST:PORT, not 'http://127.0.0.1:7000'"),
    (["--advertise", "peer.example"], "--advertise must be HOST:PORT, not 'peer.example'"),
    (["--advertise", "peer.example:0"], "--advertise must have a port from 1 to 65535, not 0"),
    (["--control", "127.0.0.1:x"], "--control must be HOST:PORT, not '127.0.0.1:x'"),
    (["--control", "127.0.0.1:99999"], "--control must have a port from 0 to 65535, not 99999"),
    # An IPv6 address without brackets was host "fe80:" on port 1, dialled for ever;
    # two addresses in one were one that never joined (a review found).
    (["--join", "fe80::1"], "--join must be HOST:PORT, an IPv6 address in brackets"),
    (["--advertise", "::1"], "--advertise must be HOST:PORT, an IPv6 address in brackets"),
    (["--listen", "::1:7005"], "--listen must be HOST:PORT, an IPv6 address in brackets"),
    (["--join", "10.0.0.1:7000,10.0.0.2:7000"], "--join must be HOST:PORT, not '10.0.0.1:7000,"),
    # The control centre on the peer's own port: "address already in use", read as
    # the peer's port being taken.
    (["--listen", "127.0.0.1:7900", "--control", "127.0.0.1:7900"], "--control 127.0.0.1:7900 is"),
    # Ignored before: the operator meant a control centre that was not there.
    (["--control-public"], "--control-public needs --control ADDR"),
]


@pytest.mark.parametrize(("flags", "message"), PEER, ids=[" ".join(f) for f, _ in PEER])
def test_a_peer_refuses_a_bad_value_naming_the_flag_and_its_range(
    started: list[CrawlConfig],
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    flags: list[str],
    message: str,
) -> None:
    err = refused(["peer", "--data", str(tmp_path / "data"), *flags], capsys)
    assert message in err
    assert started == [] and not (tmp_path / "data").exists()


ASKING = [  # what seed and status are told of the peer they ask
    (["--peer", "127.0.0.1"], "argument --peer: must be HOST:PORT, not '127.0.0.1'"),
    (["--peer", "127.0.0.1:0"], "argument --peer: must have a port from 1 to 65535, not 0"),
    (["--peer", "[::1]:70000"], "argument --peer: must have a port from 1 to 65535, not 70000"),
    # A wait of none was taken, and its time-out blamed on a firewall (QA).
    (["--timeout", "0"], "argument --timeout: must be > 0, not 0"),
    (["--timeout", "-5"], "argument --timeout: must be > 0, not -5"),  # not ">= 0" (QA)
]


@pytest.mark.parametrize("command", ["seed", "status"])
@pytest.mark.parametrize(("flags", "message"), ASKING, ids=[" ".join(f) for f, _ in ASKING])
def test_seed_and_status_refuse_a_bad_peer_address_or_time_out(
    capsys: pytest.CaptureFixture[str], command: str, flags: list[str], message: str
) -> None:
    # The seeds file is never read: the address is refused first.
    argv = [command, "seeds.txt", *flags] if command == "seed" else [command, *flags]
    assert message in refused(argv, capsys)


DEMO = [
    (["--hosts", "0"], "argument --hosts: must be >= 1, not 0"),
    (["--pages", "-1"], "argument --pages: must be >= 1, not -1"),
    (["--peers", "0"], "argument --peers: must be >= 1, not 0"),
    (["--linger", "-1"], "argument --linger: must be >= 0, not -1"),
    (["--linger", "nan"], "argument --linger: must be >= 0, not nan"),
    (["--listen", "127.0.0.1"], "argument --listen: must be HOST:PORT, not '127.0.0.1'"),
    (["--control", "127.0.0.1:65536"], "argument --control: must have a port from 0 to 65535"),
    (["--concurrency", "0"], "--concurrency must be >= 1, not 0"),
    (["--delay", "-5"], "--delay must be >= 0, not -5"),
]


@pytest.mark.parametrize(("flags", "message"), DEMO, ids=[" ".join(f) for f, _ in DEMO])
def test_the_demo_refuses_a_bad_value_naming_the_flag(
    started: list[CrawlConfig], capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert message in refused(["demo", *flags], capsys)
    assert started == []


@pytest.mark.parametrize("listen", ["0.0.0.0:7000", "[::]:7000"])
def test_a_wildcard_listen_needs_an_advertised_address(
    started: list[CrawlConfig], capsys: pytest.CaptureFixture[str], tmp_path: Path, listen: str
) -> None:
    argv = ["peer", "--data", str(tmp_path), "--secret", "s", "--listen", listen]
    err = refused(argv, capsys)
    assert f"--listen {listen} is a wildcard address" in err and "--advertise HOST:PORT" in err
    err = refused([*argv, "--advertise", "0.0.0.0:7000"], capsys)
    assert "--advertise must be an address other peers can dial" in err
    # No host: the others' membership refused it, and the peer never joined.
    err = refused([*argv, "--advertise", ":7000"], capsys)
    assert "--advertise must be an address other peers can dial, with its host" in err
    assert main([*argv, "--advertise", "10.1.2.3:7000"]) == 0
    assert started[0].advertise == "10.1.2.3:7000" and started[0].listen == listen


def test_a_config_files_wildcard_listen_is_named_as_the_file_has_it(
    started: list[CrawlConfig], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "crawl.toml"
    path.write_text(f'data_dir = "{tmp_path}"\nsecret = "s"\nlisten = "0.0.0.0:7000"\n')
    err = refused(["peer", "--config", str(path)], capsys)
    assert f"{path}: listen 0.0.0.0:7000 is a wildcard address" in err
    path.write_text(path.read_text() + 'advertise = "10.1.2.3:7000"\n')
    assert main(["peer", "--config", str(path)]) == 0
    assert started[0].advertise == "10.1.2.3:7000"


@pytest.mark.parametrize("where", ["file", "file/below"])
def test_a_data_path_that_is_a_file_ends_the_peer_on_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, where: str
) -> None:
    (tmp_path / "file").write_text("the user's\n")
    data = tmp_path / where
    assert main(["peer", "--data", str(data), "--listen", "127.0.0.1:0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.lower().startswith(f"ubipy peer: cannot use {data} as the data directory: not a")
    assert (tmp_path / "file").read_text() == "the user's\n"


@pytest.mark.parametrize("command", ["export", "index"])
def test_an_output_ending_in_a_slash_must_be_an_existing_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """``--out new/`` wrote a file named ``new`` (Path drops the slash)."""
    out = f"{tmp_path / 'new'}/"
    argv = [command, str(tmp_path), "--out", out]
    if command == "export":
        argv = [command, "--data", str(tmp_path), "--format", "warc", "--out", out]
    assert f"--out: {out} ends in / but is no existing directory" in refused(argv, capsys)
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["-v", "status", "--peer", "127.0.0.1:7000"],
        ["status", "-v", "--peer", "127.0.0.1:7000"],
        ["export", "--data", "d", "--format", "jsonl", "--out", "o", "--verbose"],
    ],
)
def test_verbose_is_taken_before_or_after_the_command(argv: list[str]) -> None:
    """``ubipy status -v`` was refused: "unrecognized arguments: -v"."""
    assert ubipy.cli.build_parser().parse_args(argv).verbose is True


COMMANDS = [
    ["peer"],
    ["seed", "urls.txt"],
    ["status"],
    ["export", "--data", "d", "--out", "o"],
    ["index", "d"],
    ["demo"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=[a[0] for a in COMMANDS])
def test_an_unknown_flag_is_said_by_its_command(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """It was "ubipy: error:", naming no command (QA)."""
    said = refused([*argv, "--bogus"], capsys)
    assert said == f"ubipy {argv[0]}: error: unrecognized arguments: --bogus\n"
