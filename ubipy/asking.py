"""The command line asking a running peer (``ubipy seed``, ``ubipy status``): the
options every such command takes, one question and its answer, and what to tell the
user when none comes."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TypeVar

import trio

from ubipy.checks import some_seconds
from ubipy.net import request
from ubipy.wire import Message, Status, StatusRequest, secret_doubt, secret_from

__all__ = ["ask", "asking_options", "unreachable"]

A = TypeVar("A", bound=Message)


def asking_options(p: argparse.ArgumentParser) -> None:
    """``--secret`` and ``--timeout``, for a command that asks a peer."""
    p.add_argument(
        "--secret",
        default=None,
        help="the cluster secret that authenticates every frame between peers "
        "(default: $UBIPY_SECRET; without one, peers stay on loopback)",
    )
    p.add_argument(
        "--timeout",
        type=some_seconds,
        default=30.0,
        metavar="SECONDS",
        help="how long to wait for the peer's answer (default: %(default)s)",
    )


def _secret(args: argparse.Namespace) -> bytes:
    return secret_from(args.secret or os.environ.get("UBIPY_SECRET"))


def ask(args: argparse.Namespace, message: Message, answer: type[A]) -> A:
    """Ask a peer, and wait for its answer; OSError if it answers something else."""

    def waiting() -> None:
        # A frozen peer (a stopped process, a hung machine) accepts the connection and
        # says nothing: the user hears why the prompt is silent (QA).
        print(
            f"ubipy {args.command}: {args.peer} has not answered yet; waiting up to "
            f"{args.timeout:g} s in all (--timeout)",
            file=sys.stderr,
        )

    async def go() -> Message:
        return await request(
            args.peer, _secret(args), message, patience=args.timeout, waiting=waiting
        )

    got = trio.run(go)
    if not isinstance(got, answer):
        raise OSError(f"{args.peer} answered {got.KIND.name}, not {answer.KIND.name}")
    return got


def unreachable(args: argparse.Namespace, exc: OSError) -> str:
    """What to say when ``ask`` failed."""
    # A refused secret reached the peer: "cannot reach" would send the user looking
    # at the network. One never given read as a wrong one (QA).
    if not isinstance(exc, PermissionError):
        return f"cannot reach peer {args.peer}: {exc}"
    given = args.secret or os.environ.get("UBIPY_SECRET")
    if not given:
        return f"{exc}; none was given (--secret, or UBIPY_SECRET)"
    doubt = secret_doubt(given)
    said = f"{exc}; the secret given: {doubt}" if doubt else f"{exc}"
    if not args.secret:
        # Exported for another cluster, it was sent to a peer started with none (QA).
        said += (
            "; it was $UBIPY_SECRET's: a peer started without a secret takes none, so "
            "unset it to ask one"
        )
    return said


def say_paused(args: argparse.Namespace) -> None:
    """Say why the peer asked fetches nothing now, if it does not (its own status):
    seeds taken by a peer waiting to join said "1 new there" and nothing more (QA)."""
    try:
        report = ask(args, StatusRequest(cluster=False), Status)
    except OSError:
        return
    for row in report.peers:
        why = row.get("paused")
        if why and row.get("joining"):
            # Said as the majority's lease, it sent the user to read about leases, where
            # its --join address was wrong or down (QA).
            why = (
                f"it is still joining the cluster (attempt {row['joining']}): no --join "
                "address has answered yet"
            )
        if why:
            print(f"ubipy {args.command}: the peer fetches nothing for now: {why}",
                  file=sys.stderr)  # fmt: skip
