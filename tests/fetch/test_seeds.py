"""Seed files: bad lines are reported by number, good ones kept."""

from __future__ import annotations

import io
from typing import Any

import pytest

from ubipy.fetch import seeds
from ubipy.fetch.seeds import SeedsFileError, parse_seeds, read_seeds


def test_comments_blanks_bad_lines_and_duplicates() -> None:
    data = (
        b"# seeds\n"
        b"http://Example.COM:80/a#frag\n"
        b"\n"
        b"   \n"
        b"not a url at all\n"
        b"mailto:someone@example.com\n"
        b"http://example.com/a  # the same page again\n"
        b"https://other.test/x?y=1\n"
        b"http://" + b"a" * 3000 + b".test/\n"
    )
    seeds = parse_seeds(data)
    assert seeds.urls == ("http://example.com/a", "https://other.test/x?y=1")
    by_line = {p.line: p.reason for p in seeds.problems}
    assert set(by_line) == {5, 6, 7, 9}
    assert "duplicate of line 2" in by_line[7]
    assert "scheme" in by_line[6]
    assert "too_long" in by_line[9]


def test_a_binary_file_is_refused_as_a_whole() -> None:
    seeds = parse_seeds(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
    assert seeds.urls == ()
    assert "binary" in seeds.problems[0].reason


def test_invalid_utf8_lines_are_reported() -> None:
    seeds = parse_seeds(b"http://ok.test/\nhttp://bad.test/\xff\xfe\n")
    assert seeds.urls == ("http://ok.test/",)
    assert seeds.problems[0].line == 2


def test_an_empty_file_has_no_seeds_and_no_problems() -> None:
    seeds = parse_seeds(b"")
    assert seeds.urls == () and seeds.problems == ()


def test_credentials_are_stripped_counted_and_the_same_url_is_one_seed() -> None:
    seeds = parse_seeds(
        b"http://user:pass@example.com/a\n"
        b"http://example.com/a\n"
        b"http://@example.com/b\n"
        b"http://u@[::1]:8080/\n"
    )
    assert seeds.urls == ("http://example.com/a", "http://example.com/b", "http://[::1]:8080/")
    assert seeds.credentials_stripped == 2
    assert [(p.line, p.reason) for p in seeds.problems] == [(2, "duplicate of line 1")]


def test_a_utf16_file_is_read_as_powershell_wrote_it() -> None:
    """PowerShell's ">" writes UTF-16 with its BOM: it was refused as binary."""
    data = "http://a.test/x\r\n# note\r\nhttps://b.test/\r\n".encode("utf-16")
    assert parse_seeds(data).urls == ("http://a.test/x", "https://b.test/")
    cut = parse_seeds(data + b"x")  # an odd byte at the end
    assert [(p.line, p.reason) for p in cut.problems] == [(4, "not valid UTF-16")]


def test_a_file_is_refused_whole_before_it_is_all_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """/dev/zero, an endless pipe, a wrong file: read whole, they ran memory out
    (found by a review)."""

    class Endless(io.RawIOBase):
        def __init__(self, line: bytes) -> None:
            self.line, self.given = line, 0

        def readinto(self, buffer: Any) -> int:
            n = len(buffer)
            buffer[:n] = (self.line * (n // len(self.line) + 1))[:n]
            self.given += n
            return n

    zeros = Endless(b"\x00")
    with pytest.raises(SeedsFileError, match="binary"):
        read_seeds(zeros)  # type: ignore[arg-type]
    assert zeros.given == 8192
    monkeypatch.setattr(seeds, "MAX_SEEDS_BYTES", 4 << 20)
    lines = Endless(b"http://a.test/\n")
    with pytest.raises(SeedsFileError, match="larger than 4 MiB"):
        read_seeds(lines)  # type: ignore[arg-type]
    assert lines.given <= (4 << 20) + (1 << 20) + 8192
    assert read_seeds(io.BytesIO(b"http://a.test/\n")) == b"http://a.test/\n"


def test_past_a_hundred_bad_lines_they_are_counted_not_kept() -> None:
    """Each kept with its line, a file of bad lines took a hundred times its size in
    memory (found by a review)."""
    data = b"http://a.test/\n" + b"ab\n" * 10_000
    listed = parse_seeds(data)
    assert listed.urls == ("http://a.test/",)
    assert [p.line for p in listed.problems] == list(range(2, 102))
    assert listed.unlisted == 9_900 and listed.skipped == 10_000


def test_a_host_alone_is_said_to_want_a_scheme() -> None:
    """A bare host in a seeds file was only "(invalid)" (QA)."""
    got = parse_seeds(b"h003.synth.test\nexample.com:8080/\nnot a url\n")
    assert [p.reason for p in got.problems] == [
        "not a crawlable URL (invalid); no scheme: http://h003.synth.test/ ?",
        "not a crawlable URL (scheme); no scheme: http://example.com:8080/ ?",
        "not a crawlable URL (invalid)",
    ]
