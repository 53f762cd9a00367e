"""The configuration: its sections check their values, and a peer's options come
from flags, a TOML file and the defaults, in that order."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench import config_doc
from ubipy.cli import main
from ubipy.config import (
    BoundsConfig,
    ControlConfig,
    CrawlConfig,
    FetchConfig,
    ForwardingConfig,
    PolitenessConfig,
    RefreshPolicy,
    ReplicationConfig,
    Scope,
    StoreConfig,
    SwimConfig,
)
from ubipy.errors import ConfigError, UbipyError
from ubipy.options import build, read_file, settings

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("section", "values", "message"),
    [
        (PolitenessConfig, {"delay": -1.0}, "delay must be >= 0, not -1"),
        (PolitenessConfig, {"delay": math.nan}, "delay must be >= 0, not nan"),
        (PolitenessConfig, {"concurrency": 0}, "concurrency must be >= 1, not 0"),
        (PolitenessConfig, {"robots_max_attempts": 0}, "robots_max_attempts must be >= 1, not 0"),
        (FetchConfig, {"max_body_bytes": 0}, "max_body_bytes must be >= 1, not 0"),
        (FetchConfig, {"read_timeout": 0.0}, "read_timeout must be > 0, not 0"),
        (FetchConfig, {"connect_timeout": -5.0}, "connect_timeout must be > 0, not -5"),
        (FetchConfig, {"fetch_deadline": 0.0}, "fetch_deadline must be > 0, not 0"),
        (FetchConfig, {"max_retries": -1}, "max_retries must be >= 0, not -1"),
        (BoundsConfig, {"max_depth": -1}, "max_depth must be >= 0, not -1"),
        (BoundsConfig, {"max_pages_per_host": 0}, "max_pages_per_host must be >= 1, not 0"),
        (StoreConfig, {"commit_every_pages": 0}, "commit_every_pages must be >= 1, not 0"),
        (StoreConfig, {"bloom_error_rate": 1.0}, "bloom_error_rate must be between 0 and 1"),
        (
            StoreConfig,
            {"bloom_initial_capacity": 10**15},  # aborted the process (found by a review)
            "bloom_initial_capacity makes a Bloom filter of 2231695.3 GiB at the start",
        ),
        (
            StoreConfig,  # its first slice at a tenth of the rate, 23 times the size
            {"bloom_initial_capacity": 152_766_278_329, "bloom_error_rate": 0.9},
            "bloom_initial_capacity makes a Bloom filter of 89.1 GiB at the start",
        ),
        (
            StoreConfig,  # as a float, past float's range: a traceback
            {"bloom_initial_capacity": 10**400},
            "bloom_initial_capacity makes a Bloom filter of 10291878065.3 GiB at the start",
        ),
        (
            PolitenessConfig,
            {"per_ip": False, "ip_delay": 1.0},
            "ip_delay has no use without the per-IP rule (--no-per-ip)",
        ),
        (StoreConfig, {"storage_retry": 0.0}, "storage_retry must be > 0, not 0"),
        (StoreConfig, {"warc_level": 0}, "warc_level must be 1 to 9, not 0"),
        (StoreConfig, {"warc_level": 10}, "warc_level must be 1 to 9, not 10"),
        (ForwardingConfig, {"batch_size": 0}, "batch_size must be >= 1, not 0"),
        (
            ForwardingConfig,
            {"batch_size": 10_001},
            "batch_size must be at most 10000 (the URLs a peer takes in one frame), not 10001",
        ),
        (ForwardingConfig, {"batch_linger": -0.5}, "batch_linger must be >= 0, not -0.5"),
        (ReplicationConfig, {"replicas": 0}, "replicas must be 1 or 2, not 0"),
        (ReplicationConfig, {"replicas": 3}, "replicas must be 1 or 2, not 3"),
        (
            SwimConfig,
            {"probe_interval": 1.0, "probe_timeout": 1.0},
            "probe_timeout must be shorter than probe_interval (1), not 1",
        ),
        (SwimConfig, {"suspicion_mult": 0}, "suspicion_mult must be >= 1, not 0"),
    ],
)
def test_a_bad_value_is_a_config_error_naming_the_option(
    section: Any, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        section(**values)


def test_a_config_error_is_a_value_error_of_ubipys_tree() -> None:
    with pytest.raises(ConfigError) as caught:
        PolitenessConfig(delay=-1.0)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, UbipyError)
    assert (caught.value.option, caught.value.problem) == ("delay", "must be >= 0, not -1")


def test_the_defaults_are_valid_and_the_limits_are_inclusive() -> None:
    config = CrawlConfig()
    assert config.politeness.delay == 1.0 and config.politeness.concurrency == 64
    assert config.bounds.scope is Scope.DOMAIN and config.bounds.max_depth is None
    assert config.replication.replicas == 1 and config.control.address is None
    PolitenessConfig(delay=0.0, concurrency=1)
    BoundsConfig(max_depth=0)
    ForwardingConfig(batch_size=1, batch_linger=0.0)
    ForwardingConfig(batch_size=10_000)


def test_sections_are_frozen() -> None:
    config = CrawlConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.politeness.delay = 2.0  # type: ignore[misc]


def test_the_user_agent_names_the_peer() -> None:
    config = CrawlConfig(fetch=FetchConfig(user_agent="bot/1 (+http://x.test)"))
    assert config.agent_string("p1") == "bot/1 (+http://x.test; peer=p1)"
    token = dataclasses.replace(config, peer_token="t", fetch=FetchConfig(user_agent="bot/1"))
    assert token.agent_string("p1") == "bot/1 (peer=t)"


def test_every_option_is_documented_and_every_flag_is_one_option() -> None:
    found = settings(CrawlConfig)
    assert all(s.option.help for s in found)
    flags = [s.option.flag for s in found if s.option.flag]
    assert len(flags) == len(set(flags))


def test_a_value_built_by_path_is_named_by_its_path() -> None:
    config = build(CrawlConfig, {"politeness.delay": 2, "bounds.scope": "host", "join": ["a:1"]})
    assert config.politeness.delay == 2.0 and isinstance(config.politeness.delay, float)
    assert config.bounds.scope is Scope.HOST and config.join == ("a:1",)
    with pytest.raises(ConfigError, match=r"^forwarding\.batch_size must be >= 1, not 0$"):
        build(CrawlConfig, {"forwarding.batch_size": 0})


# -- through the command line -------------------------------------------------------


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "crawl.toml"
    path.write_text(text)
    return path


def test_flags_build_the_peers_sections(peer_config: Any, tmp_path: Path) -> None:
    config = peer_config(
        "--data", str(tmp_path), "--delay", "0.5", "--concurrency", "8", "--scope", "host",
        "--no-bodies", "--join", "a:1", "--join", "b:2", "--control", "127.0.0.1:0",
        "--replicas", "2", "--timeout", "3",
    )  # fmt: skip
    assert config.data_dir == tmp_path
    assert (config.politeness.delay, config.politeness.concurrency) == (0.5, 8)
    assert config.bounds.scope is Scope.HOST and not config.fetch.store_bodies
    assert config.join == ("a:1", "b:2") and config.replication.replicas == 2
    assert config.control == ControlConfig(address="127.0.0.1:0")
    assert config.fetch.read_timeout == 3.0


def test_a_file_alone_gives_its_values(peer_config: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    path = _write(
        tmp_path,
        f'data_dir = "{data}"\n[politeness]\ndelay = 0.25\n[bounds]\nmax_depth = 3\n'
        '[store]\nhost_window = 16\n[control]\naddress = "127.0.0.1:0"\n',
    )
    config = peer_config("--config", str(path))
    assert config.data_dir == data  # --data is not needed then
    assert config.politeness.delay == 0.25 and config.bounds.max_depth == 3
    assert config.store.host_window == 16 and config.control.address == "127.0.0.1:0"
    # What neither gives keeps its default: a flag left out overrides nothing.
    assert config.politeness.concurrency == 64 and config.fetch.read_timeout == 30.0


def test_a_path_from_the_home_is_the_home_s(
    peer_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No shell reads a config file, nor the ~ of --data=~/crawl: a directory named ~
    was made in the working one (QA)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    path = _write(tmp_path, 'data_dir = "~/crawl"\n')
    assert peer_config("--config", str(path)).data_dir == tmp_path / "crawl"
    assert peer_config("--data=~/other").data_dir == tmp_path / "other"
    # One with no home to be found is as written, not a traceback (a review).
    assert peer_config("--data=~nosuchuser5/x").data_dir == Path("~nosuchuser5/x")


def test_a_list_of_one_may_be_given_as_its_one_string(peer_config: Any, tmp_path: Path) -> None:
    """``join = "a:7000"`` was refused: "must be a list of strings" (QA)."""
    path = _write(tmp_path, 'join = "127.0.0.1:7999"\n[fetch]\naccept = "image/*"\n')
    config = peer_config("--config", str(path), "--data", str(tmp_path))
    assert config.join == ("127.0.0.1:7999",) and config.fetch.accept == ("image/*",)


def test_flags_given_override_the_file(peer_config: Any, tmp_path: Path) -> None:
    path = _write(tmp_path, "[politeness]\ndelay = 0.25\nconcurrency = 4\n")
    config = peer_config("--config", str(path), "--data", str(tmp_path), "--delay", "2")
    assert config.politeness.delay == 2.0  # the flag's
    assert config.politeness.concurrency == 4  # the file's, not the flag's default


def test_the_secret_comes_from_the_flag_then_the_environment_then_the_file(
    peer_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _write(tmp_path, 'data_dir = "d"\nsecret = "from-file"\n')
    assert peer_config("--config", str(path)).secret == "from-file"
    monkeypatch.setenv("UBIPY_SECRET", "from-env")
    assert peer_config("--config", str(path)).secret == "from-env"
    assert peer_config("--config", str(path), "--secret", "from-flag").secret == "from-flag"


def test_the_example_file_loads(peer_config: Any) -> None:
    example = ROOT / "examples" / "crawl.toml"
    values = read_file(CrawlConfig, example)
    assert "politeness.delay" in values and "replication.replicas" in values
    config = peer_config("--config", str(example))
    assert config.replication.replicas == 2 and config.bounds.scope is Scope.DOMAIN


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[politeness]\ndelay = -1\n", "crawl.toml: politeness.delay must be >= 0, not -1"),
        ("[politeness]\ndelay = 'fast'\n", "crawl.toml: politeness.delay must be a number"),
        ("[politeness]\ndealy = 1\n", "option politeness.dealy (did you mean [politeness] delay?)"),
        # An option outside its table: it said only "unknown option delay".
        ("delay = 1\n", "crawl.toml: unknown option delay (did you mean [politeness] delay?)"),
        ("nonsense = 1\n", "crawl.toml: unknown option nonsense\n"),
        # A flag's name for its key: it hinted at [dns] timeout (QA).
        ("[fetch]\ntimeout = 10\n", "option fetch.timeout (did you mean [fetch] read_timeout?)"),
        ("[control]\ncontrol = 'x'\n", "option control.control (did you mean [control] address?)"),
        ("[polite]\ndelay = 1\n", "crawl.toml: unknown section [polite]"),
        ("[bounds]\nscope = 'world'\n", "crawl.toml: bounds.scope must be one of 'host'"),
        ("[politeness]\nconcurrency = true\n", "crawl.toml: politeness.concurrency must be a"),
        # A float shown as written: "must be a whole number, not 32" puzzled (a review).
        (
            "[politeness]\nconcurrency = 32.0\n",
            "crawl.toml: politeness.concurrency must be a whole number, not 32.0",
        ),
        ("[politeness\n", "crawl.toml: not valid TOML"),
        ("data_dir = ''\n", "crawl.toml: data_dir must be a path (a non-empty string)"),
        # Sent in every request's User-Agent: the peer died at its first request.
        ("peer_token = 'caf\u00e9'\n", "crawl.toml: peer_token must be printable ASCII"),
        ("peer_token = 'a\\r\\nX: 1'\n", "crawl.toml: peer_token must be printable ASCII"),
    ],
)
def test_a_bad_file_ends_the_command_on_one_line(
    peer_config: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(SystemExit) as ended:
        peer_config("--config", str(path), "--data", str(tmp_path))
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ubipy peer: error: ")
    assert message in err and str(path) in err


def test_a_file_not_in_utf_8_ends_the_command_on_one_line(
    peer_config: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """TOML is UTF-8: a file saved in windows-1252 ended in a traceback."""
    path = tmp_path / "crawl.toml"
    path.write_bytes(b'user_agent = "caf\xe9"\n')
    with pytest.raises(SystemExit) as ended:
        peer_config("--config", str(path), "--data", str(tmp_path))
    assert ended.value.code == 2
    assert capsys.readouterr().err.endswith("crawl.toml: not valid TOML: not UTF-8 at byte 17\n")


def test_a_file_with_a_byte_order_mark_is_read(peer_config: Any, tmp_path: Path) -> None:
    # Notepad writes one: "not valid TOML: Invalid statement (at line 1, column 1)".
    path = tmp_path / "crawl.toml"
    path.write_bytes(b"\xef\xbb\xbf[politeness]\ndelay = 2.5\n")
    config = peer_config("--config", str(path), "--data", str(tmp_path))
    assert config.politeness.delay == 2.5


def test_a_missing_file_or_data_dir_ends_the_command(
    peer_config: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as ended:
        peer_config("--config", str(tmp_path / "nowhere.toml"), "--data", str(tmp_path))
    assert ended.value.code == 2
    assert "cannot read" in capsys.readouterr().err
    with pytest.raises(SystemExit) as ended:
        peer_config("--delay", "2")
    assert ended.value.code == 2
    assert "required: --data" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (("--delay", "-1"), "ubipy peer: error: --delay must be >= 0, not -1\n"),
        (("--concurrency", "0"), "ubipy peer: error: --concurrency must be >= 1, not 0\n"),
        # Path("") is the current directory: a typo'd --data "$DIR" must not crawl there.
        (("--data", ""), "ubipy peer: error: --data must be a path (a non-empty string), not ''\n"),
    ],
)
def test_a_bad_flag_ends_the_peer_with_one_clear_line(
    tmp_path: Path, flags: tuple[str, ...], message: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ubipy.cli", "peer", "--data", str(tmp_path), *flags],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (2, message)


def test_an_option_the_others_leave_without_effect_is_warned_of(
    peer_config: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Taken without a word, ``--refresh uniform`` without --recrawl let the operator
    believe the crawl would refresh (QA). The peer runs all the same."""
    path = _write(tmp_path, "[store]\nbodies = 'shard'\nwarc_level = 6\n")
    config = peer_config(
        "--config", str(path), "--data", str(tmp_path), "--refresh", "uniform",
        "--pagerank-every", "50", "--delay", "2",
    )  # fmt: skip
    assert config.recrawl.policy is RefreshPolicy.UNIFORM
    assert capsys.readouterr().err.splitlines() == [
        "ubipy peer: warning: --refresh has no effect without --recrawl",
        "ubipy peer: warning: --pagerank-every has no effect without --order pagerank",
        f"ubipy peer: warning: {path}: store.warc_level has no effect without --bodies warc",
    ]
    # The rejoin's grace is --replicas 1's (QA). (--no-bodies leaves --bodies warc its
    # effect: the WARC files hold every answer's request, response head and metadata.)
    peer_config(
        "--data", str(tmp_path), "--no-bodies", "--bodies", "warc", "--warc-size", "100",
        "--replicas", "2", "--rejoin-grace", "10",
    )  # fmt: skip
    assert capsys.readouterr().err.splitlines() == [
        "ubipy peer: warning: --rejoin-grace has no effect without --replicas 1",
    ]
    # A time-out the deadline always ends first, a linger its cap always cuts (QA);
    # a shorter deadline or cap alone is the user's intent, and not warned of.
    peer_config("--data", str(tmp_path), "--timeout", "200", "--batch-linger", "6")
    assert capsys.readouterr().err.splitlines() == [
        "ubipy peer: warning: --timeout has no effect without a --fetch-deadline at least as long",
        "ubipy peer: warning: --batch-linger has no effect without a --batch-linger-max at "
        "least as long",
    ]
    peer_config("--data", str(tmp_path), "--fetch-deadline", "10", "--batch-linger-max", "0.2")
    assert capsys.readouterr().err == ""
    # Each with what it needs: nothing to say.
    peer_config(
        "--data", str(tmp_path), "--refresh", "uniform", "--recrawl",
        "--pagerank-every", "50", "--order", "pagerank", "--warc-level", "6",
        "--rejoin-grace", "10", "--timeout", "200", "--fetch-deadline", "200",
    )  # fmt: skip
    assert capsys.readouterr().err == ""


def test_the_demo_has_its_own_defaults_and_checks_its_flags(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    got: list[CrawlConfig] = []

    async def run_demo(args: Any, config: CrawlConfig) -> int:
        got.append(config)
        return 0

    monkeypatch.setattr("ubipy.demo.run_demo", run_demo)
    assert main(["demo"]) == 0
    assert (got[0].politeness.delay, got[0].politeness.robots_retry_base) == (0.05, 0.2)
    assert main(["demo", "--delay", "0.5"]) == 0
    assert got[1].politeness.delay == 0.5
    with pytest.raises(SystemExit):
        main(["demo", "--max-body", "0"])
    assert capsys.readouterr().err == "ubipy demo: error: --max-body must be >= 1, not 0\n"


def test_the_docs_list_every_option_as_declared() -> None:
    text = config_doc.DOC.read_text(encoding="utf-8")
    assert config_doc.updated(text) == text, "run: python -m bench.config_doc"
