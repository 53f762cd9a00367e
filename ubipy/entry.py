"""The ``ubipy`` command's entry point, which loads the program.

Its modules take a third of a second to import, and Ctrl-C meanwhile printed a
traceback of 20 to 30 lines from deep in the imports (QA); once loaded, each command
answers an interrupt itself (``ubipy.cli``)."""

from __future__ import annotations

import signal
import sys

__all__ = ["main"]


def main() -> None:
    # Started with `&` from a script, a process inherits SIGINT ignored, and Python then
    # installs no handler of its own: the peer takes SIGINT once its signal watcher is
    # up, but one sent in its first third of a second was lost, and the peer ran on
    # (QA). Taken from the start, as it is later.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        from ubipy.cli import main as run

        code = run()
    except KeyboardInterrupt:
        print("ubipy: interrupted", file=sys.stderr)
        code = 130
    raise SystemExit(code)
