"""The ``ubipy`` command's entry point, which loads the program.

Its modules take a third of a second to import, and Ctrl-C meanwhile printed a
traceback of 20 to 30 lines from deep in the imports (QA); once loaded, each command
answers an interrupt itself (``ubipy.cli``)."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main() -> None:
    try:
        from ubipy.cli import main as run

        code = run()
    except KeyboardInterrupt:
        print("ubipy: interrupted", file=sys.stderr)
        code = 130
    raise SystemExit(code)
