"""Reading a seeds file: one URL a line, ``#`` comments, blank lines ignored.

A bad line never spoils the file: it is reported with its line number and the
good lines are kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import BinaryIO

from ubipy.errors import UbipyError
from ubipy.fetch.urls import BadURL, normalize_reporting

# A seeds file is read whole before it is parsed: past this it is refused, not read
# on until memory runs out (an endless pipe, /dev/zero, a wrong file). A million URLs
# take about 60 MB.
MAX_SEEDS_BYTES = 64 << 20
# Problems kept with their line; past these, only counted (a file of bad lines kept
# one object a line: 700 MB for 8 MB of them).
MAX_LISTED_PROBLEMS = 100
_HEAD = 8192
_BINARY = "looks like a binary file, not a list of URLs"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
# A line and its end (LF, CRLF or CR), or the last line without one.
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


class SeedsFileError(UbipyError, ValueError):
    """A seeds file refused whole (binary, or too large), in one line."""


def read_seeds(stream: BinaryIO) -> bytes:
    """A seeds file's bytes, refused as soon as its start shows it binary or it grows
    past :data:`MAX_SEEDS_BYTES`, before all of it is in memory."""
    head = stream.read(_HEAD)
    if _binary(head):
        raise SeedsFileError(_BINARY)
    chunks, size = [head], len(head)
    while chunk := stream.read(1 << 20):
        size += len(chunk)
        if size > MAX_SEEDS_BYTES:
            raise SeedsFileError(
                f"larger than {MAX_SEEDS_BYTES >> 20} MiB: split it into several files"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def _binary(data: bytes) -> bool:
    """Whether a file starting with ``data`` is no text (UTF-16 has NULs, and its BOM)."""
    return b"\x00" in data[:_HEAD] and data[:2] not in _UTF16_BOMS


@dataclass(frozen=True, slots=True)
class SeedProblem:
    line: int
    text: str
    reason: str

    def __str__(self) -> str:
        shown = self.text if len(self.text) <= 80 else self.text[:77] + "..."
        return f"line {self.line}: {self.reason}: {shown!r}"


@dataclass(frozen=True, slots=True)
class SeedList:
    urls: tuple[str, ...]
    # The first MAX_LISTED_PROBLEMS lines skipped, with why; ``unlisted`` more.
    problems: tuple[SeedProblem, ...]
    # Lines whose URL carried userinfo (``user:pass@``), kept without it.
    credentials_stripped: int = 0
    unlisted: int = 0

    @property
    def skipped(self) -> int:
        """Lines that are neither a seed nor blank nor a comment."""
        return len(self.problems) + self.unlisted


# A host name (and port) alone, as a line of a seeds file often is.
_BARE_HOST = re.compile(r"[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+(:\d+)?/?")


def parse_seeds(data: bytes) -> SeedList:
    """Parse a seeds file's bytes into normalised URLs and per-line problems."""
    urls: list[str] = []
    problems: list[SeedProblem] = []
    seen: dict[str, int] = {}
    stripped = unlisted = 0

    def skip(lineno: int, raw: str, reason: str) -> None:
        nonlocal unlisted
        if len(problems) < MAX_LISTED_PROBLEMS:
            problems.append(SeedProblem(lineno, raw, reason))
        else:
            unlisted += 1

    if _binary(data):
        return SeedList((), (SeedProblem(0, "", _BINARY),))
    encoding = "UTF-8"
    if data[:2] in _UTF16_BOMS:
        # What PowerShell's ">" writes (UTF-16 with its BOM).
        text, encoding = data.decode("utf-16", errors="replace"), "UTF-16"
    else:
        # utf-8-sig: a BOM (Windows Notepad writes one) would otherwise spoil the first URL.
        text = data.decode("utf-8-sig", errors="replace")
    # Lines end at LF, CRLF or CR only, as an editor numbers them: str.splitlines()
    # also splits at form feeds, U+001C-U+001E, U+0085 and U+2028/9, which would
    # number lines wrongly and turn one line with a control character into seeds.
    # One at a time: a list of them took twenty times a file of short lines.
    for lineno, found in enumerate(_LINE.finditer(text), start=1):
        raw = found.group().rstrip("\r\n")
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        # "#" inside a URL is a fragment; only a "#" after white space starts a comment.
        line = line.split(" #", 1)[0].split("\t#", 1)[0].strip()
        if "\ufffd" in line:
            skip(lineno, raw, f"not valid {encoding}")
            continue
        try:
            url, had_userinfo = normalize_reporting(line)
        except BadURL as exc:
            reason = f"not a crawlable URL ({exc.reason.value})"
            if "://" not in line and _BARE_HOST.fullmatch(line):
                # A host alone was only "(invalid)" (QA).
                reason += f"; no scheme: http://{line.rstrip('/')}/ ?"
            skip(lineno, raw, reason)
            continue
        stripped += had_userinfo
        if url in seen:
            skip(lineno, raw, f"duplicate of line {seen[url]}")
            continue
        seen[url] = lineno
        urls.append(url)
    return SeedList(tuple(urls), tuple(problems), stripped, unlisted)
