"""Reading a seeds file: one URL a line, ``#`` comments, blank lines ignored.

A bad line never spoils the file: it is reported with its line number and the
good lines are kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from ubipy.fetch.urls import BadURL, normalize_reporting


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
    problems: tuple[SeedProblem, ...]
    # Lines whose URL carried userinfo (``user:pass@``), kept without it.
    credentials_stripped: int = 0


def parse_seeds(data: bytes) -> SeedList:
    """Parse a seeds file's bytes into normalised URLs and per-line problems."""
    urls: list[str] = []
    problems: list[SeedProblem] = []
    seen: dict[str, int] = {}
    stripped = 0
    if b"\x00" in data[:8192]:
        return SeedList((), (SeedProblem(0, "", "looks like a binary file, not a list of URLs"),))
    # utf-8-sig: a BOM (Windows Notepad writes one) would otherwise spoil the first URL.
    text = data.decode("utf-8-sig", errors="replace")
    # Lines end at LF, CRLF or CR only, as an editor numbers them: str.splitlines()
    # also splits at form feeds, U+001C-U+001E, U+0085 and U+2028/9, which would
    # number lines wrongly and turn one line with a control character into seeds.
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    for lineno, raw in enumerate(lines, start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        # "#" inside a URL is a fragment; only a "#" after white space starts a comment.
        line = line.split(" #", 1)[0].split("\t#", 1)[0].strip()
        if "\ufffd" in line:
            problems.append(SeedProblem(lineno, raw, "not valid UTF-8"))
            continue
        try:
            url, had_userinfo = normalize_reporting(line)
        except BadURL as exc:
            problems.append(SeedProblem(lineno, raw, f"not a crawlable URL ({exc.reason.value})"))
            continue
        stripped += had_userinfo
        if url in seen:
            problems.append(SeedProblem(lineno, raw, f"duplicate of line {seen[url]}"))
            continue
        seen[url] = lineno
        urls.append(url)
    return SeedList(tuple(urls), tuple(problems), stripped)
