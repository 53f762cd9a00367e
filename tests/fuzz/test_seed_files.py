"""Seed files of any bytes: invalid UTF-8, NULs, very long lines, CR/LF mixes, BOMs,
control characters. The reader never raises; every line that is not blank or a
comment ends as a seed or as a problem naming that line, and the seeds are crawlable
URLs, each once."""

from __future__ import annotations

import codecs

from hypothesis import example, given
from hypothesis import strategies as st

from tests.fuzz.common import fuzz, mutated_bytes
from ubipy.fetch.seeds import SeedList, parse_seeds
from ubipy.fetch.urls import BadURL, normalize

ENDINGS = ["\n", "\r\n", "\r"]


def physical_lines(text: str) -> list[str]:
    """The file's lines as an editor numbers them: ended by LF, CRLF or CR."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def check(data: bytes) -> SeedList:
    seeds = parse_seeds(data)
    assert len(set(seeds.urls)) == len(seeds.urls), "a seed twice"
    for url in seeds.urls:
        assert url.startswith(("http://", "https://"))
        assert normalize(url) == url
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        text = data.decode("utf-16", errors="replace")  # PowerShell's ">" writes it
    elif b"\x00" in data[:8192]:
        # Refused whole, in one problem.
        assert seeds.urls == () and len(seeds.problems) == 1
        return seeds
    else:
        text = data.decode("utf-8-sig", errors="replace")
    lines = physical_lines(text)
    numbers = [p.line for p in seeds.problems]
    assert numbers == sorted(set(numbers)), "problems out of order or a line twice"
    assert all(1 <= n <= len(lines) for n in numbers)
    for problem in seeds.problems:
        assert problem.text == lines[problem.line - 1]
        str(problem)  # what the CLI prints
    wanted = [i for i, line in enumerate(lines, 1) if line.strip() and line.strip()[0] != "#"]
    # A line is a seed or a problem, not both and not neither.
    assert len(seeds.urls) + seeds.skipped == len(wanted)
    assert set(numbers) <= set(wanted)
    return seeds


# Pieces seed files are made of, good and bad.
_good = st.sampled_from(
    ["http://a.test/", "https://B.test:443/x?y=1#f", "http://user:pw@c.test/", "http://d.test/a b",
     "http://xn--nxasmq6b.test/", "http://é.test/ü", "http://[::1]:8080/", "http://10.0.0.1/"]
)  # fmt: skip
_bad = st.sampled_from(
    ["mailto:x@y.test", "ftp://a.test/", "not a url", "http://", "javascript:alert(1)",
     "http://a.test/\x00", "http://a.test/\x1chttp://b.test/", "http://a.test/\x0c",
     "http://a.test/\u2028http://b.test/", "http://a.test/\x85", "\ufeffhttp://a.test/",
     "http://" + "a" * 70_000 + ".test/", "http://a.test/" + "%" * 5000, "#", "  # note"]
)  # fmt: skip
_lines = _good | _bad | st.text(max_size=60) | st.sampled_from(["", " ", "\t", "# comment"])


@st.composite
def seed_files(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(_lines, max_size=12))
    text = "".join(line + draw(st.sampled_from(ENDINGS)) for line in lines)
    data = draw(st.sampled_from(["utf-8", "utf-8-sig", "utf-16", "latin-1", "cp1252"]))
    raw = text.encode(data, errors="replace")
    if draw(st.booleans()):
        raw = draw(mutated_bytes(raw))
    return raw


@fuzz(60)
@given(st.binary(max_size=3000) | seed_files())
@example(b"\xff\xfeh\x00t\x00")  # UTF-16 with its BOM
@example(b"x" * 9000 + b"\x00")  # a NUL past the binary sniff
@example(b"http://a.test/\x1chttp://b.test/\nhttp://c.test/\x0cx\n")
@example(b"\r\n\r\r\n\n\rhttp://a.test/\r\n\rhttp://a.test/")
def test_any_bytes_are_seeds_or_problems_by_line(data: bytes) -> None:
    check(data)


@st.composite
def good_files(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    """A file of crawlable URLs, any line endings, blank lines and comments between,
    comments after, maybe a BOM (Windows Notepad writes one); and its URLs."""
    urls = draw(st.lists(_good, min_size=1, max_size=8))
    parts = []
    for url in urls:
        if draw(st.booleans()):
            parts.append(draw(st.sampled_from(["", "   ", "# a comment", "\t# tabbed"])))
        parts.append(url + draw(st.sampled_from(["", "  ", " # why", "\t#why"])))
    endings = [draw(st.sampled_from(ENDINGS)) for _ in parts]
    text = "".join(p + e for p, e in zip(parts, endings, strict=True))
    bom = draw(st.sampled_from([b"", codecs.BOM_UTF8]))
    return bom + text.encode(), urls


@fuzz(40)
@given(good_files())
@example(
    (codecs.BOM_UTF8 + b"http://a.test/\r\nhttp://b.test/\n", ["http://a.test/", "http://b.test/"])
)
def test_a_file_of_good_urls_gives_each_once_whatever_its_line_endings(
    case: tuple[bytes, list[str]],
) -> None:
    data, urls = case
    seeds = check(data)
    expected = list(dict.fromkeys(_normal(u) for u in urls))
    assert list(seeds.urls) == expected
    assert all(p.reason.startswith("duplicate") for p in seeds.problems)


def _normal(url: str) -> str:
    try:
        return normalize(url)
    except BadURL as exc:  # pragma: no cover - _good holds only crawlable URLs
        raise AssertionError(url) from exc
