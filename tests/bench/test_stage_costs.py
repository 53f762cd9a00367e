"""bench/stage_costs.py's parts that need no processes: what it times, and its table."""

from __future__ import annotations

import importlib

import pytest

from bench.stage_costs import _STAGES, main, table


def test_every_timed_stage_is_a_function_of_the_crawler() -> None:
    # A stage renamed in the crawler must fail here, not leave the bench timing nothing.
    for module_name, path in _STAGES:
        owner: object = importlib.import_module(module_name)
        for part in path.split("."):
            owner = getattr(owner, part)
        assert callable(owner), path


def test_the_table_gives_each_stage_and_the_ratios() -> None:
    low = {"pages": 500, "robots": 0.0, "per_commit": 10.0, "cpu": 3.0e-3,
           "answered": 0.8e-3, "parse": 0.6e-3, "commit": 0.6e-3, "rest": 1.6e-3}  # fmt: skip
    high = {"pages": 6000, "robots": 0.0, "per_commit": 300.0, "cpu": 1.5e-3,
            "answered": 0.4e-3, "parse": 0.3e-3, "commit": 0.5e-3, "rest": 0.6e-3}  # fmt: skip
    text = table({2: low, 64: high})
    assert "| 2 | 500 | 0.00 | 10.0 | 3.00 | 0.80 (0.60) | 0.60 | 1.60 |" in text
    assert "| 64 | 6,000 | 0.00 | 300.0 | 1.50 | 0.40 (0.30) | 0.50 | 0.60 |" in text
    assert text.endswith(
        "2 in flight over 64, per page: cpu 2.00, answered 2.00, parse 2.00, commit 1.20, rest 2.67"
    )


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--windw", "30"], "unrecognized arguments: --windw 30"),
        # Quoting that shlex cannot split.
        (["--peer-args", "--config 'crawl.toml"], "--peer-args: No closing quotation"),
    ],
)
def test_a_bad_flag_is_refused_before_anything_starts(
    argv: list[str], error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert error in capsys.readouterr().err
