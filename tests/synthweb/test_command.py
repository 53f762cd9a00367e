"""``python -m ubipy.synthweb`` refuses what it cannot serve in one line: a host count
of 0 and an address it cannot bind ended in tracebacks, a port over 65535 was taken
modulo 65536, and a log in a directory not there failed only at the end, the whole
session's log lost (QA)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ubipy.synthweb.__main__ import main


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--hosts", "0"], "error: argument --hosts: must be 1 to 1000000, not 0"),
        (["--port", "99999"], "error: argument --port: must be 0 to 65535, not 99999"),
        (["--bind", "192.0.2.1"], "cannot start: synthweb serves on loopback only"),
        (["--tls-cert", "/nonexistent.pem"], "cannot start: --tls-cert /nonexistent.pem: "),
        (["--log", "{tmp}/not-there/log.jsonl"], "cannot start: [Errno 2] No such file"),
    ],
)
def test_what_cannot_be_served_is_one_line(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        main([a.format(tmp=tmp_path) for a in argv])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert f"python -m ubipy.synthweb: {said}" in err and "Traceback" not in err
    assert err.splitlines()[-1].startswith("python -m ubipy.synthweb: ")  # argparse's usage before
