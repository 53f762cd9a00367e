"""Seed files on the command line: read (bounded, standard input as "-"), their
problems said a line each, and what the peer refused summed up; for ``ubipy peer
--seeds`` and ``ubipy seed`` alike."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import trio

from ubipy.errors import StorageError
from ubipy.fetch import SeedList, parse_seeds, read_seeds
from ubipy.peer import SeedResult
from ubipy.wording import counted

__all__ = [
    "peer_seeds",
    "read_seeds_file",
    "refusals",
    "say_problems",
    "seed_summary",
    "seeds_taken",
    "take_seeds",
]


def say_problems(path: Path, seeds: SeedList) -> None:
    for problem in seeds.problems:
        print(f"{path}: {problem}", file=sys.stderr)
    if seeds.unlisted:
        print(f"{path}: and {seeds.unlisted} more lines skipped", file=sys.stderr)


def read_seeds_file(path: Path) -> bytes:
    """A seeds file's bytes ("-": standard input), bounded (:func:`read_seeds`)."""
    if str(path) == "-":
        return read_seeds(sys.stdin.buffer)
    with path.open("rb") as stream:
        return read_seeds(stream)


def peer_seeds(path: Path) -> SeedList:
    """``peer --seeds``: a file of no usable URL is said, and the peer goes on without
    (a crawl resumed from its shard needs none). OSError: the file cannot be read;
    SeedsFileError: it is no list of URLs at all (binary, too large), most likely the
    wrong file named, refused as ``ubipy seed`` refuses it (the peer ran idle: QA)."""
    seeds = parse_seeds(read_seeds_file(path))
    say_problems(path, seeds)
    return seeds


def refusals(refused: Sequence[tuple[str, str]]) -> str:
    """``3 refused (2 excluded by --exclude, 1 not a URL)``: seeds the peer did not take."""
    reasons = Counter(reason for _, reason in refused)
    told = ", ".join(f"{n} {reason}" for reason, n in reasons.most_common())
    return f"{len(refused)} refused ({told})"


def seed_summary(
    peer: str,
    seeds: SeedList,
    sent: int,
    admitted: int,
    forwarded: int,
    refused: Sequence[tuple[str, str]],
) -> str:
    """``ubipy seed``'s last line: what the peer made of the seeds it was sent (those
    it knew already counted too: "sent 2 seeds: 0 new there, 1 forwarded" left one
    out, QA), and what the file had besides."""
    known = sent - admitted - forwarded - len(refused)
    return (
        f"sent {counted(sent, 'seed')} to {peer}: {admitted} new there, "
        f"{forwarded} forwarded to their owners"
        + (f", {known} known there already" if known > 0 else "")
        + (f", {refusals(refused)}" if refused else "")
        + (f"; {counted(seeds.skipped, 'line')} skipped" if seeds.skipped else "")
        + (f"; credentials removed from {n}" if (n := seeds.credentials_stripped) else "")
    )


def seeds_taken(taken: SeedResult) -> str:
    """``peer --seeds``'s line once the peer took them (it said nothing unless some
    were refused: QA): ``12 seeds: 10 new, 1 for other peers, 1 refused (...)``."""
    known = taken.offered - taken.admitted - taken.forwarded - len(taken.refused)
    return (
        f"{counted(taken.offered, 'seed')}: {taken.admitted} new"
        + (f", {taken.forwarded} for other peers" if taken.forwarded else "")
        + (f", {known} known already" if known > 0 else "")
        + (f", {refusals(taken.refused)}" if taken.refused else "")
    )


async def take_seeds(
    seed: Callable[[Sequence[str]], SeedResult], retry: float, name: Path, seeds: SeedList
) -> None:
    """``peer --seeds``: ``seeds`` (from the file ``name``) taken by ``seed`` once the
    shard takes writes, tried every ``retry`` seconds until then: refused at the start
    (a full disk), they were dropped, and the peer ran idle for ever (QA)."""
    said = False
    while True:  # until taken, or the peer stops (its nursery is cancelled)
        try:
            taken = seed(seeds.urls)
        except StorageError as exc:
            if not said:
                print(f"ubipy peer: cannot take the seeds yet: {exc}; trying again every "
                      f"{retry:g} s", file=sys.stderr)  # fmt: skip
                said = True
            await trio.sleep(retry)
            continue
        for url, reason in taken.refused:
            print(f"{name}: seed refused ({reason}): {url[:80]!r}", file=sys.stderr)
        print(f"{name}: {seeds_taken(taken)}", file=sys.stderr)
        return
