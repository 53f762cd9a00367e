"""Write the options' reference into docs/configuration.md, from their declarations.

    python -m bench.config_doc          # rewrite the reference in place
    python -m bench.config_doc --check  # status 1 if it is out of date

Only the part between the two markers is rewritten; the prose around it is the
file's own. tests/test_config.py fails while the file is out of date.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ubipy.config import CrawlConfig
from ubipy.options import reference

DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"
BEGIN = "<!-- the options: written by `python -m bench.config_doc`; do not edit by hand -->"
END = "<!-- end of the options -->"


def updated(text: str) -> str:
    """``text`` with the reference between the markers made afresh."""
    if BEGIN not in text or END not in text:
        raise ValueError(f"{DOC} lacks the markers {BEGIN!r} and {END!r}")
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n\n{reference(CrawlConfig)}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only say whether it is up to date")
    args = p.parse_args(argv)
    text = DOC.read_text(encoding="utf-8")
    fresh = updated(text)
    if args.check:
        if fresh != text:
            print(f"{DOC} is out of date: run python -m bench.config_doc", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
