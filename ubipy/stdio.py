"""Standard output and the terminal, once their reader has gone."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["drop_stdout", "to_devnull"]


def drop_stdout() -> None:
    """Point standard output at /dev/null: what its buffer still holds would otherwise
    fail again at exit, with a traceback-like warning and exit status 120."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (captured): nothing is flushed to it at exit
    to_devnull([fd])


def to_devnull(fds: Sequence[int]) -> None:
    """Point the descriptors ``fds`` at /dev/null."""
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        for fd in fds:
            os.dup2(null, fd)
    finally:
        os.close(null)
