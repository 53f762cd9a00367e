"""What the command line checks before it starts anything: addresses are HOST:PORT
with a port in range, the command's own numbers are in theirs, a peer listening on
a wildcard address says what others should dial. A bad value ends the command with
status 2 and one line that names the option (the configuration's sections check
their own numbers, in :mod:`ubipy.config`).
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NoReturn

from ubipy.config import BodyStore, CrawlConfig, CrawlOrder
from ubipy.errors import ConfigError
from ubipy.net import split_address

__all__ = [
    "OneLineParser",
    "address",
    "any_port_address",
    "at_least",
    "check_addresses",
    "idle_options",
    "output_path",
    "path",
    "peer_address",
    "seconds",
    "verbose_parent",
]

_MAX_PORT = 65535


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line: what is wrong, named (the usage
    is a --help away, and a screenful of it would hide the line that matters)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def address(text: str, lowest_port: int = 0) -> str:
    """``text`` if it is HOST:PORT with a port from ``lowest_port`` to 65535;
    ValueError saying what is wrong otherwise."""
    digits = text.rpartition(":")[2]
    try:
        host, port = split_address(text)
    except ValueError:
        if ":" in text and digits.isascii() and digits.isdigit():  # a port out of range
            port = _MAX_PORT + 1
        else:
            raise ValueError(f"must be HOST:PORT, not {text!r}") from None
    else:
        if any(c.isspace() or c in "/@," for c in host):
            raise ValueError(f"must be HOST:PORT, not {text!r}")
        written = text.rpartition(":")[0]
        if ":" in written and not (written.startswith("[") and written.endswith("]")):
            # "fe80::1" was host "fe80:" on port 1, dialled for ever.
            raise ValueError(
                f"must be HOST:PORT, an IPv6 address in brackets ([::1]:7000), not {text!r}"
            )
    if not lowest_port <= port <= _MAX_PORT:
        raise ValueError(f"must have a port from {lowest_port} to {_MAX_PORT}, not {digits}")
    return text


def _flag_type(check: Callable[[str], object]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        try:
            check(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return text

    return parse


# What ``ubipy seed`` and ``status`` dial, and the demo's endpoints (port 0: any).
peer_address = _flag_type(lambda text: address(text, lowest_port=1))
any_port_address = _flag_type(address)


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False


_RECRAWL = ("policy", "share", "rate", "min_interval", "max_interval", "replan", "lastmod_hints")
# Options that others leave without effect: the options, whether they take effect in a
# configuration, and what they need, in words.
_NEEDS: tuple[tuple[tuple[str, ...], Callable[[CrawlConfig], bool], str], ...] = (
    (tuple(f"recrawl.{n}" for n in _RECRAWL), lambda c: c.recrawl.recrawl, "--recrawl"),
    (
        ("bounds.pagerank_every",),
        lambda c: c.bounds.order is CrawlOrder.PAGERANK,
        "--order pagerank",
    ),
    (
        ("store.warc_size", "store.warc_max_age", "store.warc_level"),
        lambda c: c.store.bodies is BodyStore.WARC,
        "--bodies warc",
    ),
    (("replication.rejoin_grace",), lambda c: c.replication.replicas == 1, "--replicas 1"),
    # A silence longer than the whole request's deadline is never waited out (QA).
    (
        ("fetch.read_timeout",),
        lambda c: c.fetch.read_timeout <= c.fetch.fetch_deadline,
        "a --fetch-deadline at least as long",
    ),
    (
        ("forwarding.batch_linger",),
        lambda c: c.forwarding.batch_linger <= c.forwarding.batch_linger_max,
        "a --batch-linger-max at least as long",
    ),
)


def idle_options(config: CrawlConfig, given: Iterable[str]) -> list[tuple[str, str]]:
    """Of the options ``given`` (dotted paths), those the rest of ``config`` leaves
    without effect, and what each needs: ``--refresh uniform`` without --recrawl was
    taken without a word, and the operator believed the crawl would refresh (QA)."""
    given = set(given)
    return [
        (path, needs)
        for paths, takes_effect, needs in _NEEDS
        if not takes_effect(config)
        for path in paths
        if path in given
    ]


def check_addresses(config: CrawlConfig) -> None:
    """ConfigError, naming the option, for an address that is not HOST:PORT in range,
    or a wildcard --listen without an --advertise (others would be told 0.0.0.0)."""
    checks: list[tuple[str, str, int]] = [("listen", config.listen, 0)]
    checks += [("join", join, 1) for join in config.join]
    if config.advertise is not None:
        checks.append(("advertise", config.advertise, 1))
    if config.control.address is not None:
        checks.append(("control.address", config.control.address, 0))
    for name, text, lowest in checks:
        try:
            address(text, lowest)
        except ValueError as exc:
            raise ConfigError(str(exc), name) from None
    if config.advertise is not None and not config.advertise.rpartition(":")[0]:
        # ":7000" was taken (an empty host listens on loopback) and told to the others,
        # whose membership refuses an address without a host: never joined (a review).
        raise ConfigError(
            f"must be an address other peers can dial, with its host, not {config.advertise}",
            "advertise",
        )
    if config.advertise is not None and _is_wildcard(split_address(config.advertise)[0]):
        raise ConfigError(
            f"must be an address other peers can dial, not the wildcard {config.advertise}",
            "advertise",
        )
    control = config.control.address
    if control is not None and control == config.listen and not control.endswith(":0"):
        # Both bound the same port: the second failed as "address already in use",
        # which read as the peer's own port being taken.
        raise ConfigError(
            f"{control} is --listen's address: give the control centre its own", "control.address"
        )
    if config.advertise is None and _is_wildcard(split_address(config.listen)[0]):
        raise ConfigError(
            f"{config.listen} is a wildcard address, which others cannot dial: say what "
            "they should with --advertise HOST:PORT (advertise in a config file)",
            "listen",
        )


def path(text: str) -> Path:
    """An argparse type: a path, never empty (``Path('')`` is the current directory,
    which nobody means by an empty --data)."""
    if not text:
        raise argparse.ArgumentTypeError("must be a path, not ''")
    return Path(text)


def verbose_parent() -> OneLineParser:
    """A parent parser for each command: ``-v`` after the command too (``ubipy status
    -v`` was refused), the top level's ``-v`` standing when it is not given there."""
    parent = OneLineParser(add_help=False)
    parent.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,
        help="log every fetch failure, as ubipy -v does (default: off)",
    )
    return parent


def output_path(text: str) -> Path:
    """An argparse type: an output's path (:func:`path`). One ending in a slash names a
    directory: refused unless one is there (``Path`` drops the slash, and the output
    was written as a file of that name)."""
    out = path(text)
    if text.endswith(("/", os.sep)) and not out.is_dir():
        raise argparse.ArgumentTypeError(f"{text} ends in / but is no existing directory")
    return out


def at_least(low: int, most: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number >= ``low`` (and <= ``most``, if given)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a whole number, not {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be >= {low}, not {value}")
        if most is not None and value > most:
            raise argparse.ArgumentTypeError(f"must be <= {most}, not {value}")
        return value

    return parse


def seconds(text: str) -> float:
    """An argparse type: a number of seconds >= 0 (inf: until stopped)."""
    value = _seconds(text)
    if not value >= 0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be >= 0, not {text}")
    return value


def some_seconds(text: str) -> float:
    """An argparse type: a number of seconds > 0 (a wait of none was taken, and its
    time-out blamed on a firewall, QA); -5 is told as 0 is (it was told ">= 0": QA)."""
    value = _seconds(text)
    if not value > 0:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be > 0, not {text}")
    return value


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, not {text!r}") from None
